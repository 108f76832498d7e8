// generate_cpu_program: the same planning passes as the CUDA codegen (with the
// CPU's heuristics), then one LLVM function per planned kernel.
#include <algorithm>
#include <set>
#include <sstream>

#include <llvm/ADT/StringMap.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/emitters.h"
#include "compiler/llvm/lower.h"
#include "compiler/passes.h"
#include "compiler/simplify.h"

namespace fusejit {

bool cpu_backend_available() { return true; }

CpuTarget host_cpu_target() {
  static const CpuTarget host = [] {
    CpuTarget t;
    t.triple = llvm::sys::getProcessTriple();
    t.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features;
    if (llvm::sys::getHostCPUFeatures(features)) {
      std::vector<std::string> names;
      for (const auto& f : features) names.push_back((f.getValue() ? "+" : "-") + f.getKey().str());
      std::sort(names.begin(), names.end(),
                [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
      for (const std::string& n : names) t.features += (t.features.empty() ? "" : ",") + n;
    }
    return t;
  }();
  return host;
}

namespace {

CpuTarget resolve_target(CpuTarget t) {
  const CpuTarget host = host_cpu_target();
  if (t.triple.empty()) t.triple = host.triple;
  if (t.cpu.empty()) t.cpu = host.cpu;
  if (t.features.empty()) t.features = host.features;
  return t;
}

bool has_feature(const std::string& features, const std::string& name) {
  return ("," + features + ",").find(",+" + name + ",") != std::string::npos;
}

// Splits the CPU scheduler's keys (cpu_tile=MRxNR, cpu_kc, cpu_mc, cpu_nc) from the config;
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
    } else if (item.rfind("cpu_mc=", 0) == 0 || item.rfind("cpu_nc=", 0) == 0) {
      int& v = item[4] == 'm' ? h.mc : h.nc;
      v = std::atoi(item.c_str() + 7);
      if (v < 1 || v > 65536) return Error("config: " + item.substr(0, 6) + " wants 1..65536, got '" + item.substr(7) + "'");
    } else {
      rest += item + " ";
    }
  }
  return rest;
}

// Pixels (KH output rows) a CPU tile of a pool-fused conv must hold at least;
// wider bands would not fit its stack buffers.
constexpr int64_t kMaxPoolBand = 512;
// Elements of a pool1d window the fused epilogue reduces unrolled, at most (as
// pass_fuse_pool allows 2-D windows of a tile's 128 rows).
constexpr int64_t kMaxPool1dWindow = 128;

// Whether a max / avg pool2d reading the conv epilogue (if any) has bands of
// window rows a CPU tile holds; a note if not.
bool pool_band_fits(const cg::PlanContext& ctx, cg::Plan& plan) {
  cg::KernelPlan& kp = plan.kernels[0];
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  const int64_t ow = ctx.node(kp.root).type.shape[3];
  for (ValueId v : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      const Node& p = ctx.node(u);
      if (p.op != OpKind::MaxPool2d && p.op != OpKind::AvgPool2d) continue;
      if (p.attr_ints("stride") != p.attr_ints("kernel_size")) continue;  // fuse_pool refuses it, saying why
      const int64_t band = p.attr_ints("kernel_size")[0] * ow;
      if (band <= kMaxPoolBand) continue;
      kp.notes.push_back("cpu: " + std::string(op_name(p.op)) + " %" + std::to_string(u) + " not fused: a band of " +
                         std::to_string(p.attr_ints("kernel_size")[0]) + " output rows (" + std::to_string(band) +
                         " pixels) is more than a CPU tile holds (" + std::to_string(kMaxPoolBand) + ")");
      return false;
    }
  return true;
}

// Why the pools and the conv reductions that read the anchor's epilogue are
// not fused on the CPU (they run as kernels of their own over its output).
void cpu_unfused_notes(const cg::PlanContext& ctx, cg::Plan& plan) {
  cg::KernelPlan& kp = plan.kernels[0];
  const bool conv = ctx.node(kp.root).op == OpKind::Conv2d;
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  std::set<ValueId> seen;
  for (ValueId v : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      const OpCategory cat = op_category(ctx.node(u).op);
      if (ctx.placed(u) || !seen.insert(u).second) continue;
      const std::string label = "cpu: " + std::string(op_name(ctx.node(u).op)) + " %" + std::to_string(u);
      const OpKind op = ctx.node(u).op;
      const bool pool2d = op == OpKind::MaxPool2d || op == OpKind::AvgPool2d;
      const bool pool1d = op == OpKind::MaxPool1d || op == OpKind::AvgPool1d;
      const bool explained = conv ? pool2d : pool1d && kp.tails.empty();  // fuse_pool / fuse_pool1d say why
      if (cat == OpCategory::Pool && !explained)
        kp.notes.push_back(label + " not fused: the anchor epilogue pools only a conv2d's pool2d or a linear / "
                           "matmul's pool1d, alone; %" + std::to_string(v) +
                           " goes to memory and a pool kernel reads it");
      else if (cat == OpCategory::Reduction && conv)
        kp.notes.push_back(label + " not fused: a CPU conv tile is channels x pixels, its epilogue reduces along "
                           "neither; %" + std::to_string(v) + " goes to memory and a row kernel reduces it");
    }
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
  // Row reductions along N of a linear / matmul and a conv's pool fuse as on
  // the GPU (the same plan); conv reductions over channels and other pools
  // run as kernels of their own (cpu_unfused_notes says why).
  heur->mainloop = "ffma";

  PlanContext ctx(g, *heur, "cpu");
  Plan plan;
  plan.notes = simplified->notes;
  mark_leaf_exprs(ctx);
  if (g.anchor()) {
    if (Status s = plan_anchor_kernel(ctx, plan); !s) return s.error();
    if (Status s = choose_mainloop(ctx, plan); !s) return s.error();
    plan.kernels[0].notes.clear();  // the GPU mainloop's reasons do not apply
    plan.kernels[0].notes.push_back(g.node(plan.kernels[0].root).op == OpKind::Conv2dWeightGrad
                                        ? "mainloop: a vectorized dot product per (output channel, input channel, "
                                          "tap) (LLVM, host vectors)"
                                        : "mainloop: packed f32 FMA micro-kernel (LLVM, host vectors)");
    if (g.node(plan.kernels[0].root).op != OpKind::Conv2d) {
      fuse_row_reductions(ctx, plan);
      fuse_pool1d(ctx, plan, [](int64_t k) {  // NC is cut to whole windows
        return k > kMaxPool1dWindow ? "a window of " + std::to_string(k) + " is more than the epilogue unrolls (" +
                                          std::to_string(kMaxPool1dWindow) + ")"
                                    : std::string();
      }, "cpu: ");
    } else if (pool_band_fits(ctx, plan)) {
      fuse_pool(ctx, plan);
    }
    cpu_unfused_notes(ctx, plan);
    if (Status s = choose_anchor_tile(ctx, plan); !s) return s.error();
  } else {
    plan.notes.push_back("no anchor op: a pointwise program (elementwise, layout, reduction and row kernels only)");
  }
  if (Status s = plan_fallback_kernels(ctx, plan); !s) return s.error();
  if (plan.kernels.empty()) return Error("cpu codegen: internal error: the plan has no kernel");
  assign_buffers(ctx, plan);
  if (g.precision != Precision::FP32)
    plan.notes.push_back("cpu: precision " + std::string(precision_name(g.precision)) +
                         " computes in fp32 on the CPU backend (16-bit tensors converted at load and store)");
  name_kernels(ctx, plan);

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
    const bool anchor = plan.kernels[k].kind == KernelKind::Anchor;
    Expected<CpuLaunch> launch = !anchor ? cpu::lower_fallback_kernel(lc, index)
                                 : g.node(plan.kernels[k].root).op == OpKind::Conv2dWeightGrad
                                     ? cpu::lower_wgrad_kernel(lc, index)
                                     : cpu::lower_anchor_kernel(lc, index);
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
  llvm::raw_string_ostream out(program.llvm_module);
  if (opts.ir_text)
    module.print(out, nullptr);
  else
    llvm::WriteBitcodeToFile(module, out);
  out.flush();
  return program;
}

}  // namespace fusejit
