// The finish kernel of a softmax fused into the anchor epilogue in parts
// (pass_fuse_softmax.cpp): a block a row (fj::softmax_finish_row) combines
// the row's per-tile partial log-sum-exps and scales the epilogue's
// exp(y - tile max) in place, then runs the softmax's consumers.
#include <limits>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {

Expected<EmittedKernel> emit_softmax_finish(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const PartialBuffers& pb = plan.partials.at(kp.root);
  const Shape& shape = r.type.shape;
  const int64_t len = shape.back();
  const int threads = ctx.heur.row.threads;
  if (len > std::numeric_limits<int>::max()) return Error("codegen: a softmax row longer than 2^31");
  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": finishes " + g.describe(kp.root) + " from " + std::to_string(pb.tiles) +
              " per-tile partials per row, scaling the epilogue's values in place";
  s.constants.push_back({"kRows", pb.rows, "rows"});
  s.constants.push_back({"kLen", len, "row length"});
  s.constants.push_back({"kTiles", pb.tiles, "partials per row: the anchor's column tiles"});
  s.constants.push_back({"kTileN", plan.kernels[0].tile_n(), "columns of an anchor tile"});
  s.constants.push_back({"kThreads", threads, "one block a row"});
  // Up to 32 elements a thread: loaded first, overlapping the partials' loads.
  const int64_t per_thread = (len + threads - 1) / threads;
  s.constants.push_back({"kHeld", per_thread <= 32 ? per_thread : 0, "elements a thread holds (0: none)"});
  const std::string stage = em.buffer_param(*pb.stage, true);  // read, then written in place: not const
  const std::string sums = em.buffer_param({BufferKind::Scratch, pb.sums}, false);
  const std::string maxima = em.buffer_param({BufferKind::Scratch, pb.maxima}, false);
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                        "the result and its fused consumers, at output coordinates");
  const std::string at = "(long long)t * kRows + row";
  std::vector<std::string> run = {
      "__shared__ float smem[kThreads / 32];",
      "for (long long row = blockIdx.x; row < kRows; row += gridDim.x) {",
      "fj::softmax_finish_row<" + std::string(r.op == OpKind::LogSoftmax ? "true" : "false") +
          ", kTiles, kTileN, kThreads, kHeld>(kLen,",
      "    [&](int t) { return " + sums + "[" + at + "]; },",
      "    [&](int t) { return " + maxima + "[" + at + "]; },",
      "    [&](int n) { return fj::load_as_float(" + stage + ", row * kLen + n); },",
      "    [&](int n, float v) {"};
  const std::string I = numel(shape) > kIntMax ? "long long" : "int";  // 32-bit coordinates where they fit
  run.push_back("const " + I + " e = (" + I + ")(row * kLen + n);");
  for (std::string& line : decompose_index("e", shape, "i", I)) run.push_back(std::move(line));
  run.push_back(post_call(post, "v", static_cast<int>(shape.size())));
  run.push_back("}, smem);");
  run.push_back("}");
  const unsigned grid = grid_for(pb.rows, 1, std::numeric_limits<int>::max());
  return finish_kernel(em, kp, run, {grid, 1, 1}, threads);
}

}  // namespace fusejit::cg
