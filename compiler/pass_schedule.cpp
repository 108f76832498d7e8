// Pass: the anchor's tile. Heuristic: the narrowest tile width that covers N
// (up to 128), the shortest tile height that covers M (up to 128), then the
// per-thread block (tm x tn) that gives 256 threads with the most work each.
// A fused pool needs 128 rows; a fused row reduction needs bn >= N.
#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

int cover(int64_t extent, std::initializer_list<int> options) {
  for (int o : options)
    if (extent <= o) return o;
  return *(options.end() - 1);
}

TileConfig heuristic_tile(const AnchorGeometry& geo, bool pool_fused) {
  TileConfig best;
  best.bn = cover(geo.n, {8, 16, 32, 64, 128});
  best.bm = pool_fused ? 128 : cover(geo.m, {32, 64, 128});
  int best_score = -1;
  for (int tm : {8, 4, 2, 1}) {
    for (int tn : {8, 4, 2, 1}) {
      TileConfig t = best;
      t.tm = tm;
      t.tn = tn;
      if (!validate_tile(t) || t.threads() > 256) continue;
      const int score = (t.threads() == 256 ? 1000 : t.threads()) + tm * tn;
      if (score > best_score) {
        best_score = score;
        best = t;
      }
    }
  }
  return best;
}

}  // namespace

Status choose_anchor_tile(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  bool pool_fused = false;
  for (const FusedTail& t : kp.tails) pool_fused = pool_fused || op_category(ctx.node(t.op).op) == OpCategory::Pool;
  TileConfig tile = ctx.heur.tile ? *ctx.heur.tile : heuristic_tile(geo, pool_fused);
  tile.warp_along_m = geo.op == OpKind::Conv2d;
  if (Status s = validate_tile(tile); !s) return s;
  kp.tile = tile;
  return Status::success();
}

}  // namespace fusejit::cg
