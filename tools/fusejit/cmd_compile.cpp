// fusejit compile SPEC --arch ARCH -o FILE — CUBIN through NVRTC, no GPU needed.
#include <cstdio>
#include <fstream>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tools/fusejit/args.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

int run_compile(const std::vector<std::string>& argv) {
  ParsedArgs a = parse_args(argv, {"arch", "output", "config"}, {"verbose"});
  if (!a.error.empty()) return usage_error(kCompile, a.error);
  if (a.positional.size() != 1) return usage_error(kCompile, "expected exactly one spec file");
  std::string out = a.get("output");
  if (out.empty()) return usage_error(kCompile, "missing -o FILE");
  auto g = load_spec_file(a.positional[0]);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  Engine engine;
  CompileOptions opts;
  opts.config = a.get("config");
  bool verbose = a.flags.count("verbose") > 0;
  opts.resource_usage = verbose;
  std::string arch = a.get("arch", "sm_90a");
  auto cubin = engine.compile_cubin(*g, arch, opts);
  if (!cubin) {
    std::fprintf(stderr, "fusejit compile: %s\n", cubin.error().str().c_str());
    return 1;
  }
  std::ofstream f(out, std::ios::binary);
  f.write(cubin->cubin.data(), static_cast<std::streamsize>(cubin->cubin.size()));
  f.close();
  if (!f) {
    std::fprintf(stderr, "fusejit compile: cannot write '%s'\n", out.c_str());
    return 1;
  }
  std::printf("%s: %zu bytes of CUBIN for %s (NVRTC %s)\n", out.c_str(), cubin->cubin.size(), arch.c_str(),
              nvrtc_version().c_str());
  if (verbose) {
    std::printf("options:");
    for (const auto& o : cubin->options) std::printf(" %s", o.c_str());
    std::printf("\n");
    for (const KernelResources& k : cubin->resources)
      std::printf("kernel %s: %d registers, %lld bytes smem (static), %lld bytes stack, "
                  "%lld/%lld bytes spill stores/loads, %lld bytes cmem[0]\n",
                  k.function.c_str(), k.registers, (long long)k.shared_bytes, (long long)k.stack_bytes,
                  (long long)k.spill_stores, (long long)k.spill_loads, (long long)k.constant_bytes);
    if (!cubin->log.empty()) std::printf("%s\n", cubin->log.c_str());
  }
  return 0;
}

}  // namespace

const Command kCompile{
    "compile", "compile a spec to a CUBIN with NVRTC (no GPU needed)",
    "usage: fusejit compile SPEC.yaml --arch ARCH -o FILE [--config STR] [--verbose]\n\n"
    "Generates the CUDA source for the spec and compiles it with NVRTC to a CUBIN for\n"
    "ARCH (sm_80, sm_89, sm_90, sm_90a; default sm_90a). Works without a GPU.\n"
    "  --verbose, -v  compile afresh with ptxas -v (not from the disk cache) and print the\n"
    "                 NVRTC options, each kernel's registers, shared memory, stack and\n"
    "                 spills, and NVRTC's log\n",
    run_compile};

}  // namespace fusejit::cli
