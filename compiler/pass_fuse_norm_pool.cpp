// Pass (part of the fallback planning): a 2-D max / avg pool of a group /
// instance / layer norm's result (`max_pool2d(silu(group_norm(c)))`) is done
// by the norm kernel. Its last pass goes over the row's pooled outputs instead
// of its elements: each window's values are normalized (affine and the
// elementwise ops before the pool included) where the window reads them, so
// the full-size normalized tensor is never written nor read back. Only where
// each norm row holds whole H x W planes (every window inside one row) and
// nothing else reads the norm's result or the ops before the pool.
#include <algorithm>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Why the norm kernel `kp` cannot pool `pool`'s windows, or "".
std::string norm_pool_blocker(const PlanContext& ctx, const KernelPlan& kp, ValueId pool) {
  const Node& r = ctx.node(kp.root);
  const Shape& xs = ctx.node(r.operands[0]).type.shape;
  if (xs.size() != 4) return "the norm's input is not [N, C, H, W]";
  const NormGeometry geo = norm_geometry(ctx.g, kp.root);
  if (geo.len % (xs[2] * xs[3]) != 0) return "a norm row does not hold whole H x W planes";
  std::set<ValueId> inside(kp.region.nodes.begin(), kp.region.nodes.end());
  inside.insert(kp.root);
  for (ValueId v : inside) {
    if (ctx.is_output(v)) return "%" + std::to_string(v) + " before the pool is a graph output";
    for (ValueId u : ctx.users[static_cast<size_t>(v)])
      if (u != pool && !inside.count(u)) return "%" + std::to_string(v) + " before the pool is read by %" + std::to_string(u);
  }
  return "";
}

}  // namespace

void fuse_pool_into_norm(PlanContext& ctx, KernelPlan& kp, int index) {
  if (kp.kind != KernelKind::Norm) return;
  std::set<ValueId> inside(kp.region.nodes.begin(), kp.region.nodes.end());
  inside.insert(kp.root);
  for (ValueId v = kp.root + 1; v < static_cast<ValueId>(ctx.g.nodes.size()); ++v) {
    const Node& n = ctx.node(v);
    if ((n.op != OpKind::MaxPool2d && n.op != OpKind::AvgPool2d) || ctx.placed(v) || !inside.count(n.operands[0]))
      continue;
    const std::string label = std::string(op_name(n.op)) + " %" + std::to_string(v);
    if (!ctx.heur.norm_pool) {
      kp.notes.push_back(label + " not pooled by the norm kernel: norm_pool=0");
      return;
    }
    if (const std::string why = norm_pool_blocker(ctx, kp, v); !why.empty()) {
      kp.notes.push_back(label + " not pooled by the norm kernel: " + why);
      return;
    }
    FusedTail tail;
    tail.op = v;
    tail.post.domain = n.type.shape;
    ctx.kernel_of[static_cast<size_t>(v)] = index;
    grow_region(ctx, tail.post, {v}, v, index, /*allow_placed=*/true);
    kp.tails.push_back(std::move(tail));
    kp.notes.push_back(label + " in this kernel: its last pass normalizes each window's elements where the window "
                       "reads them (the normalized tensor is never stored)");
    return;
  }
}

}  // namespace fusejit::cg
