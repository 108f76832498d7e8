// Pass: a whole-row reduction's broadcast back over the anchor's output, in
// the epilogue (opt-in: row_broadcast=1; wgmma linear / matmul). When one tile
// spans N and the epilogue reduces each row (pass_fuse_reduction.cpp), the
// elementwise consumers over the anchor's domain that read the row's value
// (`h - max(h)`, `h * rsqrt(mean(h^2))`, `h + mean(h)`) run on the same tile's
// accumulators once its rows are reduced (fj::tile_row_broadcast): the
// anchor's output is not stored for a pointwise kernel to read back. Without
// it those consumers run in a pointwise kernel over the stored output.
#include "compiler/passes.h"

namespace fusejit::cg {

void fuse_row_broadcast(PlanContext& ctx, Plan& plan) {
  if (!ctx.heur.row_broadcast || plan.kernels.empty()) return;
  KernelPlan& kp = plan.kernels[0];
  if (kp.kind != KernelKind::Anchor || kp.mainloop != Mainloop::Wgmma || kp.tails.size() != 1) return;
  const FusedTail& tail = kp.tails[0];
  const Node& anchor = ctx.node(kp.root);
  const Node& r = ctx.node(tail.op);
  const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(tail.op);
  auto refuse = [&](const std::string& why) {
    kp.notes.push_back("row_broadcast: " + label + "'s consumers over the rows not in the epilogue: " + why);
  };
  if (tail.partial || tail.spatial || op_category(r.op) != OpCategory::Reduction) return;
  if (anchor.op != OpKind::Linear && anchor.op != OpKind::Matmul) return refuse("only linear and matmul anchors");
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  const Shape& domain = kp.region.domain;
  if (domain.size() != 2 || geo.batch != 1) return refuse("only a 2-D output");
  if (r.op != OpKind::Sum && r.op != OpKind::Mean && r.op != OpKind::Max && r.op != OpKind::Min)
    return refuse("only sum, mean, max and min");
  if (r.type.shape != Shape{domain[0], 1}) return refuse("the reduction keeps no size-1 dim to broadcast along");
  std::vector<ValueId> sources = {kp.root};
  sources.insert(sources.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  sources.push_back(tail.op);
  sources.insert(sources.end(), tail.post.nodes.begin(), tail.post.nodes.end());
  kp.wide.domain = domain;
  // What the anchor's region could compute it already holds: what grows here reads the row's value.
  grow_region(ctx, kp.wide, sources, tail.op, 0, /*allow_placed=*/false);
  if (kp.wide.nodes.empty()) return;
  std::string ops;
  for (ValueId v : kp.wide.nodes) ops += (ops.empty() ? "" : ", ") + std::string(op_name(ctx.node(v).op)) + " %" +
                                         std::to_string(v);
  kp.notes.push_back(label + " broadcast back over the tile's rows in the epilogue (row_broadcast): " + ops +
                     " on the accumulators, the anchor's output not stored for them");
}

}  // namespace fusejit::cg
