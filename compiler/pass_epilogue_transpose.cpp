// Pass: transposes of the epilogue's values (linear / matmul, CUDA). A
// transpose of the anchor's output or of a value its epilogue computes is
// stored by the epilogue at its swapped coordinates (Region::transposed),
// instead of the value going to scratch for a transposing kernel of its own.
// Not with a fused pool or row reduction (their epilogues store their own way).
#include <algorithm>

#include "compiler/passes.h"

namespace fusejit::cg {

void store_epilogue_transposes(PlanContext& ctx, Plan& plan) {
  KernelPlan& k = plan.kernels[0];
  const OpKind op = ctx.node(k.root).op;
  if (!ctx.heur.epilogue_transpose || ctx.arch.rfind("sm_", 0) != 0 || !k.tails.empty() ||
      (op != OpKind::Linear && op != OpKind::Matmul))
    return;
  const auto count = static_cast<ValueId>(ctx.g.nodes.size());
  for (ValueId v = k.root + 1; v < count; ++v) {
    const Node& n = ctx.node(v);
    if (n.op != OpKind::Transpose || ctx.placed(v) || ctx.leaf_expr[static_cast<size_t>(v)]) continue;
    const ValueId x = n.operands[0];
    if (x != k.root && std::find(k.region.nodes.begin(), k.region.nodes.end(), x) == k.region.nodes.end()) continue;
    k.region.transposed.push_back(v);
    ctx.kernel_of[static_cast<size_t>(v)] = 0;
    k.notes.push_back("transpose %" + std::to_string(v) + " of %" + std::to_string(x) +
                      ": stored by the epilogue at its swapped coordinates (no copy of %" + std::to_string(x) +
                      " for a kernel of its own)");
  }
}

}  // namespace fusejit::cg
