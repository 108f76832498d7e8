// A reduction over a conv's output pixels (or a GEMM's rows) in the anchor
// kernel (pass_fuse_spatial.cpp): each tile's per-channel values
// (fj::tile_col_partials) stored as per-tile partials, added atomically
// (pass_spatial_atomics.cpp) or folded into the block's column of an image
// cluster (KernelPlan::spatial_cluster, pass_spatial_cluster.cpp); for the
// last, after the pixel-tile loop, block 0 of each image cluster combines the
// folds (fj::finish_column_fold, conv_spatial_cluster.cuh) and runs the
// reduction's consumers at [image, channel], storing the outputs.
#include <algorithm>

#include "compiler/emit_anchor_parts.h"
#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

PixelTileRange pixel_tile_range(KernelSource& s, int image_cluster) {
  if (image_cluster == 0) return {{}, "blockIdx.x", "kMTiles", "gridDim.x", "blockIdx.x", "pixel_tile + gridDim.x"};
  s.constants.push_back({"kImageCluster", image_cluster, "blocks of a cluster, all on one image's pixel tiles"});
  return {{"const int image = blockIdx.x / kImageCluster;",
           "const int image_end = (image + 1) * Pixels::kTilesPerImage;  // past the image's last tile",
           "const int image_first = image * Pixels::kTilesPerImage + blockIdx.x % kImageCluster;",
           "float* fold = fj::begin_column_fold<SpatialOp, Tile::BN>();  // this block's per-channel values"},
          "image_first",
          "image_end",
          "kImageCluster",
          "image_first < image_end ? image_first : Pixels::kTiles",
          "(pixel_tile + kImageCluster < image_end ? pixel_tile + kImageCluster : Pixels::kTiles)"};
}

std::vector<std::string> spatial_tail_epilogue(KernelEmitter& em, const FusedTail& tail, const std::string& suffix,
                                               std::vector<std::string> value, int threads, const std::string& tile,
                                               int64_t staged_room, int64_t& smem_floats) {
  const PlanContext& ctx = em.ctx();
  const KernelPlan& kp = em.plan().kernels[0];
  const int64_t tile_m = kp.tile_m(), tile_n = kp.tile_n();
  int chunk = static_cast<int>(tile_n);
  while (chunk > 16 && (chunk > 64 || (tile_m * (chunk + 8) + threads) * 4 > staged_room)) chunk /= 2;
  smem_floats = std::max<int64_t>(smem_floats, tile_m * (chunk + 8) + threads);
  const bool conv = ctx.g.node(kp.root).op == OpKind::Conv2d;
  std::vector<std::string> out = {"fj::tile_col_partials<" + reduce_op_type(ctx.g.node(tail.op).op) + ", " +
                                  std::to_string(chunk) + ">(frag, m0, n0, " +
                                  (conv ? "kCoutPerGroup, smem, [&](int m) { return Pixels{}.pixel(m).ok; },"
                                        : "kN, smem, [&](int m) { return m < kM; },")};
  value.back() = "},";
  append(out, value);
  out.push_back("[&](float part, int n) {");
  if (kp.spatial_cluster) {  // folded into this block's column
    append(out, {"fold[n - n0] = SpatialOp::combine(fold[n - n0], part);", "});"});
    return out;
  }
  const PartialBuffers& pb = em.plan().partials.at(tail.op);
  const std::string rows = "kPartialRows" + suffix;
  em.src().constants.push_back({rows, pb.rows, "rows of " + ctx.g.describe(tail.op) + ": images x channels"});
  const std::string sums = em.buffer_param({BufferKind::Scratch, pb.sums}, true);
  if (!conv) {  // a GEMM's row tile: one partial a column
    append(out, {sums + "[(long long)" + tile + " * " + rows + " + n] = part;", "});"});
    return out;
  }
  const std::string row = "(long long)image * ConvShape::kCout + g * kCoutPerGroup + n";
  out.push_back("const int image = " + tile + " / Pixels::kTilesPerImage;");
  out.push_back(pb.atomic ? "fj::red_add_keep_in_l2(&" + sums + "[" + row + "], part);"
                          : sums + "[(long long)(" + tile + " % Pixels::kTilesPerImage) * " + rows + " + " + row +
                                "] = part;");
  out.push_back("});");
  return out;
}

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
