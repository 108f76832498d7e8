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
    std::printf("\n%s", cubin->log.c_str());
    CacheStats st = engine.cache_stats();
    std::printf("\ncache tiers (hits/misses): disk %llu/%llu, remote %llu/%llu (%llu stored)\n",
                (unsigned long long)st.disk_hits, (unsigned long long)st.disk_misses,
                (unsigned long long)st.remote_hits, (unsigned long long)st.remote_misses,
                (unsigned long long)st.remote_stores);
    // Registers, shared memory and spills are in ptxas's log of a fresh compile only.
    CompileOptions fresh = opts;
    fresh.resource_usage = true;
    auto res = engine.compile_cubin(*g, arch, fresh);
    if (!res) {
      std::fprintf(stderr, "fusejit compile: %s\n", res.error().str().c_str());
      return 1;
    }
    for (const KernelResources& k : res->resources)
      std::printf("kernel %s: %d registers, %lld bytes smem (static), %lld bytes stack, "
                  "%lld/%lld bytes spill stores/loads, %lld bytes cmem[0]\n",
                  k.function.c_str(), k.registers, (long long)k.shared_bytes, (long long)k.stack_bytes,
                  (long long)k.spill_stores, (long long)k.spill_loads, (long long)k.constant_bytes);
  }
  return 0;
}

}  // namespace

const Command kCompile{
    "compile", "compile a spec to a CUBIN with NVRTC (no GPU needed)",
    "usage: fusejit compile SPEC.yaml --arch ARCH -o FILE [--config STR] [--verbose]\n\n"
    "Generates the CUDA source for the spec and compiles it with NVRTC to a CUBIN for\n"
    "ARCH (sm_80, sm_89, sm_90, sm_90a; default sm_90a). Works without a GPU.\n"
    "  --verbose, -v  print the NVRTC option list and log (or which cache tier served the\n"
    "                 CUBIN), the cache tiers' hits/misses, and each kernel's registers,\n"
    "                 shared memory, stack and spills (from a second, fresh compile with ptxas -v)\n",
    run_compile};

}  // namespace fusejit::cli
