// Pass: reductions along the anchor's N fused into its epilogue. When one
// tile spans all N columns (N <= the tile width), each output row is reduced
// in the epilogue (per-thread partials, combined through shared memory in a
// fixed order) and only the reduced value is stored. When N is wider, each
// column tile stores its per-row partial (a [tiles, rows] scratch, far
// smaller than the [rows, N] input) and a RowFinish kernel combines them.
// Reductions over other dims materialize their input and run as a row
// kernel (pass_fallback.cpp).
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {

int64_t max_epilogue_cols(const PlanContext& ctx, const KernelPlan& kp) {
  // 3xTF32 on wgmma keeps a second accumulator: tiles at most 128 wide (validate_wgmma).
  return kp.mainloop == Mainloop::Wgmma ? (ctx.heur.wgmma ? ctx.heur.wgmma->bn : kp.mma_kind == "f32x3" ? 128 : 256)
         : kp.mainloop == Mainloop::Mma ? (ctx.heur.mma ? ctx.heur.mma->bn : 128)
         : ctx.heur.tile                ? ctx.heur.tile->bn
                                        : 128;
}

void fuse_row_reductions(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  if (!kp.tails.empty()) return;  // a fused pool already owns the epilogue
  // conv2d_weight_grad's N (ci, kh, kw) spans three dims: elementwise epilogues only
  if (ctx.node(kp.root).op == OpKind::Conv2dWeightGrad) return;
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  std::set<ValueId> in(inside.begin(), inside.end());
  const int rank = static_cast<int>(geo.out.size());
  const int64_t col_dim = geo.op == OpKind::Conv2d ? 1 : rank - 1;
  const int64_t max_cols = max_epilogue_cols(ctx, kp);

  std::set<ValueId> seen;
  for (ValueId v : inside) {
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      const Node& r = ctx.node(u);
      if (in.count(u) || seen.count(u) || op_category(r.op) != OpCategory::Reduction) continue;
      seen.insert(u);
      const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(u);
      auto refuse = [&](const std::string& why) {
        kp.notes.push_back(label + " not fused into the epilogue: " + why + "; %" + std::to_string(v) +
                           " goes to memory and a row kernel reduces it");
      };
      if (geo.op == OpKind::Conv2d && r.attr_ints("dims") == std::vector<int64_t>{2, 3}) continue;  // pass_fuse_spatial
      if (r.attr_ints("dims") != std::vector<int64_t>{col_dim}) {
        refuse("it reduces dims " + attr_str(r.attrs.at("dims")) + ", the epilogue only reduces along N (dim " +
               std::to_string(col_dim) + ")");
        continue;
      }
      if (!ctx.heur.fuse_reductions) {
        refuse("disabled by the codegen config (fuse_reductions=0)");
        continue;
      }
      if (geo.groups > 1 || geo.n > max_cols) {
        FusedTail tail;
        tail.op = u;
        tail.partial = true;
        plan.partials[u] = PartialBuffers{};
        kp.tails.push_back(std::move(tail));
        kp.notes.push_back(label + " partly fused: N=" + std::to_string(geo.n * geo.groups) +
                           (geo.groups > 1 ? " is split over conv groups" : " is wider than one tile") +
                           ", so each column tile stores per-row partials and a row-finish kernel combines them");
        continue;
      }
      FusedTail tail;
      tail.op = u;
      tail.post.domain = r.type.shape;
      ctx.kernel_of[static_cast<size_t>(u)] = 0;
      kp.tails.push_back(std::move(tail));
      kp.notes.push_back(label + " fused into the epilogue: one tile spans N=" + std::to_string(geo.n));
    }
  }
  for (FusedTail& t : kp.tails)
    if (!t.partial) grow_region(ctx, t.post, {t.op}, t.op, 0, /*allow_placed=*/false);
}

}  // namespace fusejit::cg
