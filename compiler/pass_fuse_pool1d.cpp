// Pass: a max / avg pool1d along N of a linear / matmul fused into the anchor
// epilogue: kernel == stride, no padding, floor windows, the epilogue's only
// consumer, and no row reduction owning the tile. Each tile holds whole
// windows (GPU: the window divides 16, and every tile width and staging chunk
// is a multiple of 16; CPU: its column blocks are cut to the window), so the
// unpooled [.., N] tensor is never stored.
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {

void fuse_pool1d(PlanContext& ctx, Plan& plan, const Pool1dWindowCheck& window_blocker, const std::string& prefix) {
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
  const ValueId pool = pools[0];
  const Node& p = ctx.node(pool);
  const int64_t n = ctx.node(p.operands[0]).type.shape.back(), k = p.attr_int("kernel_size");
  std::string why;
  if (!ctx.heur.fuse_pool)
    why = "disabled by the codegen config (fuse_pool=0)";
  else if (outside.size() != 1 || exits_of(ctx, inside).size() != 1 || ctx.is_output(p.operands[0]))
    why = "other consumers need the full anchor-shaped result";
  else if (p.attr_int("stride") != k || p.attr_int("padding") != 0)
    why = "its windows overlap, leave gaps or are padded";
  else if (p.type.shape.back() != n / k)
    why = "ceil_mode adds a partial window";
  else
    why = window_blocker(k);
  if (!why.empty()) {
    for (ValueId u : pools)
      kp.notes.push_back(prefix + std::string(op_name(ctx.node(u).op)) + " %" + std::to_string(u) +
                         " not fused: " + why + "; a pool kernel reads the anchor's output");
    return;
  }
  FusedTail tail;
  tail.op = pool;
  tail.post.domain = p.type.shape;
  ctx.kernel_of[static_cast<size_t>(pool)] = 0;
  grow_region(ctx, tail.post, {pool}, pool, 0, /*allow_placed=*/false);
  kp.tails.push_back(std::move(tail));
  kp.notes.push_back(prefix + std::string(op_name(p.op)) + " %" + std::to_string(pool) +
                     " fused into the epilogue: tiles hold whole windows of " + std::to_string(k) +
                     " columns, the unpooled " + ctx.node(p.operands[0]).type.str() + " is never stored");
}

}  // namespace fusejit::cg
