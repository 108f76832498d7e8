// `fusejit run --backend cpu`: compile for the host, then check_kernel (the
// same seeded inputs and fp64 reference as on the GPU; host buffers and
// std::chrono steady_clock timing on the CPU backend).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "compiler/cpu_program.h"
#include "tools/fusejit/backend.h"

namespace fusejit::cli {

int run_on_cpu(const Graph& g, const CheckOptions& check, const std::string& config) {
  Engine engine;
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  opts.config = config;
  auto t0 = std::chrono::steady_clock::now();
  auto kernel = engine.compile(g, opts);
  double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!kernel) {
    std::fprintf(stderr, "fusejit run: %s\n", kernel.error().str().c_str());
    return 1;
  }
  const CompiledKernel& k = **kernel;
  const char* env = std::getenv("FUSEJIT_NUM_THREADS");
  int threads = env && std::atoi(env) > 0 ? std::atoi(env) : static_cast<int>(std::thread::hardware_concurrency());
  std::printf("%s on %s (cpu, %d threads), precision %s (computed in fp32), seed %llu\n", k.name().c_str(),
              cpu_model_name().c_str(), threads, std::string(precision_name(g.precision)).c_str(),
              static_cast<unsigned long long>(check.seed));
  std::printf("  compile: %.1f ms (codegen + LLVM, or the disk cache)\n", compile_ms);
  if (const CpuProgram* p = k.cpu_program())
    for (const CpuLaunch& l : p->launches)
      std::printf("  launch %s: %lld work items (grain %lld): %s\n", l.function.c_str(),
                  static_cast<long long>(l.work_items), static_cast<long long>(l.grain), l.what.c_str());
  auto r = check_kernel(k, g, check);  // host buffers, NaN-poisoned outputs, steady_clock timing
  if (!r) {
    std::fprintf(stderr, "fusejit run: %s\n", r.error().str().c_str());
    return 1;
  }
  std::string summary = r->summary();  // ends with the PASS / FAIL line
  double macs = anchor_macs(g);
  if (r->timing.iters && macs > 0 && r->timing.median_ms > 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %.1f GFLOP/s (the anchor's FLOPs at the median time)\n",
                  2 * macs / (r->timing.median_ms * 1e6));
    summary.insert(summary.rfind('\n', summary.size() - 2) + 1, buf);
  }
  std::printf("%s", summary.c_str());
  return r->pass ? 0 : 1;
}

}  // namespace fusejit::cli
