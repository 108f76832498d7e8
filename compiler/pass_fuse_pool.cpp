// Pass: pooling fused into the conv epilogue. The conv's GEMM rows are put in
// pool-window-major order (templates/conv_simt.cuh PoolTiledPixels; on wgmma,
// patches of output pixels that hold whole windows: conv_wgmma.cuh) so that a
// tile holds whole windows; the epilogue reduces each window from shared
// memory and stores only the pooled value. Pixels outside every window (floor
// mode) are never computed. Overlapping windows, padding, dilation and
// ceil_mode windows that do not tile the image stay unfused.
#include <algorithm>
#include <cmath>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Why `pool` (reading `v`, the only value leaving the epilogue) cannot be
// fused, or "" if it can.
std::string pool_blocker(const PlanContext& ctx, const AnchorGeometry& geo, ValueId pool, int max_rows) {
  const Node& p = ctx.node(pool);
  const auto& k = p.attr_ints("kernel_size");
  const auto& s = p.attr_ints("stride");
  const auto& pad = p.attr_ints("padding");
  if (s != k) return "its stride differs from its kernel (overlapping or gapped windows)";
  if (pad[0] || pad[1]) return "it pads the input";
  if (p.op == OpKind::MaxPool2d) {
    const auto& d = p.attr_ints("dilation");
    if (d[0] != 1 || d[1] != 1) return "it is dilated";
  }
  if (p.type.shape[2] != geo.oh / k[0] || p.type.shape[3] != geo.ow / k[1])
    return "ceil_mode adds partial windows";
  if (k[0] * k[1] > max_rows)
    return "a " + std::to_string(k[0]) + "x" + std::to_string(k[1]) + " window exceeds a tile of " +
           std::to_string(max_rows) + " rows";
  return "";
}

// Whether `o`, the other operand of a binary op in the chain, is the same
// over every window of the pool (a scalar, or a tensor of size 1 along H, W
// that does not depend on the anchor).
bool window_constant(const PlanContext& ctx, const KernelPlan& kp, ValueId o) {
  const Node& n = ctx.node(o);
  if (n.op == OpKind::Constant) return true;
  if (o == kp.root || std::find(kp.region.nodes.begin(), kp.region.nodes.end(), o) != kp.region.nodes.end())
    return false;
  const Shape& s = n.type.shape;
  for (size_t i = s.size() >= 2 ? s.size() - 2 : 0; i < s.size(); ++i)
    if (s[i] != 1) return false;
  return true;
}

// The operand of `v` that carries the anchor's value through a max pool's
// prefix chain, or -1 if max_pool(v) cannot be computed as v(max_pool(that)):
// `v` must be non-decreasing in it, map NaN to NaN (so a NaN in a window
// still wins), and its other operand must be constant over each window.
// Where an add or sub meets an infinite operand (inf - inf), the epilogue
// evaluates the chain on the window's min too, and a NaN there wins.
ValueId monotone_operand(const PlanContext& ctx, const KernelPlan& kp, ValueId v) {
  const Node& n = ctx.node(v);
  auto positive_constant = [&](ValueId o) {
    const Node& c = ctx.node(o);
    return c.op == OpKind::Constant && c.constant_value() > 0 && std::isfinite(c.constant_value());
  };
  switch (n.op) {
    case OpKind::Relu: case OpKind::Tanh: case OpKind::Sigmoid: case OpKind::Exp: case OpKind::Clamp:
    case OpKind::Hardtanh:
      return n.operands[0];
    case OpKind::LeakyRelu:
      return n.attr_float("negative_slope") >= 0 ? n.operands[0] : -1;
    case OpKind::Elu:
      return n.attr_float("alpha") >= 0 ? n.operands[0] : -1;
    case OpKind::Add:
      if (window_constant(ctx, kp, n.operands[1])) return n.operands[0];
      return window_constant(ctx, kp, n.operands[0]) ? n.operands[1] : -1;
    case OpKind::Sub:
      return window_constant(ctx, kp, n.operands[1]) ? n.operands[0] : -1;
    case OpKind::Mul:
      if (positive_constant(n.operands[1])) return n.operands[0];
      return positive_constant(n.operands[0]) ? n.operands[1] : -1;
    case OpKind::Div:
      return positive_constant(n.operands[1]) ? n.operands[0] : -1;
    default:
      return -1;
  }
}

