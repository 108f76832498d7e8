// Pass: softmax and log_softmax along a linear's or matmul's N (the last dim)
// fused into the epilogue, with their elementwise consumers. When one tile
// spans N, each tile row's maximum and sum of exponentials are combined in
// the epilogue and the normalized values stored. When N is wider, each
// column tile stores its rows' partial log-sum-exp (a [tiles, rows] scratch)
// and exp(y - the tile's row max) (log_softmax: y - the max) in the
// softmax's buffer; a RowFinish kernel combines the partials and scales each
// element in place by exp(tile max - the row's log-sum-exp) (log_softmax:
// adds it), then runs the consumers. Either way y never goes to memory in
// fp32, and the wide case reads the 16-bit values back once. The wide case
// is opt-in (softmax_parts=1): it measured slower than the row kernel so far.
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {

void fuse_row_softmax(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  for (const FusedTail& t : kp.tails)
    if (op_category(ctx.node(t.op).op) == OpCategory::Pool) return;  // the pool owns the epilogue
  if (!kp.wide.nodes.empty()) return;  // a row's broadcast back owns it (pass_fuse_row_broadcast.cpp)
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  const std::set<ValueId> in(inside.begin(), inside.end());
  const int64_t last = static_cast<int64_t>(geo.out.size()) - 1;
  const int64_t max_cols = max_epilogue_cols(ctx, kp);
  std::set<ValueId> seen;
  for (ValueId v : inside) {
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      const Node& r = ctx.node(u);
      if (in.count(u) || seen.count(u) || (r.op != OpKind::Softmax && r.op != OpKind::LogSoftmax)) continue;
      seen.insert(u);
      const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(u);
      auto refuse = [&](const std::string& why) {
        kp.notes.push_back(label + " not fused into the epilogue: " + why + "; %" + std::to_string(v) +
                           " goes to memory and a row kernel normalizes it");
      };
      if (geo.op == OpKind::Conv2d || geo.op == OpKind::Conv2dWeightGrad) {
        refuse(geo.op == OpKind::Conv2d ? "a conv's channels are not a contiguous row"
                                        : "a weight gradient's rows span three dims (Cin/groups, kh, kw)");
        continue;
      }
      if (r.attr_int("dim") != last) {
        refuse("it normalizes dim " + std::to_string(r.attr_int("dim")) + ", the epilogue only along N (dim " +
               std::to_string(last) + ")");
        continue;
      }
      if (!ctx.heur.fuse_reductions) {
        refuse("disabled by the codegen config (fuse_reductions=0)");
        continue;
      }
      if (geo.n > max_cols && !ctx.heur.softmax_parts) {
        // H100 bf16, in parts vs the fp32 row kernel (`fusejit run` medians):
        // 4096^3 0.279 vs 0.243 ms, 16384x2048x2048 0.419 vs 0.305 (ncu: the
        // GEMM with that epilogue 0.307 ms, the finish 0.107 at 1.0 TB/s).
        refuse("N=" + std::to_string(geo.n) + " is wider than one tile (the per-tile form, softmax_parts=1, measured "
               "slower)");
        continue;
      }
      FusedTail tail;
      tail.op = u;
      if (geo.n > max_cols) {
        tail.partial = true;
        plan.partials[u] = PartialBuffers{};
        kp.tails.push_back(std::move(tail));
        kp.notes.push_back(label + " partly fused: N=" + std::to_string(geo.n) +
                           " is wider than one tile, so each column tile stores its rows' partial log-sum-exp and "
                           "exp(y - the tile's row max), which a row-finish kernel scales in place");
        continue;
      }
      tail.post.domain = r.type.shape;
      ctx.kernel_of[static_cast<size_t>(u)] = 0;
      kp.tails.push_back(std::move(tail));
      kp.notes.push_back(label + " fused into the epilogue: one tile spans N=" + std::to_string(geo.n));
      grow_region(ctx, kp.tails.back().post, {u}, u, 0, /*allow_placed=*/false);
    }
  }
}

}  // namespace fusejit::cg
