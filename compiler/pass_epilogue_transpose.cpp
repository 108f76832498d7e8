// Pass: transposes of the epilogue's values (linear / matmul, CUDA). A
// transpose of the anchor's output or of a value its epilogue computes is
// stored by the epilogue at its swapped coordinates (Region::transposed),
// instead of the value going to scratch for a transposing kernel of its own.
// Only where these transposes are all the epilogue stores: its staged chunks
// then go out rows first, contiguous along the transposes' rows. Next to a
// stored tile (row-major), strided stores cost more than the transposing
// kernel (H200, linear 2048 x 4096 x 3072 bf16 + relu, y and y^T both outputs:
// 0.168 ms against 0.086 with the kernel reading y back). Not with a fused
// pool or row reduction (their epilogues store their own way). The CPU backend
// keeps the transposing kernel: its epilogue's strided stores measured slower
// (2-core AVX-512 host, linear 1024 x 1024 x 1536 + gelu, fp32, transposed:
// 26-28 ms against 19.3-19.7 ms with the kernel).
#include <algorithm>

#include "compiler/passes.h"

namespace fusejit::cg {

void store_epilogue_transposes(PlanContext& ctx, Plan& plan) {
  KernelPlan& k = plan.kernels[0];
  const OpKind op = ctx.node(k.root).op;
  if (!ctx.heur.epilogue_transpose || ctx.arch.rfind("sm_", 0) != 0 || !k.tails.empty() ||
      (op != OpKind::Linear && op != OpKind::Matmul))
    return;
  std::vector<ValueId> inside = k.region.nodes;
  inside.push_back(k.root);
  auto ours = [&](ValueId x) { return std::find(inside.begin(), inside.end(), x) != inside.end(); };
  auto taken = [&](ValueId u) {
    return ctx.node(u).op == OpKind::Transpose && !ctx.placed(u) && !ctx.leaf_expr[static_cast<size_t>(u)] &&
           ours(ctx.node(u).operands[0]);
  };
  std::vector<ValueId> transposes;
  for (ValueId v : inside) {
    if (ctx.is_output(v)) return;  // a stored tile beside them
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      if (ours(u)) continue;
      if (!taken(u)) return;  // read from memory by another kernel: stored as a tile
      if (std::find(transposes.begin(), transposes.end(), u) == transposes.end()) transposes.push_back(u);
    }
  }
  std::sort(transposes.begin(), transposes.end());
  for (ValueId v : transposes) {
    const ValueId x = ctx.node(v).operands[0];
    k.region.transposed.push_back(v);
    ctx.kernel_of[static_cast<size_t>(v)] = 0;
    k.notes.push_back("transpose %" + std::to_string(v) + " of %" + std::to_string(x) +
                      ": stored by the epilogue at its swapped coordinates (no copy of %" + std::to_string(x) +
                      " for a kernel of its own)");
  }
}

}  // namespace fusejit::cg
