// fusejit run SPEC — compile, run on seeded random inputs, compare with the
// fp64 reference and time the kernel, on the GPU or (--backend cpu) the host.
#include <cstdio>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tools/fusejit/args.h"
#include "tools/fusejit/backend.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

int run_run(const std::vector<std::string>& argv) {
  ParsedArgs a = parse_args(argv, {"seed", "samples", "iters", "warmup", "config", "arch", "backend", "batch"},
                            {"no-time"});
  CheckOptions check;
  check.seed = static_cast<uint64_t>(a.get_int("seed", 1));
  check.samples = a.get_int("samples", 100000);
  check.iters = static_cast<int>(a.get_int("iters", 20));
  check.warmup = static_cast<int>(a.get_int("warmup", 3));
  check.time = !a.flags.count("no-time");
  std::string backend_error;
  Backend backend = parse_backend_arg(a.get("backend", "auto"), backend_error);
  long long batch = a.get_int("batch", 0);
  if (!a.error.empty()) return usage_error(kRun, a.error);
  if (!backend_error.empty()) return usage_error(kRun, backend_error);
  if (a.options.count("batch") && batch < 1) return usage_error(kRun, "--batch must be >= 1");
  if (a.positional.size() != 1) return usage_error(kRun, "expected exactly one spec file");
  if (check.iters < 1 || check.samples < 1) return usage_error(kRun, "--iters and --samples must be >= 1");
  auto g = load_spec_file(a.positional[0]);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  if (batch > 0)
    if (Status s = set_batch(*g, batch); !s) {
      std::fprintf(stderr, "fusejit run: %s\n", s.error().str().c_str());
      return 1;
    }
  if (std::string why = resolve_backend(backend); !why.empty()) {
    std::fprintf(stderr, "fusejit run: cannot execute on the %s backend: %s\n%s",
                 std::string(backend_name(backend)).c_str(), why.c_str(),
                 backend == Backend::Cuda ? "(`fusejit compile SPEC --arch sm_90a -o out.cubin` compiles without one)\n"
                                          : "");
    return 3;
  }
  if (backend == Backend::Cpu) return run_on_cpu(*g, check, a.get("config"));
  auto info = device_info(0);
  Engine engine;
  CompileOptions opts;
  opts.arch = a.get("arch", "auto");
  opts.config = a.get("config");
  auto kernel = engine.compile(*g, opts);
  if (!kernel) {
    std::fprintf(stderr, "fusejit run: %s\n", kernel.error().str().c_str());
    return 1;
  }
  std::printf("%s on %s (%s), precision %s, seed %llu\n", (*kernel)->name().c_str(),
              info ? info->name.c_str() : "?", (*kernel)->arch().c_str(),
              std::string(precision_name(g->precision)).c_str(), static_cast<unsigned long long>(check.seed));
  auto r = check_kernel(**kernel, *g, check);
  if (!r) {
    std::fprintf(stderr, "fusejit run: %s\n", r.error().str().c_str());
    return 1;
  }
  std::printf("%s", r->summary().c_str());
  return r->pass ? 0 : 1;
}

}  // namespace

const Command kRun{
    "run", "run a spec on the GPU or CPU: verify against fp64 and time it",
    "usage: fusejit run SPEC.yaml [--backend auto|cuda|cpu] [--batch N] [--seed N] [--samples N]\n"
    "                             [--iters N] [--warmup N] [--arch auto|sm_XX] [--config STR] [--no-time]\n\n"
    "Compiles the spec for the GPU (or the host CPU), fills its inputs with seeded random data (uniform\n"
    "[0,1) activations, normal parameters, PyTorch's init for weights and biases),\n"
    "poisons the outputs with NaN, launches, and compares every output with the fp64\n"
    "CPU reference (all elements, or --samples random ones when that would be slow).\n"
    "Prints max abs / rel error and rel L2 against the precision's tolerance, PASS or\n"
    "FAIL, and the kernel time: CUDA events, --warmup runs, then --iters trials each\n"
    "after an L2 flush; the median is reported.\n"
    "  --backend B  cuda, cpu (LLVM, host buffers, docs/cpu.md) or auto (the default: cpu\n"
    "               when there is no GPU and the build has it, else cuda). On cpu the time\n"
    "               is std::chrono steady_clock around each synchronous run, after a 64 MiB\n"
    "               write that flushes the caches; FUSEJIT_NUM_THREADS sets the threads.\n"
    "  --batch N    run at batch size N: dim 0 of the anchor's input (and of inputs shaped\n"
    "               like it) is set to N and the graph re-inferred (weights keep their shapes)\n"
    "Exit status: 0 PASS, 1 FAIL or error, 2 usage, 3 the backend cannot run here\n"
    "(no GPU, or a build without the CPU backend).\n",
    run_run};

}  // namespace fusejit::cli
