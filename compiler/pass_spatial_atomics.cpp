// Pass: a sum over a conv's pixels fused into its epilogue (pass_fuse_spatial.cpp) added atomically into
// one f32 per (image, channel), not stored as per-tile partials. The partials of a 64 x 126 x 126 conv are
// megabytes against a few kilobytes of output, and the pixels streaming through L2 evict them to DRAM; the
// atomic sums stay in L2. The buffer is zeroed when allocated and the finish kernel, which reads each
// (image, channel) once, zeroes it again. The order of the additions varies from run to run (about one
// fp32 rounding a tile in the sum): atomic_partials=0 keeps the per-tile partials summed in a fixed order.
// max / min keep the partials (no float atomic of theirs propagates NaN like PyTorch), and so does a finish
// kernel that reads a sum more than once (fused row tails, row stages, a wide broadcast), and so does a
// linear's or matmul's sum over its rows (a partial per row tile and column: a tile's rows' worth of the
// [M, N] it does not store).
#include <algorithm>

#include "compiler/passes.h"

namespace fusejit::cg {

void sum_spatial_partials_atomically(PlanContext& ctx, Plan& plan) {
  if (plan.kernels.empty() || plan.partials.empty()) return;
  const KernelPlan& anchor = plan.kernels[0];
  for (const FusedTail& t : anchor.tails) {
    if (!t.spatial) continue;
    const OpKind op = ctx.node(t.op).op;
    const std::string label = std::string(op_name(op)) + " %" + std::to_string(t.op);
    std::string why;
    if (ctx.node(anchor.root).op != OpKind::Conv2d)
      continue;  // the partials stay small: no note
    if (!ctx.heur.atomic_partials)
      why = "the codegen config asks for a fixed order (atomic_partials=0)";
    else if (op != OpKind::Sum && op != OpKind::Mean && op != OpKind::GlobalAvgPool)
      why = "a max or min has no atomic that propagates NaN";
    const KernelPlan* finish = nullptr;
    for (const KernelPlan& kp : plan.kernels)
      if (kp.kind == KernelKind::RowFinish &&
          (kp.root == t.op || std::find(kp.finishes.begin(), kp.finishes.end(), t.op) != kp.finishes.end()))
        finish = &kp;
    if (why.empty() && !finish) why = "no finish kernel reads them";
    if (why.empty() && (finish->finishes.size() > 1 || !finish->tails.empty() || !finish->row_stages.empty() ||
                        !finish->wide.nodes.empty()))
      why = "the finish kernel reads each sum more than once";
    KernelPlan& first = plan.kernels[0];
    if (!why.empty()) {
      if (ctx.heur.atomic_partials)
        first.notes.push_back(label + ": per-tile partials summed in a fixed order (" + why + ")");
      continue;
    }
    plan.partials.at(t.op).atomic = true;
    first.notes.push_back(label + ": each tile adds its per-channel sums atomically into one f32 per image and "
                          "channel (zeroed; the finish kernel zeroes it again); atomic_partials=0 for a fixed order");
  }
}

}  // namespace fusejit::cg
