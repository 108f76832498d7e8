/* tests/c_api_test.c — the C API from plain C11: lifecycle, spec errors with
 * locations, argument listing, options, CUBIN without a GPU, lazy kernels and
 * launch errors, the thread-local last error. Prints TAP ("ok N - name");
 * exits 1 when a check fails. Without a GPU the GPU-only parts are skipped
 * (and what a launch does without one is checked instead). The CPU backend's
 * tests run kernels on host buffers and check values against hand
 * computations; in a build without LLVM they are skipped ("# SKIP"). */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusejit/fusejit.h"

static int g_failed_checks;
static const char* g_skip_reason; /* set by a test that skipped itself */

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ++g_failed_checks;                                                         \
      printf("#   %s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, \
             #cond, fj_last_error());                                            \
    }                                                                            \
  } while (0)

#define CHECK_STATUS(call, expected)                                                   \
  do {                                                                                 \
    fj_status got_ = (call);                                                           \
    if (got_ != (expected)) {                                                          \
      ++g_failed_checks;                                                               \
      printf("#   %s:%d: %s returned %s, expected %s; last error: %s\n", __FILE__,     \
             __LINE__, #call, fj_status_name(got_), fj_status_name(expected),          \
             fj_last_error());                                                         \
    }                                                                                  \
  } while (0)

static int contains(const char* haystack, const char* needle) {
  return haystack && needle && strstr(haystack, needle) != NULL;
}

/* ---- the spec used throughout: conv2d -> relu -> + bias ---------------------- */

enum { N = 2, CIN = 3, H = 8, W = 9, COUT = 4, K = 3 };
enum { HO = H - K + 1, WO = W - K + 1 }; /* stride 1, no padding */

static char g_spec_text[2048];

static void build_spec_text(const char* relu_op_name) {
  snprintf(g_spec_text, sizeof g_spec_text,
           "name: capi_small\n"
           "inputs:\n"
           "  - {name: x, shape: [%d, %d, %d, %d]}\n"
           "  - {name: w, shape: [%d, %d, %d, %d]}\n"
           "  - {name: b, shape: [%d]}\n"
           "  - {name: bias, shape: [%d, 1, 1], init: normal}\n"
           "ops:\n"
           "  - {name: conv, op: conv2d, args: [x, w, b]}\n"
           "  - {name: act, op: %s, args: [conv]}\n"
           "  - {name: y, op: add, args: [act, bias]}\n"
           "outputs: [y]\n",
           N, CIN, H, W, COUT, CIN, K, K, COUT, COUT, relu_op_name);
}

static fj_spec* parse_good_spec(void) {
  fj_spec* spec = NULL;
  build_spec_text("relu");
  CHECK_STATUS(fj_spec_parse(g_spec_text, "small.yaml", &spec), FJ_OK);
  return spec;
}

static int gpu_present(void) {
  int count = 0;
  return fj_device_count(&count) == FJ_OK && count > 0;
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_version_and_names(void) {
  char expected[64];
  snprintf(expected, sizeof expected, "%d.%d.%d", FJ_VERSION_MAJOR, FJ_VERSION_MINOR,
           FJ_VERSION_PATCH);
  CHECK(strcmp(fj_version(), expected) == 0);
  CHECK(fj_version_number() ==
        FJ_VERSION_MAJOR * 10000 + FJ_VERSION_MINOR * 100 + FJ_VERSION_PATCH);
  CHECK(strcmp(fj_status_name(FJ_OK), "FJ_OK") == 0);
  CHECK(strcmp(fj_status_name(FJ_ERR_SPEC), "FJ_ERR_SPEC") == 0);
  CHECK(strcmp(fj_status_name((fj_status)42), "FJ_ERR_UNKNOWN") == 0);
  CHECK(strcmp(fj_dtype_name(FJ_BF16), "bf16") == 0);
  CHECK(fj_dtype_name((fj_dtype)9) == NULL);
  CHECK(fj_dtype_size(FJ_F32) == 4 && fj_dtype_size(FJ_F16) == 2 && fj_dtype_size(FJ_BF16) == 2);
}

static void test_lifecycle_and_null_arguments(void) {
  fj_engine* engine = NULL;
  fj_options* options = NULL;
  fj_spec* spec = NULL;
  size_t ni = 0, no = 0;
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  CHECK(engine != NULL);
  CHECK(fj_last_error()[0] == '\0');
  fj_engine_destroy(engine);
  fj_engine_destroy(NULL);
  fj_spec_destroy(NULL);
  fj_kernel_destroy(NULL);
  fj_options_destroy(NULL);
  fj_free(NULL);

  CHECK_STATUS(fj_engine_create(NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "engine"));
  CHECK_STATUS(fj_options_create(NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_spec_parse(NULL, "x.yaml", &spec), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_spec_parse("inputs: []", "x.yaml", NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_spec_load(NULL, &spec), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_spec_num_args(NULL, &ni, &no), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_spec_arg(NULL, 0, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_options_set_arch(NULL, "sm_90a"), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_engine_compile(NULL, NULL, NULL, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_engine_compile_cubin(NULL, NULL, NULL, NULL, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_engine_emit(NULL, NULL, NULL, FJ_EMIT_SOURCE, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_kernel_launch(NULL, NULL, 0, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_kernel_load(NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_device_count(NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK(fj_kernel_is_loaded(NULL) == 0);
  CHECK(spec == NULL); /* untouched by failed calls */

  CHECK_STATUS(fj_options_create(&options), FJ_OK);
  fj_options_destroy(options);
}

static void test_spec_error_has_location(void) {
  fj_spec* spec = NULL;
  const char* bad_op;
  const char* p;
  int line = 1;
  char where[64];
  build_spec_text("relux");
  bad_op = strstr(g_spec_text, "relux");
  for (p = g_spec_text; p < bad_op; ++p) line += *p == '\n';
  snprintf(where, sizeof where, "bad_spec.yaml:%d:", line);

  CHECK_STATUS(fj_spec_parse(g_spec_text, "bad_spec.yaml", &spec), FJ_ERR_SPEC);
  CHECK(spec == NULL);
  CHECK(contains(fj_last_error(), where));
  CHECK(contains(fj_last_error(), "relux"));
  printf("#   spec error: %s\n", fj_last_error());

  CHECK_STATUS(fj_spec_parse("inputs: [\n", "broken.yaml", &spec), FJ_ERR_SPEC);
  CHECK(contains(fj_last_error(), "broken.yaml"));

  /* A success clears the last error. */
  spec = parse_good_spec();
  CHECK(fj_last_error()[0] == '\0');
  fj_spec_destroy(spec);
}

static void test_spec_file_and_io_errors(void) {
  char path[] = "/tmp/fj_c_api_test_XXXXXX";
  int fd = mkstemp(path);
  FILE* f;
  fj_spec* spec = NULL;
  const char* name = NULL;
  CHECK(fd >= 0);
  if (fd < 0) return;
  build_spec_text("relu");
  f = fdopen(fd, "w");
  CHECK(f != NULL && fputs(g_spec_text, f) >= 0);
  if (f) fclose(f);

  CHECK_STATUS(fj_spec_load(path, &spec), FJ_OK);
  CHECK_STATUS(fj_spec_name(spec, &name), FJ_OK);
  CHECK(name && strcmp(name, "capi_small") == 0);
  fj_spec_destroy(spec);
  spec = NULL;
  unlink(path);

  CHECK_STATUS(fj_spec_load(path, &spec), FJ_ERR_IO);
  CHECK(spec == NULL);
  CHECK(contains(fj_last_error(), path));
}

static void check_args(size_t num_inputs, size_t num_outputs,
                       fj_status (*arg)(const void*, size_t, fj_arg_info*), const void* obj) {
  const char* names[] = {"x", "w", "b", "bias", "y"};
  const int64_t shapes[5][4] = {
      {N, CIN, H, W}, {COUT, CIN, K, K}, {COUT, 0, 0, 0}, {COUT, 1, 1, 0}, {N, COUT, HO, WO}};
  const int ranks[] = {4, 4, 1, 3, 4};
  fj_arg_info info;
  size_t i;
  int d;
  CHECK(num_inputs == 4 && num_outputs == 1);
  for (i = 0; i < 5; ++i) {
    int64_t numel = 1;
    memset(&info, 0, sizeof info);
    CHECK_STATUS(arg(obj, i, &info), FJ_OK);
    CHECK(info.name && strcmp(info.name, names[i]) == 0);
    CHECK(info.dtype == FJ_F32);
    CHECK(info.is_output == (i == 4));
    CHECK(info.rank == ranks[i]);
    if (info.rank != ranks[i] || !info.shape) continue;
    for (d = 0; d < info.rank; ++d) {
      CHECK(info.shape[d] == shapes[i][d]);
      numel *= shapes[i][d];
    }
    CHECK(info.numel == numel);
  }
  CHECK_STATUS(arg(obj, 5, &info), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "out of range"));
  CHECK_STATUS(arg(obj, 0, NULL), FJ_ERR_INVALID_ARGUMENT);
}

static fj_status spec_arg(const void* spec, size_t i, fj_arg_info* info) {
  return fj_spec_arg((const fj_spec*)spec, i, info);
}
static fj_status kernel_arg(const void* kernel, size_t i, fj_arg_info* info) {
  return fj_kernel_arg((const fj_kernel*)kernel, i, info);
}

static void test_spec_arguments_and_ir(void) {
  fj_spec* spec = parse_good_spec();
  size_t ni = 0, no = 0;
  char* ir = NULL;
  if (!spec) return;
  CHECK_STATUS(fj_spec_num_args(spec, &ni, &no), FJ_OK);
  check_args(ni, no, spec_arg, spec);
  CHECK_STATUS(fj_spec_print_ir(spec, &ir), FJ_OK);
  CHECK(contains(ir, "conv2d") && contains(ir, "relu"));
  fj_free(ir);
  fj_spec_destroy(spec);
}

static void test_options(void) {
  fj_options* options = NULL;
  fj_autotune mode = FJ_AUTOTUNE_OFF;
  CHECK_STATUS(fj_options_create(&options), FJ_OK);
  if (!options) return;
  CHECK_STATUS(fj_options_set_arch(options, "sm_90a"), FJ_OK);
  CHECK_STATUS(fj_options_set_arch(options, "auto"), FJ_OK);
  CHECK_STATUS(fj_options_set_arch(options, "sm_1"), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "sm_1"));
  CHECK_STATUS(fj_options_set_arch(options, "volta"), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_options_set_arch(options, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_options_get_autotune(options, &mode), FJ_OK);
  CHECK(mode == FJ_AUTOTUNE_OFF);
  CHECK_STATUS(fj_options_set_autotune(options, FJ_AUTOTUNE_FORCE), FJ_OK);
  CHECK_STATUS(fj_options_get_autotune(options, &mode), FJ_OK);
  CHECK(mode == FJ_AUTOTUNE_FORCE);
  CHECK_STATUS(fj_options_set_autotune(options, (fj_autotune)7), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_options_get_autotune(options, &mode), FJ_OK);
  CHECK(mode == FJ_AUTOTUNE_FORCE); /* a rejected value changes nothing */
  CHECK_STATUS(fj_options_set_device(options, -1), FJ_ERR_INVALID_ARGUMENT);
  CHECK_STATUS(fj_options_set_device(options, 0), FJ_OK);
  CHECK_STATUS(fj_options_set_config(options, NULL), FJ_OK);
  CHECK_STATUS(fj_options_set_line_info(options, 0), FJ_OK);
  CHECK_STATUS(fj_options_set_lazy(options, 1), FJ_OK);
  {
    fj_backend backend = FJ_BACKEND_AUTO;
    CHECK_STATUS(fj_options_get_backend(options, &backend), FJ_OK);
    CHECK(backend == FJ_BACKEND_CUDA); /* the default */
    CHECK_STATUS(fj_options_set_backend(options, FJ_BACKEND_CPU), FJ_OK);
    CHECK_STATUS(fj_options_get_backend(options, &backend), FJ_OK);
    CHECK(backend == FJ_BACKEND_CPU);
    CHECK_STATUS(fj_options_set_backend(options, (fj_backend)9), FJ_ERR_INVALID_ARGUMENT);
    CHECK(contains(fj_last_error(), "backend"));
    CHECK_STATUS(fj_options_get_backend(options, &backend), FJ_OK);
    CHECK(backend == FJ_BACKEND_CPU);
    CHECK_STATUS(fj_options_get_backend(options, NULL), FJ_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(fj_backend_name(FJ_BACKEND_CPU), "cpu") == 0);
    CHECK(strcmp(fj_backend_name(FJ_BACKEND_AUTO), "auto") == 0);
    CHECK(fj_backend_name((fj_backend)9) == NULL);
    CHECK(fj_backend_available((fj_backend)9) == 0);
    CHECK(fj_backend_available(FJ_BACKEND_CUDA) == gpu_present());
  }
  fj_options_destroy(options);
}

static int is_elf(const unsigned char* p, size_t n) {
  return n > 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F';
}

static void test_cubin_without_gpu(void) {
  fj_engine* engine = NULL;
  fj_options* options = NULL;
  fj_spec* spec = parse_good_spec();
  void* cubin = NULL;
  size_t size = 0;
  char path[] = "/tmp/fj_c_api_cubin_XXXXXX";
  int fd;
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  CHECK_STATUS(fj_options_create(&options), FJ_OK);
  if (!spec || !engine || !options) goto done;
  CHECK_STATUS(fj_options_set_arch(options, "sm_90a"), FJ_OK);

  CHECK_STATUS(fj_engine_compile_cubin(engine, spec, options, &cubin, &size), FJ_OK);
  CHECK(is_elf((const unsigned char*)cubin, size));
  printf("#   sm_90a CUBIN: %zu bytes\n", size);

  fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) {
    unsigned char head[4] = {0, 0, 0, 0};
    FILE* f;
    long file_size = -1;
    close(fd);
    CHECK_STATUS(fj_engine_compile_cubin_file(engine, spec, options, path), FJ_OK);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
      CHECK(fread(head, 1, 4, f) == 4);
      fseek(f, 0, SEEK_END);
      file_size = ftell(f);
      fclose(f);
    }
    CHECK(head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F');
    CHECK(file_size == (long)size);
    unlink(path);
  }
  CHECK_STATUS(fj_engine_compile_cubin_file(engine, spec, options, "/nonexistent-dir/k.cubin"),
               FJ_ERR_IO);

  if (!gpu_present()) { /* "auto" needs a device */
    void* none = NULL;
    CHECK_STATUS(fj_options_set_arch(options, "auto"), FJ_OK);
    CHECK_STATUS(fj_engine_compile_cubin(engine, spec, options, &none, &size), FJ_ERR_NO_DEVICE);
    CHECK(none == NULL);
  }
done:
  fj_free(cubin);
  fj_options_destroy(options);
  fj_spec_destroy(spec);
  fj_engine_destroy(engine);
}

static void test_emit(void) {
  fj_engine* engine = NULL;
  fj_spec* spec = parse_good_spec();
  char* text = NULL;
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  if (!spec || !engine) goto done;
  CHECK_STATUS(fj_engine_emit(engine, spec, NULL, FJ_EMIT_SOURCE, &text), FJ_OK);
  CHECK(contains(text, "__global__"));
  fj_free(text);
  text = NULL;
  CHECK_STATUS(fj_engine_emit(engine, spec, NULL, FJ_EMIT_PLAN, &text), FJ_OK);
  CHECK(text && text[0] != '\0');
  fj_free(text);
  text = NULL;
  CHECK_STATUS(fj_engine_emit(engine, spec, NULL, (fj_emit_kind)5, &text), FJ_ERR_INVALID_ARGUMENT);
  CHECK(text == NULL);
done:
  fj_spec_destroy(spec);
  fj_engine_destroy(engine);
}

static void test_kernels_and_launch(void) {
  fj_engine* engine = NULL;
  fj_options* lazy = NULL;
  fj_spec* spec = parse_good_spec();
  fj_kernel* kernel = NULL;
  fj_kernel* eager = NULL;
  size_t ni = 0, no = 0;
  const char* name = NULL;
  fj_autotune mode = FJ_AUTOTUNE_OFF;
  /* Fake device pointers: only ever passed where no GPU can run them. */
  uint64_t ptrs[5] = {0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  CHECK_STATUS(fj_options_create(&lazy), FJ_OK);
  if (!spec || !engine || !lazy) goto done;
  CHECK_STATUS(fj_options_set_lazy(lazy, 1), FJ_OK);
  CHECK_STATUS(fj_options_set_autotune(lazy, FJ_AUTOTUNE_USE_DB), FJ_OK);

  /* A lazy kernel lists its arguments without a GPU. */
  CHECK_STATUS(fj_engine_compile(engine, spec, lazy, &kernel), FJ_OK);
  if (!kernel) goto done;
  fj_spec_destroy(spec); /* the kernel does not need the spec */
  spec = NULL;
  fj_engine_destroy(engine); /* nor the engine handle */
  engine = NULL;
  CHECK(fj_kernel_is_loaded(kernel) == 0);
  CHECK_STATUS(fj_kernel_num_args(kernel, &ni, &no), FJ_OK);
  check_args(ni, no, kernel_arg, kernel);
  CHECK_STATUS(fj_kernel_autotune(kernel, &mode), FJ_OK);
  CHECK(mode == FJ_AUTOTUNE_USE_DB);
  CHECK_STATUS(fj_kernel_name(kernel, &name), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "not loaded"));

  /* Argument checks come before any GPU work. */
  CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 4, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "4 inputs") && contains(fj_last_error(), "got 4"));
  CHECK_STATUS(fj_kernel_launch(kernel, NULL, 5, NULL), FJ_ERR_INVALID_ARGUMENT);
  ptrs[3] = 0;
  CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 5, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "'bias'") && contains(fj_last_error(), "null"));
  ptrs[3] = 0x4000;

  if (!gpu_present()) {
    char first[1024];
    fj_options* eager_options = NULL;
    printf("#   no GPU: checking launch/load errors instead of running\n");
    CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 5, NULL), FJ_ERR_NO_DEVICE);
    CHECK(fj_last_error()[0] != '\0');
    printf("#   launch without GPU: %s\n", fj_last_error());
    snprintf(first, sizeof first, "%s", fj_last_error());
    CHECK_STATUS(fj_kernel_load(kernel), FJ_ERR_NO_DEVICE); /* the failure is kept */
    CHECK(strcmp(fj_last_error(), first) == 0);
    CHECK(fj_kernel_is_loaded(kernel) == 0);

    CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
    spec = parse_good_spec();
    CHECK_STATUS(fj_options_create(&eager_options), FJ_OK);
    CHECK_STATUS(fj_engine_compile(engine, spec, eager_options, &eager), FJ_ERR_NO_DEVICE);
    CHECK(eager == NULL);
    CHECK_STATUS(fj_engine_compile(engine, spec, NULL, &eager), FJ_ERR_NO_DEVICE);
    CHECK(eager == NULL);
    fj_options_destroy(eager_options);
  } else {
    const char* arch = NULL;
    printf("#   GPU present: compiling eagerly (launches with data: python/tests)\n");
    CHECK_STATUS(fj_kernel_load(kernel), FJ_OK);
    CHECK(fj_kernel_is_loaded(kernel) == 1);
    CHECK_STATUS(fj_kernel_name(kernel, &name), FJ_OK);
    CHECK(name && name[0] != '\0');
    CHECK_STATUS(fj_kernel_arch(kernel, &arch), FJ_OK);
    CHECK(arch && strncmp(arch, "sm_", 3) == 0);
    CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
    spec = parse_good_spec();
    CHECK_STATUS(fj_engine_compile(engine, spec, NULL, &eager), FJ_OK);
    CHECK(fj_kernel_is_loaded(eager) == 1);
  }
done:
  fj_kernel_destroy(eager);
  fj_kernel_destroy(kernel);
  fj_options_destroy(lazy);
  fj_spec_destroy(spec);
  fj_engine_destroy(engine);
}

/* ---- the CPU backend (LLVM): real launches on host buffers ------------------------- */

static fj_options* cpu_options(void) {
  fj_options* options = NULL;
  CHECK_STATUS(fj_options_create(&options), FJ_OK);
  if (options) CHECK_STATUS(fj_options_set_backend(options, FJ_BACKEND_CPU), FJ_OK);
  return options;
}

/* Without LLVM: compiling for the CPU fails cleanly; returns 1 (skip). */
static int cpu_backend_missing(void) {
  fj_engine* engine = NULL;
  fj_spec* spec = NULL;
  fj_kernel* kernel = NULL;
  fj_options* options = NULL;
  if (fj_backend_available(FJ_BACKEND_CPU)) return 0;
  g_skip_reason = "the CPU backend is not in this build";
  options = cpu_options();
  spec = parse_good_spec();
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  CHECK_STATUS(fj_engine_compile(engine, spec, options, &kernel), FJ_ERR_NO_DEVICE);
  CHECK(contains(fj_last_error(), "CPU backend is not in this build"));
  CHECK(kernel == NULL);
  fj_engine_destroy(engine);
  fj_spec_destroy(spec);
  fj_options_destroy(options);
  return 1;
}

/* y = relu(x @ w^T + b) with x[2,3], w[2,3], b[2]: every value by hand. */
static void test_cpu_linear_relu(void) {
  static const char* text =
      "name: capi_cpu_linear\n"
      "inputs:\n"
      "  - {name: x, shape: [2, 3]}\n"
      "  - {name: w, shape: [2, 3]}\n"
      "  - {name: b, shape: [2]}\n"
      "ops:\n"
      "  - {name: lin, op: linear, args: [x, w, b]}\n"
      "  - {name: y, op: relu, args: [lin]}\n"
      "outputs: [y]\n";
  const float x[6] = {1, 2, 3, -1, 0.5f, 2};
  const float w[6] = {0.5f, -1, 2, 1, 1, -3};
  const float b[2] = {0.25f, 1};
  /* row 0: 0.5-2+6+0.25 = 4.75, 1+2-9+1 = -5 -> 0; row 1: -0.5-0.5+4+0.25 = 3.25, -1+0.5-6+1 -> 0 */
  const float expected[4] = {4.75f, 0, 3.25f, 0};
  float y[4] = {-7, -7, -7, -7};
  uint64_t ptrs[4];
  fj_engine* engine = NULL;
  fj_spec* spec = NULL;
  fj_kernel* kernel = NULL;
  fj_options* options = NULL;
  fj_backend backend = FJ_BACKEND_CUDA;
  const char* arch = NULL;
  int i;
  if (cpu_backend_missing()) return;
  options = cpu_options();
  CHECK_STATUS(fj_spec_parse(text, "cpu_linear.yaml", &spec), FJ_OK);
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  CHECK_STATUS(fj_engine_compile(engine, spec, options, &kernel), FJ_OK);
  if (!kernel) goto done;
  CHECK_STATUS(fj_kernel_backend(kernel, &backend), FJ_OK);
  CHECK(backend == FJ_BACKEND_CPU);
  CHECK_STATUS(fj_kernel_arch(kernel, &arch), FJ_OK);
  CHECK(arch && strcmp(arch, "cpu") == 0);
  ptrs[0] = (uint64_t)(uintptr_t)x;
  ptrs[1] = (uint64_t)(uintptr_t)w;
  ptrs[2] = (uint64_t)(uintptr_t)b;
  ptrs[3] = (uint64_t)(uintptr_t)y;
  CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 4, NULL), FJ_OK); /* synchronous */
  for (i = 0; i < 4; ++i) {
    float d = y[i] - expected[i];
    if (!(d < 1e-5f && d > -1e-5f)) printf("#   y[%d] = %g, expected %g\n", i, y[i], expected[i]);
    CHECK(d < 1e-5f && d > -1e-5f);
  }
  ptrs[3] = 0;
  CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 4, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "null host pointer"));
  CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 3, NULL), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "4 host pointers"));
