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
// With row_cluster=1 (opt-in, wgmma), an N that 2 to 8 column tiles span is
// finished across a cluster of that many blocks instead (fuse_softmax_cluster,
// once the tile is chosen): the rows' log-sum-exps exchanged through
// distributed shared memory, y never stored.
#include <algorithm>
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
      // row_cluster=1: planned in parts here, then whole across a cluster of column tiles once the tile is known
      // (fuse_softmax_cluster), or back to the row kernel where no cluster spans N.
      // (N over 8 of cluster_row_tile's widest tiles: refused here, so that the anchor's tile is chosen without it)
      const int64_t widest = kp.mma_kind == "f32x3" ? 128 : 256;
      const bool wgmma_cluster = ctx.heur.row_cluster && kp.mainloop == Mainloop::Wgmma;
      const bool cluster = wgmma_cluster && geo.n <= 8 * widest;
      if (geo.n > max_cols && !ctx.heur.softmax_parts && !cluster) {
        // H100 bf16, in parts vs the fp32 row kernel (`fusejit run` medians):
        // 4096^3 0.279 vs 0.243 ms, 16384x2048x2048 0.419 vs 0.305 (ncu: the
        // GEMM with that epilogue 0.307 ms, the finish 0.107 at 1.0 TB/s).
        refuse("N=" + std::to_string(geo.n) + " is wider than one tile" +
               (wgmma_cluster ? " and than a cluster's 8 tiles of " + std::to_string(widest) + " (row_cluster=1)"
                              : " (the per-tile form, softmax_parts=1, measured slower)"));
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

void fuse_softmax_cluster(PlanContext& ctx, Plan& plan) {
  if (!ctx.heur.row_cluster || plan.kernels.empty()) return;
  KernelPlan& kp = plan.kernels[0];
  if (kp.kind != KernelKind::Anchor || kp.mainloop != Mainloop::Wgmma) return;
  for (size_t i = 0; i < kp.tails.size(); ++i) {
    FusedTail& tail = kp.tails[i];
    const Node& r = ctx.node(tail.op);
    if (!tail.partial || (r.op != OpKind::Softmax && r.op != OpKind::LogSoftmax)) continue;
    const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(tail.op);
    const auto drop_parts_note = [&] {
      kp.notes.erase(std::remove_if(kp.notes.begin(), kp.notes.end(),
                                    [&](const std::string& s) { return s.rfind(label + " partly fused", 0) == 0; }),
                     kp.notes.end());
    };
    std::string why_not;
    std::optional<WgmmaConfig> tile;
    const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
    const OpKind anchor = ctx.node(kp.root).op;
    if (kp.tails.size() != 1 || !kp.wide.nodes.empty())
      why_not = "the cluster exchanges one row statistic, and the epilogue has other row tails";
    else if ((anchor != OpKind::Linear && anchor != OpKind::Matmul) || geo.batch != 1)
      why_not = "only a linear or an unbatched matmul (a cluster's units hold no batch index)";
    else
      tile = cluster_row_tile(ctx, kp, why_not);
    if (!tile) {
      if (ctx.heur.softmax_parts) {  // the parts' plan stays
        kp.notes.push_back(label + " not finished across a cluster (row_cluster=1): " + why_not);
        continue;
      }
      // back to the row kernel: the anchor's output goes to memory
      drop_parts_note();
      plan.partials.erase(tail.op);
      kp.notes.push_back(label + " not fused into the epilogue: N=" + std::to_string(geo.n) +
                         " is wider than one tile and no cluster "
                         "spans it (row_cluster=1: " + why_not + "); %" + std::to_string(r.operands[0]) +
                         " goes to memory and a row kernel normalizes it");
      kp.tails.erase(kp.tails.begin() + static_cast<std::ptrdiff_t>(i));
      --i;
      continue;
    }
    tail.partial = false;
    tail.post.domain = r.type.shape;
    ctx.kernel_of[static_cast<size_t>(tail.op)] = 0;
    grow_region(ctx, tail.post, {tail.op}, tail.op, 0, /*allow_placed=*/false);
    plan.partials.erase(tail.op);
    kp.wgmma = *tile;
    drop_parts_note();
    kp.notes.push_back(label + " fused across clusters of " + std::to_string(tile->cluster_n) + " column tiles (" +
                       tile->str() + "): each block's row log-sum-exps exchanged through distributed shared memory, "
                       "then the normalized values stored; the anchor's output not stored for it");
  }
}

}  // namespace fusejit::cg
