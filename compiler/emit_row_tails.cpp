// Anchor epilogues of a row reduction along N (pass_fuse_reduction.cpp):
// - a softmax / log_softmax (pass_fuse_softmax.cpp): whole in the tile, whole
//   across a cluster of column tiles (fj::tile_row_softmax_cluster), or
//   exp(v - the tile's row max) and partials for a finish kernel;
// - per-tile partials where N is wider than the tile (fj::tile_row_partials),
//   which a row-finish kernel combines;
// - on wgmma, the row's value broadcast back over the tile (KernelPlan::wide,
//   pass_fuse_row_broadcast.cpp): the rows reduced, the reduction's row-shaped
//   consumers stored once a row, then the wide region on the accumulators with
//   the row's value (fj::tile_row_broadcast; over a cluster of column tiles,
//   fj::tile_row_broadcast_cluster).
#include <algorithm>

#include "compiler/emit_anchor_parts.h"
#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

std::vector<std::string> softmax_tail_epilogue(KernelEmitter& em, const FusedTail& tail, const AnchorShape& shape,
                                               std::vector<std::string> value, const std::string& row,
                                               int64_t row_sharers, int64_t& smem_floats) {
  const PlanContext& ctx = em.ctx();
  const Graph& g = ctx.g;
  // The row statistics, then the stores staged `chunk` columns at a time.
  const KernelPlan& kp = em.plan().kernels[0];
  const bool wgmma = kp.mainloop == Mainloop::Wgmma;
  const int64_t tile_m = kp.tile_m(), tile_n = kp.tile_n(), stats = (row_sharers + 2) * tile_m;
  // across a cluster of column tiles (pass_fuse_softmax.cpp, row_cluster=1): fj::tile_row_softmax_cluster
  const bool cluster = wgmma && kp.wgmma.cluster_n > 1;
  int chunk = wgmma ? wgmma_epilogue_chunk(kp.wgmma, kp.mma_kind == "f32x3",
                                           stats * 4 * (kp.wgmma.pingpong ? 2 : 1) + (cluster ? kRowExchangeReserve : 0))
                    : 64;
  while (chunk > 16 && (tile_n % chunk || (!wgmma && (stats + tile_m * (chunk + 8)) * 4 > 32 * 1024))) chunk /= 2;
  if (tile_n % chunk) chunk = 0;  // narrow SIMT tiles: stores from the fragment
  smem_floats = std::max<int64_t>(smem_floats, stats + tile_m * (chunk + 8));
  const Node& sn = g.node(tail.op);
  const std::string log = sn.op == OpKind::LogSoftmax ? "true" : "false";
  std::vector<std::string> out = {
      cluster ? "fj::tile_row_softmax_cluster<" + log + ", " + std::to_string(chunk) +
                    ", Tile::BM, Frag::kThreads, Tile::kClusterN>(frag, m0, n0, " + shape.rows + ", " + shape.cols +
                    ", smem, round,"
              : "fj::tile_row_softmax<" + log + ", " + (tail.partial ? "true" : "false") + ", " +
                    std::to_string(chunk) + ", Tile::BM, Frag::kThreads>(frag, m0, n0, " + shape.rows + ", " +
                    shape.cols + ", smem,"};
  value.back() = "},";
  append(out, value);
  if (!tail.partial) {
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, em.plan(), tail.post, tail.op, -1, true),
                                          "fj_post_softmax", "after " + g.describe(tail.op) + ", at output coordinates");
    const int rank = static_cast<int>(sn.type.shape.size());
    if (!cluster) out.push_back("[](float, float, int) {},");
    out.push_back("[&](float v, int m, int n) {");
    append(out, shape.coords);
    out.push_back(post + "(p, v, " + coord_args(rank) + ");");
    out.push_back("});");
    return out;
  }
  const PartialBuffers& pb = em.plan().partials.at(tail.op);
  const std::string rows = "kSoftmaxRows" + std::to_string(tail.op);
  em.src().constants.push_back({rows, pb.rows, "rows of " + g.describe(tail.op)});
  const std::string at = "(long long)n_tile * " + rows + " + " + row;
  append(out, {"[&](float part, float row_max, int m) {",
               em.buffer_param({BufferKind::Scratch, pb.sums}, true) + "[" + at + "] = part;",
               em.buffer_param({BufferKind::Scratch, pb.maxima}, true) + "[" + at + "] = row_max;", "},",
               "[&](float e, int m, int n) {  // exp(v - the tile's row max): the finish kernel scales it",
               "fj::store_from_float(" + em.buffer_param(*pb.stage, true) + ", (" + row + ") * " + shape.cols +
                   " + n, e);",
               "});"});
  return out;
}

