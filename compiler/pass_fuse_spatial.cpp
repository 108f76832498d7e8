// Pass: a reduction over a conv's output pixels (global_avg_pool; sum, mean,
// max, min over dims [2, 3]) finished from the conv epilogue. The conv's GEMM
// rows are tiled per image (templates/conv_simt.cuh ImagePixels), so each
// tile reduces its pixels of every channel it holds to one partial; a
// RowFinish kernel combines the [tiles per image, N * C] partials in a fixed
// order (deterministic) and runs the reduction's consumers. The conv-shaped
// tensor is never stored. Channel reductions fused whole may share the
// epilogue (they run first: the partials overwrite the accumulators).
// logsumexp and other consumers of the epilogue keep the stored output and a
// reduce kernel.
// A linear's or matmul's reduction over all but the last dim (every GEMM row,
// a matmul's batch entries included) is the same with one "image": each row
// tile stores a partial per column, the finish kernel combines them per column.
// There the epilogue may also store values elementwise ops read later (the
// finish kernel's broadcast of the result over the rows: `h - mean(h, 0)`).
#include <numeric>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Whether `reduced` is the only value of `inside` read outside it, the fused
// channel reductions (`tails`) aside.
bool only_exit(const PlanContext& ctx, const std::vector<ValueId>& inside, const std::set<ValueId>& tails,
               ValueId reduced) {
  const std::set<ValueId> in(inside.begin(), inside.end());
  for (ValueId v : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(v)])
      if (!in.count(u) && !tails.count(u) && v != reduced) return false;
  return true;
}

}  // namespace

std::vector<int64_t> gemm_row_dims(const PlanContext& ctx, ValueId anchor) {
  const Node& a = ctx.node(anchor);
  if (a.op == OpKind::Conv2d) return {2, 3};
  if ((a.op != OpKind::Linear && a.op != OpKind::Matmul) || a.type.shape.size() < 2) return {};
  std::vector<int64_t> dims(a.type.shape.size() - 1);
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

void fuse_spatial_reduction(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const std::vector<int64_t> dims = gemm_row_dims(ctx, kp.root);
  if (dims.empty()) return;
  const bool conv = ctx.node(kp.root).op == OpKind::Conv2d;
  // Channel reductions fused whole (a tile spans the channels) may share the
  // epilogue: each runs on the tile in turn. Pools and partial tails may not
  // (they tile the pixels their own way, or finish in a kernel of their own).
  std::set<ValueId> tails;
  for (const FusedTail& t : kp.tails) {
    if (t.partial || op_category(ctx.node(t.op).op) != OpCategory::Reduction) return;
    tails.insert(t.op);
  }
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  std::set<ValueId> in(inside.begin(), inside.end()), outside;
  ValueId red = -1;
  for (ValueId v : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      if (in.count(u) || tails.count(u) || !outside.insert(u).second) continue;
      const Node& n = ctx.node(u);
      const bool spatial = (conv && n.op == OpKind::GlobalAvgPool) ||
                           (op_category(n.op) == OpCategory::Reduction && n.op != OpKind::LogSumExp &&
                            n.attr_ints("dims") == dims);
      if (spatial && red < 0) red = u;
    }
  if (red < 0) return;
  const Node& r = ctx.node(red);
  const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(red);
  const ValueId reduced = r.operands[0];
  // A GEMM's epilogue may also store values that elementwise ops of later kernels read (`h - mean(h, 0)`:
  // the finish kernel's broadcast over the rows), or outputs; a second reduction of them keeps its reduce kernel
  // (both in one, reading the stored value once).
  bool others_elementwise = true;
  for (ValueId u : outside) others_elementwise = others_elementwise && (u == red || is_elementwise(ctx.node(u).op));
  const bool exits_only = outside.size() == 1 && only_exit(ctx, inside, tails, reduced) && !ctx.is_output(reduced);
  const std::string what = conv ? "conv-shaped" : "[M, N]";
  std::string why;
  if (!ctx.heur.fuse_reductions)
    why = "disabled by the codegen config (fuse_reductions=0)";
  else if (conv ? !exits_only : !others_elementwise)
    why = "other consumers need the full " + what + " result";
  if (!why.empty()) {
    kp.notes.push_back(label + " not fused into the epilogue: " + why + "; %" + std::to_string(reduced) +
                       " goes to memory and a reduce kernel reads it");
    return;
  }
  FusedTail tail;
  tail.op = red;
  tail.partial = true;
  tail.spatial = true;
  plan.partials[red] = PartialBuffers{};
  kp.tails.push_back(std::move(tail));
  kp.notes.push_back(label + " partly fused: each tile (" + (conv ? "pixels of one image" : "rows") +
                     ") stores a partial per " + (conv ? "channel" : "column") + " and a row-finish kernel combines them" +
                     (exits_only ? "; the " + ctx.node(reduced).type.str() + " is never stored" : ""));
}

}  // namespace fusejit::cg
