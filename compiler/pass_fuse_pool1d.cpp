// Pass: max / avg pool1d along N of a linear / matmul fused into the anchor
// epilogue, when the pools are all that consumes the epilogue's value and no
// row reduction owns the tile. Two forms:
// - one pool with kernel == stride, no padding, floor windows: each tile holds
//   whole windows (GPU: the window divides 16, and every tile width and
//   staging chunk is a multiple of 16; CPU: its column blocks are cut to the
//   window);
// - otherwise (several pools, overlapping, padded or ceil-mode windows, a
//   window that does not divide the chunks), where the backend takes them:
//   column tiles that overlap by the widest window's span, each owning the
//   windows that start in its first tile_n - overlap columns
//   (templates/epilogue_pool1d.cuh).
// Either way the unpooled [.., N] tensor is never stored.
#include <algorithm>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Why a pool of the tiles-of-whole-windows form is not one ("" if it is).
std::string why_not_whole_windows(const PlanContext& ctx, ValueId pool, const Pool1dWindowCheck& window_blocker) {
  const Node& p = ctx.node(pool);
  const int64_t n = ctx.node(p.operands[0]).type.shape.back(), k = p.attr_int("kernel_size");
  if (p.attr_int("stride") != k || p.attr_int("padding") != 0) return "its windows overlap, leave gaps or are padded";
  if (p.type.shape.back() != n / k) return "ceil_mode adds a partial window";
  return window_blocker(k);
}

}  // namespace

void fuse_pool1d(PlanContext& ctx, Plan& plan, const Pool1dWindowCheck& window_blocker, const std::string& prefix,
                 bool overlapping_tiles) {
  KernelPlan& kp = plan.kernels[0];
  if (ctx.node(kp.root).op == OpKind::Conv2d || ctx.node(kp.root).op == OpKind::Conv2dWeightGrad || !kp.tails.empty())
    return;  // row reductions own the tile; a weight gradient's N spans three dims
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  std::set<ValueId> in(inside.begin(), inside.end()), outside;
  std::vector<ValueId> pools;
  for (ValueId v : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(v)])
      if (!in.count(u) && outside.insert(u).second &&
          (ctx.node(u).op == OpKind::MaxPool1d || ctx.node(u).op == OpKind::AvgPool1d))
        pools.push_back(u);
  if (pools.empty()) return;
  const ValueId pooled = ctx.node(pools[0]).operands[0];  // the epilogue's value the pools read
  const bool same_value = std::all_of(pools.begin(), pools.end(), [&](ValueId u) { return ctx.node(u).operands[0] == pooled; });
  int64_t overlap = 0;  // the widest window's span
  for (ValueId u : pools) overlap = std::max(overlap, ctx.node(u).attr_int("kernel_size") - 1);
  std::string why, whole_why;
  if (!ctx.heur.fuse_pool)
    why = "disabled by the codegen config (fuse_pool=0)";
  else if (outside.size() != pools.size() || !same_value || exits_of(ctx, inside).size() != 1 || ctx.is_output(pooled))
    why = "other consumers need the full anchor-shaped result";
  else if (pools.size() == 1 && (whole_why = why_not_whole_windows(ctx, pools[0], window_blocker)).empty())
    overlapping_tiles = false;  // tiles of whole windows
  else if (!overlapping_tiles)
    why = pools.size() == 1 ? whole_why : "several pools of one value need overlapping column tiles";
  else if (!ctx.heur.pool1d_overlap)
    why = (pools.size() == 1 ? whole_why + "; " : std::string()) +
          "overlapping column tiles are off (pool1d_overlap=0)";
  else if (overlap > kMaxPool1dOverlap)
    why = "a window of " + std::to_string(overlap + 1) + " columns is wider than overlapping tiles take (at most " +
          std::to_string(kMaxPool1dOverlap + 1) + ")";
  if (!why.empty()) {
    for (ValueId u : pools)
      kp.notes.push_back(prefix + std::string(op_name(ctx.node(u).op)) + " %" + std::to_string(u) +
                         " not fused: " + why + "; a pool kernel reads the anchor's output");
    return;
  }
  if (overlapping_tiles) kp.pool1d_overlap = static_cast<int>(overlap);
  for (ValueId pool : pools) {
    const Node& p = ctx.node(pool);
    FusedTail tail;
    tail.op = pool;
    tail.post.domain = p.type.shape;
    ctx.kernel_of[static_cast<size_t>(pool)] = 0;
    grow_region(ctx, tail.post, {pool}, pool, 0, /*allow_placed=*/false);
    kp.tails.push_back(std::move(tail));
    const std::string what = prefix + std::string(op_name(p.op)) + " %" + std::to_string(pool) + " fused into the epilogue: ";
    kp.notes.push_back(overlapping_tiles
                           ? what + "column tiles overlap by " + std::to_string(overlap) +
                                 " columns, each owning the windows that start in it; the unpooled " +
                                 ctx.node(pooled).type.str() + " is never stored"
                           : what + "tiles hold whole windows of " + std::to_string(p.attr_int("kernel_size")) +
                                 " columns, the unpooled " + ctx.node(pooled).type.str() + " is never stored");
  }
}

int64_t anchor_column_step(const Graph& g, const KernelPlan& kp, int tile_n) {
  if (kp.pool1d_overlap < 0) return tile_n;
  const int64_t step = tile_n - kp.pool1d_overlap;
  const bool n_contiguous_b = g.node(kp.root).op == OpKind::Matmul && kp.mainloop != Mainloop::Wgmma;
  return n_contiguous_b ? step / 8 * 8 : step;
}

int64_t anchor_column_tiles(const Graph& g, const KernelPlan& kp, int64_t n, int tile_n) {
  if (kp.pool1d_overlap < 0) return (n + tile_n - 1) / tile_n;
  const int64_t step = anchor_column_step(g, kp, tile_n);
  int64_t tiles = 1;
  for (const FusedTail& tail : kp.tails) {  // the tile holding each pool's last window start
    const Node& p = g.node(tail.op);
    const int64_t last_start = (p.type.shape.back() - 1) * p.attr_int("stride") - p.attr_int("padding");
    if (last_start >= 0 && step > 0) tiles = std::max(tiles, last_start / step + 1);
  }
  return tiles;
}

}  // namespace fusejit::cg