// The ops before a fused max pool that can run after it, in order.
std::vector<ValueId> after_max_chain(const PlanContext& ctx, const KernelPlan& kp, ValueId pooled) {
  std::vector<ValueId> chain;
  for (ValueId v = pooled; v != kp.root;) {
    if (v != pooled && (ctx.users[static_cast<size_t>(v)].size() != 1 || ctx.is_output(v))) break;
    const ValueId next = monotone_operand(ctx, kp, v);
    const bool inside = next == kp.root ||
                        std::find(kp.region.nodes.begin(), kp.region.nodes.end(), next) != kp.region.nodes.end();
    if (next < 0 || !inside || ctx.node(next).type.shape != ctx.node(v).type.shape) break;
    chain.insert(chain.begin(), v);
    v = next;
  }
  return chain;
}

}  // namespace

void fuse_pool(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  if (ctx.node(kp.root).op != OpKind::Conv2d) return;
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  std::set<ValueId> in(inside.begin(), inside.end());

  std::set<ValueId> outside_users;
  for (ValueId v : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(v)])
      if (!in.count(u)) outside_users.insert(u);
  ValueId pool = -1;
  for (ValueId u : outside_users)
    if (ctx.node(u).op == OpKind::MaxPool2d || ctx.node(u).op == OpKind::AvgPool2d) pool = u;
  if (pool < 0) return;

  const std::string label = std::string(op_name(ctx.node(pool).op)) + " %" + std::to_string(pool);
  auto refuse = [&](const std::string& why) {
    kp.notes.push_back(label + " not fused into the conv epilogue: " + why +
                       "; the conv output goes to memory and a pool kernel reads it");
  };
  if (!ctx.heur.fuse_pool) return refuse("disabled by the codegen config (fuse_pool=0)");
  const std::vector<ValueId> exits = exits_of(ctx, inside);
  const ValueId pooled = ctx.node(pool).operands[0];
  if (exits.size() != 1 || outside_users.size() != 1 || ctx.is_output(pooled))
    return refuse("other consumers need the full conv-shaped result");
  const int max_rows = kp.mainloop == Mainloop::Mma ? (ctx.heur.mma ? ctx.heur.mma->bm : 128)
                       : ctx.heur.tile                ? ctx.heur.tile->bm
                                                      : 128;
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  if (std::string why = pool_blocker(ctx, geo, pool, max_rows); !why.empty()) return refuse(why);
  if (kp.mainloop == Mainloop::Wgmma || kp.conv_patch) {  // tiles are patches of output pixels (conv_patch)
    const auto& k = ctx.node(pool).attr_ints("kernel_size");
    const int bm = kp.conv_patch ? max_rows
                   : ctx.heur.wgmma ? ctx.heur.wgmma->bm
                   : ctx.heur.wgmma_schedule == "pingpong" ? 64
                                                           : 128;
    if (conv_patch(geo, bm, static_cast<int>(k[0]), static_cast<int>(k[1])).bh == 0)
      return refuse("no patch of " + std::to_string(bm) + " output pixels (power-of-two sides) holds whole " +
                    std::to_string(k[0]) + "x" + std::to_string(k[1]) + " windows");
  }

  FusedTail tail;
  tail.op = pool;
  if (ctx.node(pool).op == OpKind::MaxPool2d && ctx.heur.pool_first) {
    tail.after_max = after_max_chain(ctx, kp, pooled);
    const ValueId reduced = tail.after_max.empty() ? pooled : monotone_operand(ctx, kp, tail.after_max.front());
    if (reduced == kp.root && ctx.node(kp.root).operands.size() == 3)
      kp.notes.push_back(label + ": the windows reduce the raw accumulators; the conv's bias (one value a channel) "
                         "is added to each window's max");
    if (!tail.after_max.empty()) {
      std::string ops;
      for (ValueId v : tail.after_max) ops += (ops.empty() ? "" : ", ") + std::string(op_name(ctx.node(v).op)) + " %" + std::to_string(v);
      kp.notes.push_back(label + " first: " + ops +
                         " (non-decreasing, other operands constant over a window) run once per window on its max "
                         "(and min: a NaN from inf - inf there wins)");
    }
  }
  tail.post.domain = ctx.node(pool).type.shape;
  ctx.kernel_of[static_cast<size_t>(pool)] = 0;
  grow_region(ctx, tail.post, {pool}, pool, 0, /*allow_placed=*/false);
  kp.tails.push_back(std::move(tail));
  kp.notes.push_back(label + " fused into the conv epilogue: tiles hold whole windows, the unpooled " +
                     ctx.node(pooled).type.str() + " is never stored");
}

}  // namespace fusejit::cg
