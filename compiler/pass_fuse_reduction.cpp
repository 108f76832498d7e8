// Pass: reductions along the anchor's N fused into its epilogue. When one
// tile spans all N columns (N <= the tile width), each output row is reduced
// in the epilogue (per-thread partials, combined through shared memory in a
// fixed order) and only the reduced value is stored. When N is wider, each
// column tile stores its per-row partial (a [tiles, rows] scratch, far
// smaller than the [rows, N] input) and a RowFinish kernel combines them; so
// too where a second row stage follows (`mean((h - mean(h))^2)`), which the
// RowFinish kernel runs over the stored output.
// Reductions over other dims materialize their input and run as a row
// kernel (pass_fallback.cpp).
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {

namespace {

// A reduction along the rows (sum / mean / max / min, r's shape) of a value over the anchor's domain computed from
// r (`mean((h - mean(h))^2)`: a layer norm's variance), or -1: a second row stage, which the row-finish kernel
// runs after r's rows are finished (pass_fallback.cpp, grow_row_stages) but an epilogue does not.
ValueId second_row_stage(const PlanContext& ctx, ValueId r, const Shape& domain) {
  const Shape& rows = ctx.node(r).type.shape;
  std::set<ValueId> seen = {r};
  std::vector<ValueId> stack = {r};
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      const Node& n = ctx.node(u);
      if (!seen.insert(u).second) continue;
      if ((n.op == OpKind::Sum || n.op == OpKind::Mean || n.op == OpKind::Max || n.op == OpKind::Min) &&
          n.type.shape == rows && ctx.node(n.operands[0]).type.shape == domain &&
          n.attr_ints("dims") == std::vector<int64_t>{static_cast<int64_t>(domain.size()) - 1})
        return u;
      if (is_elementwise(n.op) && (n.type.shape == domain || n.type.shape == rows)) stack.push_back(u);
    }
  }
  return -1;
}

}  // namespace

int64_t max_epilogue_cols(const PlanContext& ctx, const KernelPlan& kp) {
  // 3xTF32 on wgmma keeps a second accumulator: tiles at most 128 wide (validate_wgmma).
  return kp.mainloop == Mainloop::Wgmma ? (ctx.heur.wgmma ? ctx.heur.wgmma->bn : kp.mma_kind == "f32x3" ? 128 : 256)
         : kp.mainloop == Mainloop::Mma ? (ctx.heur.mma ? ctx.heur.mma->bn : 128)
         : ctx.heur.tile                ? ctx.heur.tile->bn
                                        : 128;
}

void fuse_row_reductions(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  if (!kp.tails.empty()) return;  // a fused pool already owns the epilogue
  // conv2d_weight_grad's N (ci, kh, kw) spans three dims: elementwise epilogues only
  if (ctx.node(kp.root).op == OpKind::Conv2dWeightGrad) return;
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  std::set<ValueId> in(inside.begin(), inside.end());
  const int rank = static_cast<int>(geo.out.size());
  const int64_t col_dim = geo.op == OpKind::Conv2d ? 1 : rank - 1;
  const int64_t max_cols = max_epilogue_cols(ctx, kp);

  // A second row stage after a reduction along N (a layer norm written out): every reduction of the epilogue stays
  // partial, even where one tile spans N, so that one row-finish kernel runs both stages (two kernels, not a
  // pointwise and a reduce kernel for each stage).
  std::string staged;
  if (geo.op != OpKind::Conv2d && ctx.heur.row_stages && ctx.heur.fuse_reductions)
    for (ValueId v : inside)
      for (ValueId u : ctx.users[static_cast<size_t>(v)])
        if (staged.empty() && !in.count(u) && op_category(ctx.node(u).op) == OpCategory::Reduction &&
            ctx.node(u).attr_ints("dims") == std::vector<int64_t>{col_dim})
          if (const ValueId r2 = second_row_stage(ctx, u, geo.out); r2 >= 0)
            staged = std::string(op_name(ctx.node(r2).op)) + " %" + std::to_string(r2) + " reduces rows computed from " +
                     std::string(op_name(ctx.node(u).op)) + " %" + std::to_string(u);

  std::set<ValueId> seen;
  for (ValueId v : inside) {
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      const Node& r = ctx.node(u);
      if (in.count(u) || seen.count(u) || op_category(r.op) != OpCategory::Reduction) continue;
      seen.insert(u);
      const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(u);
      auto refuse = [&](const std::string& why) {
        kp.notes.push_back(label + " not fused into the epilogue: " + why + "; %" + std::to_string(v) +
                           " goes to memory and a row kernel reduces it");
      };
      if (r.op != OpKind::LogSumExp && r.attr_ints("dims") == gemm_row_dims(ctx, kp.root)) continue;  // pass_fuse_spatial
      if (r.attr_ints("dims") != std::vector<int64_t>{col_dim}) {
        refuse("it reduces dims " + attr_str(r.attrs.at("dims")) + ", the epilogue only reduces along N (dim " +
               std::to_string(col_dim) + ")");
        continue;
      }
      if (!ctx.heur.fuse_reductions) {
        refuse("disabled by the codegen config (fuse_reductions=0)");
        continue;
      }
      if (geo.groups > 1 || geo.n > max_cols || !staged.empty()) {
        FusedTail tail;
        tail.op = u;
        tail.partial = true;
        plan.partials[u] = PartialBuffers{};
        kp.tails.push_back(std::move(tail));
        kp.notes.push_back(label + " partly fused: " +
                           (geo.groups > 1     ? "N=" + std::to_string(geo.n * geo.groups) + " is split over conv groups"
                            : geo.n > max_cols ? "N=" + std::to_string(geo.n) + " is wider than one tile"
                                               : "a second row stage follows (" + staged + ")") +
                           ", so each column tile stores per-row partials and a row-finish kernel combines them");
        continue;
      }
      FusedTail tail;
      tail.op = u;
      tail.post.domain = r.type.shape;
      ctx.kernel_of[static_cast<size_t>(u)] = 0;
      kp.tails.push_back(std::move(tail));
      kp.notes.push_back(label + " fused into the epilogue: one tile spans N=" + std::to_string(geo.n));
    }
  }
  for (FusedTail& t : kp.tails)
    if (!t.partial) grow_region(ctx, t.post, {t.op}, t.op, 0, /*allow_placed=*/false);
}

}  // namespace fusejit::cg
