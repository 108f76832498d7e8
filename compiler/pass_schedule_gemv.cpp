// Pass (with pass_schedule.cpp): the GEMV loop (templates/gemm_gemv.cuh) for
// an fp32 linear / matmul of at most 32 rows on the FFMA mainloop. Each k-tile
// is shared by 4 groups of 32 threads. 1 to 3 rows: 32 columns a block, k-tiles
// of 128, a ring of 4; more rows: 64 columns a block (2 a thread), k-tiles of
// 64, a ring of 2 (the H100 runs of session 59). K split for about two blocks
// an SM, each split at least 4 k-tiles. Config:
// split_k= the split, gemv_tile= the tile, gemv=0 the SIMT tile instead.
#include <cstdlib>

#include "compiler/passes.h"

namespace fusejit::cg {

std::string gemv_blocker(const PlanContext& ctx, const KernelPlan& kp, const AnchorGeometry& geo) {
  if (geo.op != OpKind::Linear && geo.op != OpKind::Matmul)
    return "the anchor is " + ctx.g.describe(kp.root) + ", not a linear or matmul";
  if (kp.mainloop != Mainloop::Simt)
    return "the anchor runs on " + std::string(mainloop_name(kp.mainloop)) + " (the GEMV loop is FFMA's: mainloop=ffma)";
  if (!(ctx.arch.rfind("sm_", 0) == 0 && std::atoi(ctx.arch.c_str() + 3) >= 80))
    return "the target is " + ctx.arch + " (cp.async needs sm_80 or later)";
  const Node& a = ctx.node(kp.root);
  if (ctx.node(a.operands[0]).type.dtype != DType::F32 || ctx.node(a.operands[1]).type.dtype != DType::F32)
    return "its operands are not fp32 (the GEMV loop copies fp32 rows)";
  if (geo.m > kMaxGemvRows) return "M=" + std::to_string(geo.m) + " is over " + std::to_string(kMaxGemvRows) + " rows";
  if (geo.k % 4) return "K=" + std::to_string(geo.k) + " is not a multiple of 4 (16-byte rows)";
  if (geo.op == OpKind::Matmul && geo.n % 4)
    return "N=" + std::to_string(geo.n) + " is not a multiple of 4 (B [K, N]'s 16-byte rows)";
  if (!kp.tails.empty() || !kp.wide.nodes.empty()) return "a reduction or pool is fused into its epilogue";
  if (ctx.heur.tile) return "the config sets the SIMT tile (tile=)";
  return "";
}

TileConfig gemv_tile(const PlanContext& ctx, const AnchorGeometry& geo) {
  TileConfig t;
  t.gemv = true;
  if (ctx.heur.gemv_tile) {  // bm: the rows rounded up to whole k groups
    t = *ctx.heur.gemv_tile;
    const int groups = t.bm;
    t.bm = static_cast<int>(ceil_div(geo.m, groups) * groups);
    t.tm = t.bm / groups;
  } else {  // 4 groups of 32 threads share each k-tile; bm: the rows rounded up to whole groups
    t.bm = static_cast<int>(ceil_div(geo.m, 4) * 4);
    t.tm = t.bm / 4;
    if (geo.m < 4) {  // a GEMV proper: narrow column tiles (more of them), long k-tiles, a ring of 4
      t.bn = 32;
      t.tn = 1;
      t.bk = 128;
      t.stages = 4;
    } else {  // 2 columns a thread; a ring of 2 lets more blocks share an SM
      t.bn = 64;
      t.tn = 2;
      t.bk = 64;
      t.stages = 2;
    }
  }
  const int64_t k_tiles = ceil_div(geo.k, t.bk);
  if (ctx.heur.split_k) {
    t.split_k = static_cast<int>(std::min<int64_t>(*ctx.heur.split_k, k_tiles));
    return t;
  }
  // About two blocks an SM (what the default rings' shared memory lets in; the H100 runs of session 58).
  const int64_t tiles = geo.batch * ceil_div(geo.n, t.bn);
  const int64_t want = std::min<int64_t>({ceil_div(2 * sm_count_guess(ctx.arch), tiles), k_tiles / 4, 64});
  if (want >= 2) t.split_k = static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, want)));  // no empty range
  return t;
}

}  // namespace fusejit::cg
