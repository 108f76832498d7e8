// Pass: mark leaf expressions (inputs, constants, and elementwise nodes of
// those only). They cost a few loads and flops per use, so every kernel that
// needs one recomputes it at its own coordinates instead of reading a buffer.
#include "compiler/passes.h"

namespace fusejit::cg {

void mark_leaf_exprs(PlanContext& ctx) {
  const Graph& g = ctx.g;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool leaf = op_category(n.op) == OpCategory::Leaf;
    if (is_elementwise(n.op)) {
      leaf = true;
      for (ValueId v : n.operands) leaf = leaf && ctx.leaf_expr[static_cast<size_t>(v)];
    }
    ctx.leaf_expr[i] = leaf;
  }
}

}  // namespace fusejit::cg
