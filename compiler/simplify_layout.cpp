// Layout ops that do nothing, or twice what one does (a backward program
// writes them freely):
//   expand / reshape to the operand's own shape, transpose of a dim with
//     itself -> the operand
//   transpose(transpose(y, d), d) -> y
//   reshape(reshape(y)) -> reshape(y); expand(expand(y)) -> expand(y)
// All exact (the same elements). Where the value is an output that cannot
// take its operand's place (an input, a constant or another output), it
// becomes x * 1 instead, as in simplify_size1.cpp.
#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

ValueId identity(Rewriter& rw, ValueId v, ValueId x, const std::string& why) {
  if (rw.can_replace(v, x)) {
    rw.note(rw.describe(v) + " " + why + " -> removed");
    return x;
  }
  const Node& old = rw.old().node(v);
  const ValueId one = rw.emit_constant(1.0, old.loc);
  rw.note(rw.describe(v) + " " + why + " -> x * 1 (an output that cannot share its operand's buffer)");
  return rw.emit_op(OpKind::Mul, {x, one}, old.type, old.loc, {}, old.name);
}

}  // namespace

bool fold_layout(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (op_category(n.op) != OpCategory::Layout) return rw.keep(std::move(n));
    const ValueId x = n.operands[0];
    const Node& in = rw.node(x);
    if (n.op == OpKind::Transpose) {
      const auto& dims = n.attr_ints("dims");
      if (dims[0] == dims[1]) return identity(rw, v, x, "swaps a dim with itself");
      if (in.op == OpKind::Transpose && in.attr_ints("dims") == dims)
        return identity(rw, v, in.operands[0], "undoes the transpose before it");
      return rw.keep(std::move(n));
    }
    if (n.type.shape == in.type.shape) return identity(rw, v, x, "keeps the shape");
    if (in.op == n.op) {  // reshape of a reshape, expand of an expand: one op from the first operand
      rw.note(rw.describe(v) + " of a " + std::string(op_name(in.op)) + " -> one " + std::string(op_name(n.op)));
      n.operands = {in.operands[0]};
      return rw.emit(std::move(n));
    }
    return rw.keep(std::move(n));
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