done:
  fj_kernel_destroy(kernel);
  fj_options_destroy(options);
  fj_spec_destroy(spec);
  fj_engine_destroy(engine);
}

/* The conv spec (conv2d -> relu -> + bias) lazily, on the CPU: one output
 * element against a direct loop; also emit (LLVM IR) and no CUBIN. */
static void test_cpu_conv_and_emit(void) {
  static float x[N * CIN * H * W], w[COUT * CIN * K * K], b[COUT], bias[COUT], y[N * COUT * HO * WO];
  uint64_t ptrs[5];
  fj_engine* engine = NULL;
  fj_spec* spec = NULL;
  fj_kernel* kernel = NULL;
  fj_options* options = NULL;
  char* text = NULL;
  void* cubin = NULL;
  size_t cubin_size = 0;
  const int n = 1, co = 2, oh = 3, ow = 4;
  double ref;
  int i, ci, kh, kw;
  if (cpu_backend_missing()) return;
  for (i = 0; i < N * CIN * H * W; ++i) x[i] = (float)((i * 7) % 11) / 11.0f;
  for (i = 0; i < COUT * CIN * K * K; ++i) w[i] = (float)((i * 5) % 13 - 6) / 13.0f;
  for (i = 0; i < COUT; ++i) {
    b[i] = 0.1f * (float)i;
    bias[i] = -0.5f + 0.25f * (float)i;
  }
  for (i = 0; i < N * COUT * HO * WO; ++i) y[i] = -99.0f;
  options = cpu_options();
  spec = parse_good_spec();
  CHECK_STATUS(fj_engine_create(&engine), FJ_OK);
  if (!options || !spec || !engine) goto done;

  CHECK_STATUS(fj_engine_emit(engine, spec, options, FJ_EMIT_SOURCE, &text), FJ_OK);
  CHECK(contains(text, "define "));   /* an LLVM IR function */
  CHECK(!contains(text, "__global__"));
  fj_free(text);
  text = NULL;
  CHECK_STATUS(fj_engine_emit(engine, spec, options, FJ_EMIT_PLAN, &text), FJ_OK);
  CHECK(text && text[0] != '\0');
  fj_free(text);
  CHECK_STATUS(fj_engine_compile_cubin(engine, spec, options, &cubin, &cubin_size), FJ_ERR_INVALID_ARGUMENT);
  CHECK(contains(fj_last_error(), "CUDA only"));

  CHECK_STATUS(fj_options_set_lazy(options, 1), FJ_OK);
  CHECK_STATUS(fj_engine_compile(engine, spec, options, &kernel), FJ_OK);
  if (!kernel) goto done;
  CHECK(fj_kernel_is_loaded(kernel) == 0);
  ptrs[0] = (uint64_t)(uintptr_t)x;
  ptrs[1] = (uint64_t)(uintptr_t)w;
  ptrs[2] = (uint64_t)(uintptr_t)b;
  ptrs[3] = (uint64_t)(uintptr_t)bias;
  ptrs[4] = (uint64_t)(uintptr_t)y;
  CHECK_STATUS(fj_kernel_launch(kernel, ptrs, 5, NULL), FJ_OK); /* loads, then runs */
  CHECK(fj_kernel_is_loaded(kernel) == 1);
  ref = b[co];
  for (ci = 0; ci < CIN; ++ci)
    for (kh = 0; kh < K; ++kh)
      for (kw = 0; kw < K; ++kw)
        ref += (double)x[((n * CIN + ci) * H + oh + kh) * W + ow + kw] * w[((co * CIN + ci) * K + kh) * K + kw];
  ref = (ref > 0 ? ref : 0) + bias[co];
  {
    double got = y[((n * COUT + co) * HO + oh) * WO + ow], d = got - ref;
    if (!(d < 1e-5 && d > -1e-5)) printf("#   y[%d,%d,%d,%d] = %g, expected %g\n", n, co, oh, ow, got, ref);
    CHECK(d < 1e-5 && d > -1e-5);
  }
  {
    int unwritten = 0;
    for (i = 0; i < N * COUT * HO * WO; ++i) unwritten += y[i] == -99.0f;
    CHECK(unwritten == 0); /* every element written */
  }
done:
  fj_kernel_destroy(kernel);
  fj_options_destroy(options);
  fj_spec_destroy(spec);
  fj_engine_destroy(engine);
}

