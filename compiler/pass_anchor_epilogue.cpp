// Pass: the anchor kernel. Its epilogue region takes, in order, every
// elementwise node of the anchor's output shape whose operands are the anchor,
// earlier epilogue nodes or leaf expressions (broadcast loads): those run in
// registers between the mainloop and the store.
#include "compiler/passes.h"

namespace fusejit::cg {

Status plan_anchor_kernel(PlanContext& ctx, Plan& plan) {
  std::optional<ValueId> anchor = ctx.g.anchor();
  if (!anchor) return Error("codegen: the graph has no anchor op (linear, matmul or conv2d)");
  KernelPlan k;
  k.kind = KernelKind::Anchor;
  k.root = *anchor;
  k.region.domain = ctx.node(*anchor).type.shape;
  plan.kernels.push_back(std::move(k));
  ctx.kernel_of[static_cast<size_t>(*anchor)] = 0;
  grow_region(ctx, plan.kernels[0].region, {*anchor}, *anchor, 0, /*allow_placed=*/false);
  return Status::success();
}

}  // namespace fusejit::cg
