// Emitter for the 3xTF32 operand split (templates/tf32_split.cuh): before a
// wgmma f32x3 anchor, one kernel writes the TF32 residual of each operand
// (x - x truncated to TF32, rounded to nearest) to its scratch buffer; the
// anchor's producer loads those tiles next to the operands' own.
#include <algorithm>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {

bool needs_tf32_split(const KernelPlan& kp) { return kp.residual_a >= 0 && kp.residual_b >= 0; }

Expected<EmittedKernel> emit_tf32_split_kernel(const PlanContext& ctx, const Plan& plan, int anchor) {
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(anchor)];
  if (!needs_tf32_split(kp)) return Error("codegen: kernel " + std::to_string(anchor) + " takes no operand split");
  const Node& a = ctx.g.node(kp.root);
  const AnchorGeometry geo = flatten_batch_rows(analyze_anchor(ctx.g, kp.root));
  KernelEmitter em(ctx, plan, anchor);
  KernelSource& s = em.src();
  s.ns = "split";
  s.comment = "fj_split_tf32_operands: the TF32 residuals of " + ctx.g.describe(a.operands[0]) + " and " +
              ctx.g.describe(a.operands[1]) + " for the 3xTF32 mainloop of " + kp.name;
  // Rows of 16-byte multiples (the wgmma path's condition): whole float4s.
  s.constants.push_back({"kAVectors", geo.m * geo.k / 4, "float4s of A (" + std::to_string(geo.m) + " x " +
                                                             std::to_string(geo.k) + ")"});
  s.constants.push_back({"kBVectors", geo.n * geo.k / 4, "float4s of B (" + std::to_string(geo.n) + " x " +
                                                             std::to_string(geo.k) + ")"});
  auto in = [&](ValueId v) { return "reinterpret_cast<const float4*>(" + em.load_param(v) + ")"; };
  auto residual = [&](int scratch) {
    return "reinterpret_cast<float4*>(" + em.buffer_param({BufferKind::Scratch, scratch}, true) + ")";
  };
  const std::string x = in(a.operands[0]), w = in(a.operands[1]);
  const std::string x_lo = residual(kp.residual_a), w_lo = residual(kp.residual_b);
  CudaFunction fn;
  fn.comment = "both operands' residuals, one grid-stride pass each";
  fn.prefix = "__device__ __forceinline__ void";
  fn.name = "run";
  fn.params = "const Params& p";
  fn.body = {"fj::tf32_residuals(" + x + ", " + x_lo + ", kAVectors);",
             "fj::tf32_residuals(" + w + ", " + w_lo + ", kBVectors);"};
  s.functions.push_back(fn);
  constexpr int kThreads = 256;
  const std::string name = "fj_split_tf32_operands";
  EmittedKernel out;
  out.launch.kernel = name;
  out.launch.block = {kThreads, 1, 1};
  // About 8 float4s per thread, at most 16 blocks per SM of the usual part.
  const int64_t vectors = (geo.m + geo.n) * geo.k / 4;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((vectors + 8 * kThreads - 1) / (8 * kThreads),
                                                                16 * sm_count_guess(ctx.arch)));
  out.launch.grid = {static_cast<unsigned>(blocks), 1, 1};
  out.launch.operand_staging = true;
  out.launch.args = em.finish(name, kThreads, {s.ns + "::run(p);"});
  for (const BufferRef& b : out.launch.args) out.launch.aligned.push_back({b, 16});  // float4 copies
  out.source = std::move(em.src());
  return out;
}

}  // namespace fusejit::cg
