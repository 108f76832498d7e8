// fusejit emit SPEC — the generated CUDA source or, with --backend cpu, LLVM IR
// (and the fusion plan).
#include <cstdio>

#include "compiler/cpu_program.h"
#include "compiler/program.h"
#include "fusejit/backward.h"
#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "tools/fusejit/args.h"
#include "tools/fusejit/backend.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

// The CPU backend's LLVM IR (or plan and launches); no LLVM JIT involved.
int emit_cpu(const Graph& g, const ParsedArgs& a) {
  if (!cpu_backend_available()) {
    std::fprintf(stderr, "fusejit emit: the CPU backend is not in this build (configure with LLVM 14: "
                         "apt-get install llvm-14-dev, -DFUSEJIT_ENABLE_LLVM=ON)\n");
    return 3;
  }
  CpuCodegenOptions cg;
  cg.config = a.get("config");
  cg.ir_text = true;
  auto program = generate_cpu_program(g, cg);
  if (!program) {
    std::fprintf(stderr, "fusejit emit: %s\n", program.error().str().c_str());
    return 1;
  }
  if (!a.flags.count("plan")) {
    std::printf("%s", program->llvm_module.c_str());
    return 0;
  }
  std::printf("%s", program->plan_text.c_str());
  std::printf("target %s cpu=%s\n", program->target_triple.c_str(), program->cpu.c_str());
  for (const CpuLaunch& l : program->launches)
    std::printf("launch %s work_items=%lld grain=%lld args=%zu: %s\n", l.function.c_str(),
                static_cast<long long>(l.work_items), static_cast<long long>(l.grain), l.args.size(), l.what.c_str());
  return 0;
}

// The gradient program (fusejit/backward.h); with --plan, each stage's plan too.
int emit_backward(const Graph& g, const ParsedArgs& a, Backend backend) {
  auto program = build_backward(g);
  if (!program) {
    std::fprintf(stderr, "fusejit emit: %s\n", program.error().str().c_str());
    return 1;
  }
  std::printf("%s", print_backward(*program).c_str());
  if (!a.flags.count("plan")) return 0;
  if (backend == Backend::Cpu) {
    std::printf("\n(the per-stage plans are printed for the CUDA backend only)\n");
    return 0;
  }
  Engine engine;
  CompileOptions opts;
  opts.arch = a.get("arch", "sm_90a");
  opts.config = a.get("config");
  std::vector<std::pair<std::string, const Graph*>> graphs = {{"forward", &program->forward}};
  for (const auto& st : program->stages) graphs.push_back({st.what, &st.graph});
  for (const auto& [what, graph] : graphs) {
    auto p = engine.emit(*graph, opts);
    if (!p) {
      std::fprintf(stderr, "fusejit emit: %s: %s\n", what.c_str(), p.error().str().c_str());
      return 1;
    }
    std::printf("\nplan of %s:\n%s", what.c_str(), p->plan_text.c_str());
  }
  return 0;
}

int run_emit(const std::vector<std::string>& argv) {
  ParsedArgs a = parse_args(argv, {"arch", "config", "backend", "batch"}, {"plan", "backward"});
  std::string backend_error;
  Backend backend = parse_backend_arg(a.get("backend", "cuda"), backend_error);
  long long batch = a.get_int("batch", 0);
  if (!a.error.empty()) return usage_error(kEmit, a.error);
  if (!backend_error.empty()) return usage_error(kEmit, backend_error);
  if (backend == Backend::Auto) backend = !gpu_available() && cpu_backend_available() ? Backend::Cpu : Backend::Cuda;
  if (a.options.count("batch") && batch < 1) return usage_error(kEmit, "--batch must be >= 1");
  if (a.positional.size() != 1) return usage_error(kEmit, "expected exactly one spec file");
  auto g = load_spec_file(a.positional[0]);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  if (batch > 0)
    if (Status s = set_batch(*g, batch); !s) {
      std::fprintf(stderr, "fusejit emit: %s\n", s.error().str().c_str());
      return 1;
    }
  if (a.flags.count("backward")) return emit_backward(*g, a, backend);
  if (backend == Backend::Cpu) return emit_cpu(*g, a);
  Engine engine;
  CompileOptions opts;
  opts.arch = a.get("arch", "sm_90a");
  opts.config = a.get("config");
  auto program = engine.emit(*g, opts);
  if (!program) {
    std::fprintf(stderr, "fusejit emit: %s\n", program.error().str().c_str());
    return 1;
  }
  if (a.flags.count("plan")) {
    std::printf("%s", program->plan_text.c_str());
    for (const auto& l : program->launches)
      std::printf("launch %s grid=(%u,%u,%u)%s block=(%u,%u,%u) smem=%u%s%s%s\n", l.kernel.c_str(), l.grid[0],
                  l.grid[1], l.grid[2],
                  !l.persistent       ? ""
                  : l.cluster > 1 ? (" blocks, a tile each, persistent over the clusters that fit (" +
                                     std::to_string(l.cluster) + " blocks each),").c_str()
                                  : " tiles, persistent over min(tiles, SMs) blocks,",
                  l.block[0], l.block[1], l.block[2], l.shared_bytes,
                  l.tensor_maps.empty() ? "" : (" tensor_maps=" + std::to_string(l.tensor_maps.size())).c_str(),
                  l.cluster > 1 ? (" cluster=(" + std::to_string(l.cluster) + ",1,1)").c_str() : "",
                  l.operand_staging ? " (operand staging for the next launch)" : "");
    return 0;
  }
  std::printf("%s", program->source.c_str());
  return 0;
}

}  // namespace

const Command kEmit{
    "emit", "print the CUDA C++ (or, --backend cpu, LLVM IR) generated for a spec, or its plan",
    "usage: fusejit emit SPEC.yaml [--backend cuda|cpu|auto] [--arch sm_90a] [--config STR]\n"
    "                              [--batch N] [--plan] [--backward]\n\n"
    "Prints the generated CUDA source: every shape a compile-time constant, one device\n"
    "function per epilogue node, kernels named after what they do. No GPU needed.\n"
    "  --backend B    cuda (default), cpu: the LLVM IR module for this host (docs/cpu.md),\n"
    "                 or auto: cpu when this build has it and no GPU is present, else cuda\n"
    "  --batch N      emit for batch size N (as `fusejit run --batch`)\n"
    "  --arch ARCH    target the code is generated for (default sm_90a)\n"
    "  --config STR   scheduler config override (see docs/codegen.md)\n"
    "  --plan         print the fusion plan and the launches instead of the source\n"
    "  --backward     print the gradient program (docs/backward.md): buffers, stages, and with\n"
    "                 --plan each stage's plan\n"
    "Exit status: 0 ok, 1 error, 2 usage, 3 the CPU backend is not in this build.\n",
    run_emit};

}  // namespace fusejit::cli
