// The wgmma epilogue of a whole-row reduction broadcast back over the tile
// (KernelPlan::wide on an anchor, pass_fuse_row_broadcast.cpp): the rows
// reduced, the reduction's row-shaped consumers stored once a row, then the
// wide region on the accumulators with the row's value (fj::tile_row_broadcast;
// over a cluster of column tiles, fj::tile_row_broadcast_cluster).
#include <algorithm>

#include "compiler/emit_anchor_parts.h"
#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

std::vector<std::string> row_broadcast_epilogue(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail,
                                                const AnchorShape& shape, std::vector<std::string> value,
                                                const std::string& post, const std::string& coord_call,
                                                int64_t row_sharers, int64_t& smem_floats) {
  const PlanContext& ctx = em.ctx();
  const Graph& g = ctx.g;
  const KernelPlan& kp = em.plan().kernels[0];
  const Node& rn = g.node(tail.op);
  // The row totals, then the staged chunks of the tile (tile_pointwise_staged).
  const int64_t tile_m = kp.tile_m(), tile_n = kp.tile_n(), stats = (row_sharers + 2) * tile_m;
  const int cluster = kp.wgmma.cluster_n;
  int chunk = wgmma_epilogue_chunk(kp.wgmma, kp.mma_kind == "f32x3",
                                   stats * 4 * (kp.wgmma.pingpong ? 2 : 1) + (cluster > 1 ? kRowExchangeReserve : 0));
  while (chunk > 8 && tile_n % chunk) chunk /= 2;
  smem_floats = std::max<int64_t>(smem_floats, stats + tile_m * (chunk + 8));
  Region all = kp.wide;  // the anchor's region and the reduction's consumers recomputed at each element
  all.nodes = kp.region.nodes;
  all.nodes.insert(all.nodes.end(), tail.post.nodes.begin(), tail.post.nodes.end());
  all.nodes.insert(all.nodes.end(), kp.wide.nodes.begin(), kp.wide.nodes.end());
  const std::string wide = em.emit_tree(build_epilogue_tree(ctx, em.plan(), all, {kp.root, tail.op}, -1, true),
                                        "fj_row_broadcast", "the tile's rows' " + g.describe(tail.op) +
                                                                " broadcast back over them, at output coordinates");
  const bool mean = rn.op == OpKind::Mean;
  std::vector<std::string> out = {
      cluster > 1 ? "fj::tile_row_broadcast_cluster<" + reduce_op_type(rn.op) + ", " + (mean ? "true" : "false") + ", " +
                        std::to_string(chunk) + ", Tile::BM, Frag::kThreads, Tile::kClusterN>(frag, m0, n0, " +
                        shape.rows + ", " + shape.cols + ", smem, round,"
                  : "fj::tile_row_broadcast<" + reduce_op_type(rn.op) + ", " + (mean ? "true" : "false") + ", " +
                        std::to_string(chunk) + ", Tile::BM, Frag::kThreads>(frag, m0, " + shape.rows + ", " +
                        shape.cols + ", smem,"};
  value.back() = "},";
  append(out, value);
  const int post_rank = static_cast<int>(rn.type.shape.size());
  append(out, epilogue_lambda("[&](float v, int m) {", shape.reduced_coords(geo, true),
                              post + "(p, v" + (post_rank ? ", " + coord_args(post_rank) : "") + ");"));
  out.back() = "},";
  append(out, epilogue_lambda("[&](float acc, float v, int m, int n) {", shape.coords,
                              wide + "(p, acc, v, " + coord_call + ");"));
  return out;
}

}  // namespace fusejit::cg::anchor
