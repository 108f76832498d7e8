// lower_batch_norms: batch_norm (inference) as elementwise ops, so that it
// fuses into the anchor's epilogue like any other elementwise chain:
//   y = (x - running_mean) * (weight * rsqrt(running_var + eps)) + bias
// The per-channel operands [C] must broadcast along dim 1 of x [N, C, ...];
// for x of rank R > 2 they are viewed as [C, 1, ..., 1] (R - 2 ones), which
// is the same memory. That view needs each of them to be a graph input that
// only batch_norms of rank-R inputs read (and no output). Runs before
// planning even with simplify=0: the planner never sees batch_norm.
#include <map>

#include "compiler/simplify_passes.h"
#include "ir/passes.h"

namespace fusejit::simplify {

Status lower_batch_norms(const Graph& g, Graph& out, bool& changed, std::vector<std::string>* notes) {
  changed = false;
  const auto users = g.users();
  std::map<ValueId, Shape> views;  // param input -> its [C, 1, ..., 1] view
  bool any = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpKind::BatchNorm) continue;
    any = true;
    const TensorType& x = g.node(n.operands[0]).type;
    for (size_t k = 1; k < n.operands.size(); ++k) {
      const ValueId p = n.operands[k];
      if (g.node(p).type.dtype != x.dtype)
        return node_error(g, static_cast<ValueId>(i),
                          "codegen: operand '" + op_info(n.op).operand_names[k] + "' is " +
                              std::string(dtype_name(g.node(p).type.dtype)) + " but x is " +
                              std::string(dtype_name(x.dtype)) + "; declare it " + std::string(dtype_name(x.dtype)) +
                              " (the lowered elementwise chain must keep x's dtype)");
      if (x.rank() <= 2) continue;  // [C] already broadcasts along the last dim of [N, C]
      bool viewable = g.node(p).op == OpKind::Input;
      for (const Output& o : g.outputs) viewable = viewable && o.value != p;
      for (ValueId u : users[static_cast<size_t>(p)]) {
        const Node& un = g.node(u);
        viewable = viewable && un.op == OpKind::BatchNorm && un.operands[0] != p &&
                   g.node(un.operands[0]).type.rank() == x.rank();
      }
      if (!viewable)
        return node_error(g, static_cast<ValueId>(i),
                          "codegen: operand '" + op_info(n.op).operand_names[k] +
                              "' must be a graph input read only by batch_norms of " + std::to_string(x.rank()) +
                              "-D inputs (it is viewed as [C, 1, ...] to broadcast along dim 1)");
      Shape view(static_cast<size_t>(x.rank() - 1), 1);
      view[0] = x.shape[1];
      views[p] = view;
    }
  }
  if (!any) return {};

  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (auto it = views.find(v); it != views.end()) {
      n.type.shape = it->second;
      return rw.emit(std::move(n));
    }
    if (n.op != OpKind::BatchNorm) return rw.keep(std::move(n));
    const SourceLoc loc = n.loc;
    const TensorType xt = rw.node(n.operands[0]).type;  // a copy: emitting grows the graph
    const TensorType pt = rw.node(n.operands[1]).type;
    const ValueId eps = rw.emit_constant(n.attr_float("eps"), loc);
    ValueId scale = rw.emit_op(OpKind::Rsqrt, {rw.emit_op(OpKind::Add, {n.operands[2], eps}, pt, loc)}, pt, loc);
    if (n.operands.size() > 3) scale = rw.emit_op(OpKind::Mul, {n.operands[3], scale}, pt, loc);
    const ValueId centered = rw.emit_op(OpKind::Sub, {n.operands[0], n.operands[1]}, xt, loc);
    ValueId y = rw.emit_op(OpKind::Mul, {centered, scale}, xt, loc, {}, n.operands.size() > 4 ? "" : n.name);
    if (n.operands.size() > 4) y = rw.emit_op(OpKind::Add, {y, n.operands[4]}, xt, loc, {}, n.name);
    rw.note(rw.describe(v) + " -> (x - running_mean) * (weight * rsqrt(running_var + eps)) + bias");
    return y;
  });
  remove_dead_values(out);
  if (Status s = prepare_graph(out); !s) return Error("codegen: lowering batch_norm made an invalid graph: " + s.error().message);
  changed = true;
  return {};
}

}  // namespace fusejit::simplify
