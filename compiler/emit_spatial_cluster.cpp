// The end of a halo-patch conv kernel whose pixel reduction finishes in the
// kernel (KernelPlan::spatial_cluster, pass_spatial_cluster.cpp): after the
// pixel-tile loop, block 0 of each image cluster combines the cluster's
// per-channel folds (fj::finish_column_fold, conv_spatial_cluster.cuh) and
// runs the reduction's consumers at [image, channel], storing the outputs.
#include "compiler/emit_anchor_parts.h"
#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

std::vector<std::string> spatial_cluster_finish(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail) {
  const PlanContext& ctx = em.ctx();
  const Node& rn = ctx.g.node(tail.op);
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, em.plan(), tail.post, tail.op, -1, true),
                                        "fj_after_" + std::string(op_name(rn.op)),
                                        "after " + ctx.g.describe(tail.op) + ", at [image, channel]");
  const bool mean = rn.op == OpKind::Mean || rn.op == OpKind::GlobalAvgPool;
  const int rank = static_cast<int>(rn.type.shape.size());  // [N, C] or [N, C, 1, 1]
  std::vector<std::string> out = {
      "fj::finish_column_fold<SpatialOp, Tile::BN, kImageCluster>(fold, n0, kCoutPerGroup, [&](float v, int n) {",
      "const int i0 = image;", "const int i1 = g * kCoutPerGroup + n;"};
  if (rank == 4) append(out, {"const int i2 = 0;", "const int i3 = 0;"});
  out.push_back(post + "(p, " + (mean ? "v / (float)kImagePixels" : std::string("v")) + ", " + coord_args(rank) + ");");
  out.push_back("});");
  if (mean) em.src().constants.push_back({"kImagePixels", geo.oh * geo.ow, "output pixels of an image: the mean's divisor"});
  return out;
}

}  // namespace fusejit::cg::anchor
