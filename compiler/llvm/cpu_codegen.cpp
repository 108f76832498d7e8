// generate_cpu_program: the same planning passes as the CUDA codegen (with the
// CPU's heuristics), then one LLVM function per planned kernel.
#include <set>
#include <sstream>

#include <llvm/ADT/StringMap.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/emitters.h"
#include "compiler/llvm/lower.h"
#include "compiler/passes.h"
#include "compiler/simplify.h"

namespace fusejit {

bool cpu_backend_available() { return true; }

namespace {

CpuTarget resolve_target(CpuTarget t) {
  if (t.triple.empty()) t.triple = llvm::sys::getProcessTriple();
  if (t.cpu.empty()) t.cpu = llvm::sys::getHostCPUName().str();
  if (t.features.empty()) {
    llvm::StringMap<bool> features;
    if (llvm::sys::getHostCPUFeatures(features)) {
      std::set<std::string> sorted;  // stable text: the cache key hashes it
      for (const auto& f : features) sorted.insert((f.getValue() ? "+" : "-") + f.getKey().str());
      for (const std::string& f : sorted) t.features += (t.features.empty() ? "" : ",") + f;
    }
  }
  return t;
}

bool has_feature(const std::string& features, const std::string& name) {
  return ("," + features + ",").find(",+" + name + ",") != std::string::npos;
}

// Splits the CPU scheduler's keys (cpu_tile=MRxNR, cpu_kc=N) from the config;
// the rest goes to parse_heuristics.
Expected<std::string> take_cpu_keys(const std::string& config, cg::cpu::CpuHeuristics& h) {
  std::string rest, item;
  std::string text = config;
  for (char& c : text)
    if (c == ',' || c == ';') c = ' ';
  std::istringstream in(text);
  while (in >> item) {
    if (item.rfind("cpu_tile=", 0) == 0) {
      if (std::sscanf(item.c_str() + 9, "%dx%d", &h.mr, &h.nr) != 2 || h.mr < 1 || h.mr > 32 || h.nr < 1 ||
          h.nr > 256)
        return Error("config: cpu_tile wants MRxNR (1..32 x 1..256), got '" + item.substr(9) + "'");
    } else if (item.rfind("cpu_kc=", 0) == 0) {
      h.kc = std::atoi(item.c_str() + 7);
      if (h.kc < 1 || h.kc > 4096) return Error("config: cpu_kc wants 1..4096, got '" + item.substr(7) + "'");
    } else {
      rest += item + " ";
    }
  }
  return rest;
}

}  // namespace

Expected<CpuProgram> generate_cpu_program(const Graph& written, const CpuCodegenOptions& opts) {
  using namespace cg;
  Expected<SimplifiedGraph> simplified = simplify_for_codegen(written, opts.config);  // verifies; simplify=0 keeps it
  if (!simplified) return simplified.error();
  const Graph& g = simplified->graph;
  cpu::CpuHeuristics cpu_heur;
  Expected<std::string> rest = take_cpu_keys(opts.config, cpu_heur);
  if (!rest) return rest.error();
  Expected<Heuristics> heur = parse_heuristics(*rest);
  if (!heur) return heur.error();
  // Pools and row reductions run as kernels of their own over the anchor's
  // output (their GPU fusion is tied to thread-block tiles).
  heur->fuse_pool = false;
  heur->fuse_reductions = false;
  heur->mainloop = "ffma";

  PlanContext ctx(g, *heur, "cpu");
  Plan plan;
  plan.notes = simplified->notes;
  mark_leaf_exprs(ctx);
  if (Status s = plan_anchor_kernel(ctx, plan); !s) return s.error();
  if (Status s = choose_mainloop(ctx, plan); !s) return s.error();
  if (Status s = choose_anchor_tile(ctx, plan); !s) return s.error();
  if (Status s = plan_fallback_kernels(ctx, plan); !s) return s.error();
  assign_buffers(ctx, plan);
  plan.kernels[0].notes.clear();  // the GPU mainloop's reasons do not apply
  plan.kernels[0].notes.push_back("mainloop: packed f32 FMA micro-kernel (LLVM, host vectors)");
  if (g.precision != Precision::FP32)
    plan.notes.push_back("cpu: precision " + std::string(precision_name(g.precision)) +
                         " computes in fp32 on the CPU backend (16-bit tensors converted at load and store)");
  std::set<std::string> names;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    std::string name = kernel_base_name(ctx, plan.kernels[k]);
    if (names.count(name)) name += "_" + std::to_string(k);
    names.insert(name);
    plan.kernels[k].name = name;
  }

  CpuProgram program;
  const CpuTarget target = resolve_target(opts.target);
  program.target_triple = target.triple;
  program.cpu = target.cpu;
  program.features = target.features;
  program.name = plan.kernels[0].name;
  program.scratch = plan.scratch;

  llvm::LLVMContext llvm_ctx;
  llvm::Module module(program.name, llvm_ctx);
  module.setTargetTriple(target.triple);
  cpu::LowerContext lc{llvm_ctx, module, ctx, plan, 16, 32, {}};
  const bool avx512 = has_feature(target.features, "avx512f");
  lc.lanes = avx512 ? 16 : has_feature(target.features, "avx") ? 8 : 4;
  lc.vector_regs = avx512 ? 32 : 16;
  lc.heur = cpu_heur;

  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const int index = static_cast<int>(k);
    Expected<CpuLaunch> launch = plan.kernels[k].kind == KernelKind::Anchor ? cpu::lower_anchor_kernel(lc, index)
                                                                            : cpu::lower_fallback_kernel(lc, index);
    if (!launch) return launch.error();
    plan.kernels[k].notes.push_back("cpu: " + launch->what + ", " + std::to_string(launch->work_items) +
                                    " work items");
    program.launches.push_back(std::move(*launch));
  }
  for (llvm::Function& f : module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", target.cpu);
    if (!target.features.empty()) f.addFnAttr("target-features", target.features);
  }
  std::string problems;
  llvm::raw_string_ostream err(problems);
  if (llvm::verifyModule(module, &err))
    return Error("cpu codegen: internal error: the generated LLVM IR does not verify: " + err.str());
  program.plan_text = plan_text(g, plan);
  llvm::raw_string_ostream ir(program.llvm_ir);
  module.print(ir, nullptr);
  ir.flush();
  return program;
}

}  // namespace fusejit
