// generate_program: runs the planning passes (passes.h) and the emitters
// (emitters.h), and assembles the Program.
#include "compiler/codegen.h"

#include <algorithm>
#include <set>

#include "compiler/cuda_source.h"
#include "compiler/emitters.h"
#include "compiler/passes.h"
#include "compiler/simplify.h"

namespace fusejit {

Expected<Program> generate_program(const Graph& written, const CodegenOptions& opts) {
  using namespace cg;
  // Verifies, then simplifies (unless simplify=0): the passes plan that graph.
  Expected<SimplifiedGraph> simplified = simplify_for_codegen(written, opts.config);
  if (!simplified) return simplified.error();
  const Graph& g = simplified->graph;
  Expected<Heuristics> heur = parse_heuristics(opts.config);
  if (!heur) return heur.error();

  PlanContext ctx(g, *heur, opts.arch);
  Plan plan;
  plan.notes = simplified->notes;
  mark_leaf_exprs(ctx);
  const bool anchored = g.anchor().has_value();
  if (anchored) {  // without an anchor (a pointwise program) every kernel is a fallback kernel
    if (Status s = plan_anchor_kernel(ctx, plan); !s) return s.error();
    if (Status s = choose_mainloop(ctx, plan); !s) return s.error();
    fuse_pool(ctx, plan);
    fuse_row_reductions(ctx, plan);
    fuse_row_broadcast(ctx, plan);
    fuse_row_softmax(ctx, plan);
    fuse_pool1d(ctx, plan, [](int64_t k) {  // every tile width and staging chunk is a multiple of 16
      return 16 % k == 0 ? std::string()
                         : "a window of " + std::to_string(k) + " columns does not divide the epilogue's 16-column chunks";
    }, "", /*overlapping_tiles=*/true);
    fuse_spatial_reduction(ctx, plan);
    if (Status s = choose_anchor_tile(ctx, plan); !s) return s.error();
    finish_spatial_in_clusters(ctx, plan);
    fuse_row_cluster(ctx, plan);
    fuse_softmax_cluster(ctx, plan);
    fuse_norm_epilogue(ctx, plan);
    store_epilogue_transposes(ctx, plan);
  } else {
    plan.notes.push_back("no anchor op: a pointwise program (elementwise, layout, reduction and row kernels only)");
  }
  if (Status s = plan_fallback_kernels(ctx, plan); !s) return s.error();
  if (plan.kernels.empty()) return Error("codegen: internal error: the plan has no kernel");
  if (anchored) sum_spatial_partials_atomically(ctx, plan);
  assign_buffers(ctx, plan);
  if (anchored) choose_tma_stores(ctx, plan);
  for (size_t k = 0; k < plan.kernels.size(); ++k)
    if (const auto tile = transpose_tile(ctx, plan, static_cast<int>(k)))
      plan.kernels[k].notes.push_back("a tiled transpose: 32x32 tiles through shared memory, read along dim " +
                                      std::to_string(tile->load_dim) + ", written along the last dim");
  const Mainloop mainloop = plan.kernels[0].mainloop;
  if (anchored && g.precision == Precision::TF32 && mainloop == Mainloop::Simt)
    plan.notes.push_back("tf32 runs the fp32 SIMT mainloop here (at least as accurate as TF32)");

  name_kernels(ctx, plan);

  Program program;
  program.name = plan.kernels[0].name;
  program.plan_text = plan_text(g, plan);
  program.scratch = plan.scratch;
  CudaModule module;
  module.header.push_back("fusejit program " + program.name + " for graph '" + g.name + "' (" +
                          std::string(precision_name(g.precision)) + ", " + opts.arch + "). Generated: do not edit.");
  module.header.push_back("");
  std::string line;
  for (char c : program.plan_text) {
    if (c == '\n') {
      module.header.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  module.includes = {"fusejit/fj_common.cuh", "fusejit/fj_ops.cuh"};
  const bool half = std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
    return n.op != OpKind::Constant && n.type.dtype != DType::F32;
  });
  if (half) module.includes.push_back("fusejit/fj_half.cuh");  // slow to parse: only when needed
  std::set<KernelKind> kinds;
  for (const KernelPlan& kp : plan.kernels) kinds.insert(kp.kind);
  if (anchored)
    module.includes.push_back(mainloop == Mainloop::Wgmma ? "fusejit/gemm_wgmma.cuh"
                              : mainloop == Mainloop::Mma ? "fusejit/gemm_mma.cuh"
                              : plan.kernels[0].tile.gemv ? "fusejit/gemm_gemv.cuh"
                                                          : "fusejit/gemm_simt.cuh");
  if (anchored && g.node(plan.kernels[0].root).op == OpKind::Conv2d) {
    module.includes.push_back("fusejit/conv_simt.cuh");  // pixel maps and taps
    if (mainloop == Mainloop::Mma)
      module.includes.push_back(plan.kernels[0].conv_patch ? "fusejit/conv_patch.cuh" : "fusejit/conv_mma.cuh");
    if (plan.kernels[0].spatial_cluster) module.includes.push_back("fusejit/conv_spatial_cluster.cuh");
    if (mainloop == Mainloop::Wgmma)
      module.includes.push_back(plan.kernels[0].wgmma.conv_halo ? "fusejit/conv_wgmma_halo.cuh"
                                                                : "fusejit/conv_wgmma.cuh");
    if (!plan.kernels[0].conv_runs.empty()) module.includes.push_back("fusejit/conv_wgmma_store.cuh");
  }
  if (anchored && g.node(plan.kernels[0].root).op == OpKind::Conv2dWeightGrad)  // the operands' loaders
    module.includes.push_back(mainloop != Mainloop::Wgmma        ? "fusejit/conv_wgrad.cuh"     // SIMT and mma.sync
                              : plan.kernels[0].wgmma.swap_ab ? "fusejit/wgrad_swap_ab.cuh"  // WgradSwapOperands
                                                              : "fusejit/conv_wgmma.cuh");   // WgradOperands
  if (anchored) module.includes.push_back("fusejit/epilogue.cuh");
  if (anchored && plan.kernels[0].pool1d_overlap >= 0) module.includes.push_back("fusejit/epilogue_pool1d.cuh");
  if (anchored && std::any_of(plan.kernels[0].tails.begin(), plan.kernels[0].tails.end(), [&](const FusedTail& t) {
        return op_category(g.node(t.op).op) == OpCategory::Norm;  // pass_fuse_norm_epilogue.cpp
      }))
    module.includes.push_back("fusejit/epilogue_norm.cuh");
  if (mainloop == Mainloop::Wgmma) module.includes.push_back("fusejit/wgmma_tma_store.cuh");
  if (mainloop == Mainloop::Wgmma && plan.kernels[0].wgmma.cluster_n > 1)
    module.includes.push_back("fusejit/wgmma_row_cluster.cuh");
  module.includes.push_back("fusejit/reduce.cuh");
  const bool norm_pools = std::any_of(plan.kernels.begin(), plan.kernels.end(), [&](const KernelPlan& k) {
    return k.kind == KernelKind::Norm && !k.tails.empty() &&  // pass_fuse_norm_tail.cpp
           (g.node(k.tails[0].op).op == OpKind::MaxPool2d || g.node(k.tails[0].op).op == OpKind::AvgPool2d);
  });
  if (kinds.count(KernelKind::Pool2d) || kinds.count(KernelKind::Pool1d) || norm_pools)
    module.includes.push_back("fusejit/pool.cuh");
  if (kinds.count(KernelKind::Gather)) module.includes.push_back("fusejit/gather.cuh");

  if (needs_operand_staging(plan.kernels[0])) module.includes.push_back("fusejit/operand_staging.cuh");

  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const int index = static_cast<int>(k);
    if (needs_operand_staging(plan.kernels[k])) {  // residuals, transposed B: before the anchor
      Expected<EmittedKernel> staging = emit_operand_staging_kernel(ctx, plan, index);
      if (!staging) return staging.error();
      module.kernels.push_back(std::move(staging->source));
      program.launches.push_back(std::move(staging->launch));
    }
    Expected<EmittedKernel> e = plan.kernels[k].kind == KernelKind::Anchor ? emit_anchor_kernel(ctx, plan, index)
                                                                           : emit_fallback_kernel(ctx, plan, index);
    if (!e) return e.error();
    module.kernels.push_back(std::move(e->source));
    program.launches.push_back(std::move(e->launch));
  }
  program.source = module.render();
  return program;
}

}  // namespace fusejit