std::vector<std::string> row_partials_epilogue(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail,
                                               const AnchorShape& shape, const std::string& suffix,
                                               std::vector<std::string> value, bool wgmma, bool halo_patches) {
  const Graph& g = em.ctx().g;
  const PartialBuffers& pb = em.plan().partials.at(tail.op);
  const std::string rows = "kPartialRows" + suffix;
  em.src().constants.push_back({rows, pb.rows, "rows of " + g.describe(tail.op)});
  const std::string tile_index = geo.op == OpKind::Conv2d && !wgmma ? "(g * gridDim.y + blockIdx.y)" : "n_tile";
  // conv on patches: GEMM rows are patch rows; the partials are indexed by pixel (n, oh, ow)
  const bool patch_rows = (wgmma || halo_patches) && geo.op == OpKind::Conv2d;
  const std::string row_index = shape.per_batch_rows ? "(long long)z * kM + m"
                                : patch_rows ? "((long long)px.n * ConvShape::kOH + px.oh) * ConvShape::kOW + px.ow"
                                             : "m";
  std::vector<std::string> out = {"fj::tile_row_partials<" + reduce_op_type(g.node(tail.op).op) +
                                  ", Tile::BM, Frag::kThreads>(frag, m0, n0, " + shape.rows + ", " + shape.cols +
                                  ", smem,"};
  value.back() = "},";
  append(out, value);
  std::vector<std::string> body;
  if (patch_rows) body = {"const fj::Pixel px = Pixels{}.pixel(m);", "if (!px.ok) return;  // patch padding"};
  append(body, {"const long long at = (long long)" + tile_index + " * " + rows + " + " + row_index + ";",
                em.buffer_param({BufferKind::Scratch, pb.sums}, true) + "[at] = part;"});
  if (pb.maxima >= 0) body.push_back(em.buffer_param({BufferKind::Scratch, pb.maxima}, true) + "[at] = row_max;");
  out.push_back("[&](float part, float row_max, int m) {");
  append(out, body);
  out.push_back("});");
  return out;
}

// The one row-shaped value (the reduction or one of its row consumers) that
// the broadcast-back region reads, or -1 where it reads several: then the row
// ops run at each element.
ValueId broadcast_row_value(const Graph& g, const FusedTail& tail, const Region& wide) {
  auto row_shaped = [&](ValueId v) {
    return v == tail.op || std::find(tail.post.nodes.begin(), tail.post.nodes.end(), v) != tail.post.nodes.end();
  };
  ValueId found = -1;
  for (ValueId w : wide.nodes)
    for (ValueId a : g.node(w).operands) {
      if (!row_shaped(a) || a == found) continue;
      if (found >= 0) return -1;
      found = a;
    }
  return found;
}

std::vector<std::string> row_broadcast_epilogue(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail,
                                                const AnchorShape& shape, std::vector<std::string> value,
                                                const std::string& coord_call, int64_t row_sharers,
                                                int64_t& smem_floats) {
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
  // Once a row: the row-shaped outputs stored, and the one row value the wide
  // region reads returned (its row ops done here, not at each element); where
  // it reads several, the reduction's value, and the row ops at each element.
  const ValueId row_value = broadcast_row_value(g, tail, kp.wide);
  const ValueId carried = row_value >= 0 ? row_value : tail.op;
  const bool row_stores = !tail.post.stores.empty();
  const std::string what = "after " + g.describe(tail.op) + ", once a row: " + g.describe(carried) + " returned";
  const std::string post_store =
      em.emit_tree(build_epilogue_tree(ctx, em.plan(), tail.post, tail.op, carried, true),
                   "fj_row_" + std::to_string(tail.op), what + (row_stores ? ", the row outputs stored" : ""));
  const bool first_block_stores = cluster > 1 && row_stores;  // a cluster stores the row outputs from block 0 only
  const std::string post_value =
      first_block_stores
          ? em.emit_tree(build_epilogue_tree(ctx, em.plan(), tail.post, tail.op, carried, false),
                         "fj_row_value_" + std::to_string(tail.op), what + " (no stores)")
          : post_store;
  Region all = kp.wide;  // the anchor's region, then the wide ops at each element
  all.nodes = kp.region.nodes;
  if (row_value < 0) all.nodes.insert(all.nodes.end(), tail.post.nodes.begin(), tail.post.nodes.end());
  all.nodes.insert(all.nodes.end(), kp.wide.nodes.begin(), kp.wide.nodes.end());
  const std::string wide = em.emit_tree(build_epilogue_tree(ctx, em.plan(), all, {kp.root, carried}, -1, true),
                                        "fj_row_broadcast", "the tile's rows' " + g.describe(carried) +
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
  const std::string args = "(p, v" + (post_rank ? ", " + coord_args(post_rank) : "") + ")";
  append(out, epilogue_lambda(std::string("[&](float v, int m, bool") + (first_block_stores ? " store" : "") +
                                  ") -> float {",
                              shape.reduced_coords(geo, true),
                              first_block_stores ? "return store ? " + post_store + args + " : " + post_value +
                                                             args + ";"
                                                       : "return " + post_store + args + ";"));
  out.back() = "},";
  append(out, epilogue_lambda("[&](float acc, float v, int m, int n) {", shape.coords,
                              wide + "(p, acc, v, " + coord_call + ");"));
  return out;
}

}  // namespace fusejit::cg::anchor
