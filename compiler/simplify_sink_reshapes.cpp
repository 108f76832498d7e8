// Elementwise ops of reshaped values become the reshape of the op on the
// values themselves (toward the outputs):
//   f(reshape(a), reshape(b), c) -> reshape(f(a, b, c))
// where every operand is a reshape of a value of one shape or a scalar
// constant, and those values come from a reduction, pool, softmax, norm,
// gather or the anchor (a kernel computes them; a reshape of an input, or of
// elementwise ops of inputs only, stays where it is: its readers recompute
// those from the input's memory, which a reshape after the ops would take
// away). The planner reads a reshape that moves elements (a view) from
// memory, so an op after one ran as a kernel of its own; on the reshape's
// operand it joins the kernel that computes it (a row-finish kernel's
// `flatten(global_avg_pool(y)) * s`, a logsumexp's square after the view of
// it simplify_logsumexp.cpp makes), and a view that is an output is written
// by that kernel (pass_buffers.cpp). Exact: the same elements, the same op.
#include <set>

#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

bool scalar_constant(const Node& n) { return n.op == OpKind::Constant && n.type.shape.empty(); }

// Whether new value w depends on an op other than elementwise and layout ops (of inputs and constants).
bool computed_by_a_kernel(const Rewriter& rw, ValueId w) {
  std::vector<ValueId> stack = {w};
  std::set<ValueId> seen;
  while (!stack.empty()) {
    const ValueId u = stack.back();
    stack.pop_back();
    const Node& n = rw.node(u);
    if (!seen.insert(u).second || n.op == OpKind::Input || n.op == OpKind::Constant) continue;
    if (!is_elementwise(n.op) && op_category(n.op) != OpCategory::Layout) return true;
    stack.insert(stack.end(), n.operands.begin(), n.operands.end());
  }
  return false;
}

}  // namespace

bool sink_reshapes(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (!is_elementwise(n.op)) return rw.keep(std::move(n));
    const Shape* shape = nullptr;  // the reshaped values' common shape
    bool ok = true;
    for (ValueId o : n.operands) {
      const Node& on = rw.node(o);
      if (scalar_constant(on)) continue;
      if (on.op != OpKind::Reshape || on.type.shape != n.type.shape) {  // (a reshape broadcast by the op: kept)
        ok = false;
        break;
      }
      const Shape& s = rw.node(on.operands[0]).type.shape;
      ok = ok && (!shape || *shape == s) && computed_by_a_kernel(rw, on.operands[0]);
      shape = &s;
    }
    if (!ok || !shape) return rw.keep(std::move(n));
    Node inner = n;
    for (ValueId& o : inner.operands)
      if (rw.node(o).op == OpKind::Reshape) o = rw.node(o).operands[0];
    inner.type.shape = *shape;
    inner.name.clear();
    const TensorType type = n.type;
    const SourceLoc loc = n.loc;
    const std::string name = n.name;
    const ValueId w = rw.emit(std::move(inner));
    rw.note(rw.describe(v) + " of reshaped values -> the reshape of " + std::string(op_name(n.op)) +
            " on the values (" + shape_str(rw.node(w).type.shape) + ")");
    return rw.emit_op(OpKind::Reshape, {w}, type, loc, {{"shape", type.shape}}, name);
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
