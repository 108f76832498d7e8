/* Parses a linear + relu spec with the C API, emits its CUDA source and
 * compiles it to an sm_90a CUBIN (no GPU needed). */
#include <stdio.h>
#include <string.h>

#include "fusejit/fusejit.h"

static const char* kSpec =
    "name: consumer_linear_relu\n"
    "precision: fp32\n"
    "inputs:\n"
    "  - {name: x, shape: [256, 512]}\n"
    "  - {name: w, shape: [1024, 512]}\n"
    "ops:\n"
    "  - {name: gemm, op: linear, args: [x, w]}\n"
    "  - {name: y, op: relu, args: [gemm]}\n"
    "outputs: [y]\n";

static int fail(const char* what) {
  fprintf(stderr, "consumer_c: %s: %s\n", what, fj_last_error());
  return 1;
}

int main(void) {
  fj_spec* spec = NULL;
  fj_engine* engine = NULL;
  fj_options* options = NULL;
  char* source = NULL;
  void* cubin = NULL;
  size_t size = 0;
  int rc = 0;
  if (fj_spec_parse(kSpec, "consumer.yaml", &spec) != FJ_OK) return fail("fj_spec_parse");
  if (fj_engine_create(&engine) != FJ_OK || fj_options_create(&options) != FJ_OK ||
      fj_options_set_arch(options, "sm_90a") != FJ_OK)
    rc = fail("setup");
  else if (fj_engine_emit(engine, spec, options, FJ_EMIT_SOURCE, &source) != FJ_OK)
    rc = fail("fj_engine_emit");
  else if (fj_engine_compile_cubin(engine, spec, options, &cubin, &size) != FJ_OK)
    rc = fail("fj_engine_compile_cubin");
  else
    printf("consumer_c: fusejit %s, %zu chars of CUDA source, %zu bytes of CUBIN\n", fj_version(),
           strlen(source), size);
  fj_free(source);
  fj_free(cubin);
  fj_options_destroy(options);
  fj_engine_destroy(engine);
  fj_spec_destroy(spec);
  return rc;
}
