// Pass: mark leaf expressions (inputs, constants, pointwise nodes of those
// only, views of inputs). They cost a few loads and flops per use, so every
// kernel that needs one recomputes it at its own coordinates instead of
// reading a buffer. Also decides how each reshape runs: a reshape that only
// adds or drops size-1 dims of a computed leaf expression is pointwise
// (recomputed at mapped coordinates); every other reshape is a view of its
// operand's buffer, which must then be in memory.
#include "compiler/passes.h"

namespace fusejit::cg {

void mark_leaf_exprs(PlanContext& ctx) {
  const Graph& g = ctx.g;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto v = static_cast<ValueId>(i);
    const Node& n = g.nodes[i];
    bool leaf = op_category(n.op) == OpCategory::Leaf;
    if (n.op == OpKind::Reshape) {
      const ValueId x = n.operands[0];
      const bool in_memory = g.node(x).op == OpKind::Input || (ctx.leaf_expr[static_cast<size_t>(x)] && ctx.is_view(x));
      if (!in_memory && ctx.leaf_expr[static_cast<size_t>(x)] && squeeze_reshape(g.node(x).type.shape, n.type.shape))
        ctx.mapped_reshape[i] = true;
      leaf = in_memory || ctx.mapped_reshape[i];
    } else if (ctx.pointwise(v)) {
      leaf = true;
      for (ValueId o : n.operands) leaf = leaf && ctx.leaf_expr[static_cast<size_t>(o)];
    }
    ctx.leaf_expr[i] = leaf;
  }
}

}  // namespace fusejit::cg
