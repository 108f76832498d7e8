// Pass (part of the fallback planning): what follows a group / instance /
// layer norm is done by the norm kernel where each of its outputs reads one
// norm row only, so the full-size normalized tensor is never written nor
// read back:
// - a 2-D max / avg pool (`max_pool2d(silu(group_norm(c)))`) where each row
//   holds whole H x W planes: the last pass goes over the row's pooled
//   outputs, each window normalizing the elements it reads;
// - a sum / mean / max / min (or global_avg_pool) over trailing dims whose
//   runs lie within the rows (`global_avg_pool(relu(instance_norm(c)))`): the
//   row's group reduces each run in turn.
// The elementwise ops between the norm and its tail run at each element read;
// nothing else may read them or the norm's result (nor may they be outputs).
#include <algorithm>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

bool is_pool2d(OpKind op) { return op == OpKind::MaxPool2d || op == OpKind::AvgPool2d; }

bool is_row_reduction(OpKind op) {
  return op == OpKind::Sum || op == OpKind::Mean || op == OpKind::Max || op == OpKind::Min ||
         op == OpKind::GlobalAvgPool;
}

// Why the norm kernel `kp` cannot do `tail` (a pool or reduction of a value it computes), or "".
std::string norm_tail_blocker(const PlanContext& ctx, const KernelPlan& kp, ValueId tail) {
  const Node& r = ctx.node(kp.root);
  const Shape& xs = ctx.node(r.operands[0]).type.shape;
  const NormGeometry geo = norm_geometry(ctx.g, kp.root);
  if (is_pool2d(ctx.node(tail).op)) {
    if (xs.size() != 4) return "the norm's input is not [N, C, H, W]";
    if (geo.len % (xs[2] * xs[3]) != 0) return "a norm row does not hold whole H x W planes";
  } else {
    const ReduceGeometry red = reduce_geometry(ctx.g, tail);
    for (size_t j = 0; j < red.reduced.size(); ++j)
      if (red.reduced[j] != static_cast<int>(xs.size() - red.reduced.size() + j))
        return "it reduces dims that are not the trailing ones";
    if (geo.len % red.len != 0) return "its runs of " + std::to_string(red.len) + " elements cross norm rows";
  }
  std::set<ValueId> inside(kp.region.nodes.begin(), kp.region.nodes.end());
  inside.insert(kp.root);
  for (ValueId v : inside) {
    if (ctx.is_output(v)) return "%" + std::to_string(v) + " before it is a graph output";
    for (ValueId u : ctx.users[static_cast<size_t>(v)])
      if (u != tail && !inside.count(u)) return "%" + std::to_string(v) + " before it is read by %" + std::to_string(u);
  }
  return "";
}

}  // namespace

void fuse_tail_into_norm(PlanContext& ctx, KernelPlan& kp, int index) {
  if (kp.kind != KernelKind::Norm) return;
  std::set<ValueId> inside(kp.region.nodes.begin(), kp.region.nodes.end());
  inside.insert(kp.root);
  for (ValueId v = kp.root + 1; v < static_cast<ValueId>(ctx.g.nodes.size()); ++v) {
    const Node& n = ctx.node(v);
    if ((!is_pool2d(n.op) && !is_row_reduction(n.op)) || ctx.placed(v) || !inside.count(n.operands[0])) continue;
    const std::string label = std::string(op_name(n.op)) + " %" + std::to_string(v);
    if (!ctx.heur.norm_tail) {
      kp.notes.push_back(label + " not done by the norm kernel: norm_tail=0");
      return;
    }
    if (const std::string why = norm_tail_blocker(ctx, kp, v); !why.empty()) {
      kp.notes.push_back(label + " not done by the norm kernel: " + why);
      return;
    }
    add_tail(ctx, kp, v, index);
    kp.notes.push_back(label + " in this kernel: " +
                       (is_pool2d(n.op) ? "its last pass normalizes each window's elements where the window reads them"
                                        : "its last pass reduces each run of the row as it normalizes it") +
                       " (the normalized tensor is never stored)");
    return;
  }
}

}  // namespace fusejit::cg