static char g_thread_message[512];
static char g_thread_initial[512];

static void* thread_body(void* unused) {
  fj_spec* spec = NULL;
  (void)unused;
  snprintf(g_thread_initial, sizeof g_thread_initial, "%s", fj_last_error());
  fj_spec_load("/nonexistent/thread.yaml", &spec);
  snprintf(g_thread_message, sizeof g_thread_message, "%s", fj_last_error());
  return NULL;
}

static void test_last_error_is_thread_local(void) {
  pthread_t thread;
  fj_spec* spec = NULL;
  CHECK_STATUS(fj_spec_parse("not: [a, spec", "main_thread.yaml", &spec), FJ_ERR_SPEC);
  CHECK(pthread_create(&thread, NULL, thread_body, NULL) == 0);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(g_thread_initial[0] == '\0');
  CHECK(contains(g_thread_message, "thread.yaml"));
  CHECK(contains(fj_last_error(), "main_thread.yaml"));
  CHECK(!contains(fj_last_error(), "thread.yaml'"));
}

/* ---- driver ------------------------------------------------------------------------- */

typedef struct {
  const char* name;
  void (*fn)(void);
} test_case;

int main(void) {
  const test_case tests[] = {
      {"version_and_names", test_version_and_names},
      {"lifecycle_and_null_arguments", test_lifecycle_and_null_arguments},
      {"spec_error_has_location", test_spec_error_has_location},
      {"spec_file_and_io_errors", test_spec_file_and_io_errors},
      {"spec_arguments_and_ir", test_spec_arguments_and_ir},
      {"options", test_options},
      {"cubin_without_gpu", test_cubin_without_gpu},
      {"emit", test_emit},
      {"kernels_and_launch", test_kernels_and_launch},
      {"last_error_is_thread_local", test_last_error_is_thread_local},
      {"cpu_linear_relu", test_cpu_linear_relu},
      {"cpu_conv_and_emit", test_cpu_conv_and_emit},
  };
  const size_t count = sizeof tests / sizeof tests[0];
  size_t i;
  int failed_tests = 0;
  printf("1..%zu\n", count);
  for (i = 0; i < count; ++i) {
    int before = g_failed_checks;
    g_skip_reason = NULL;
    tests[i].fn();
    if (g_failed_checks == before && g_skip_reason) {
      printf("ok %zu - %s # SKIP %s\n", i + 1, tests[i].name, g_skip_reason);
    } else if (g_failed_checks == before) {
      printf("ok %zu - %s\n", i + 1, tests[i].name);
    } else {
      printf("not ok %zu - %s\n", i + 1, tests[i].name);
      ++failed_tests;
    }
  }
  printf("# %d of %zu tests failed (%d failed checks)\n", failed_tests, count, g_failed_checks);
  return failed_tests == 0 ? 0 : 1;
}
