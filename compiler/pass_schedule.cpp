// Pass: the anchor's tile. Heuristic: the narrowest tile width that covers N
// (up to 128), the shortest tile height that covers M (up to 128), then the
// per-thread block (tm x tn) that gives 256 threads with the most work each.
// A fused pool needs 128 rows; a fused row reduction needs bn >= N.
// wgmma tiles: the (BM, BN) with the least estimated time per SM (waves of
// tiles over 132 SMs, times the tile's area over its relative efficiency),
// then as many pipeline stages as shared memory holds (at most 8). The
// ping-pong schedule (64-row tiles, two consumers alternating mainloop and
// epilogue) only when the config asks (wgmma_schedule=pingpong; a tuning
// candidate): on the H100 it was slower than 128x256 cooperative (bf16
// 16384x2048x2048: 0.256 vs 0.225 ms; 4096^3: 0.198 vs 0.202): 64-row tiles
// load B twice as often, and the SMs' TMA reads then exceed what L2 serves.
// mma.sync tiles: BM 128 (64 when M is small), the narrowest BN that covers N
// (up to 128; 256 for 16-bit operands when N >= 256), 3 stages; split-K
// (64x64 tiles) when a GEMM's tiles would leave most SMs idle.
#include <algorithm>

#include "compiler/passes.h"

namespace fusejit::cg {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int cover(int64_t extent, std::initializer_list<int> options) {
  for (int o : options)
    if (extent <= o) return o;
  return *(options.end() - 1);
}

int64_t max_split_k(int64_t k_tiles) { return k_tiles >= 4096 ? 1024 : 16; }

namespace {

TileConfig heuristic_tile(const AnchorGeometry& geo, bool pool_fused) {
  TileConfig best;
  best.bn = cover(geo.n, {8, 16, 32, 64, 128});
  best.bm = pool_fused ? 128 : cover(geo.m, {32, 64, 128});
  if (pool_fused) best.bn = std::max(best.bn, 16);  // a 1-D pool's windows: 16 columns divide into them
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

constexpr int kSm90Sms = 132;  // H100 SXM / H200: codegen knows the arch, not the part

// The tile with the least cost: waves of tiles over the SMs x the tile's
// area / its efficiency. 176 and 192 columns (K-major B, linear / matmul
// only) cut a wave where 128 and 256 leave one mostly idle: 512x4096x11008
// takes 252 tiles of 128x176 (2 waves) instead of 344 of 128x128 (2.6).
// H100, against the previous 128x128 ping-pong default (`fusejit run`, one
// call, bench/results/wgmma_tile176_sweep_H100_20261125.log): bf16 bias+relu
// 0.0817 -> 0.0758 ms, gelu 0.0876 -> 0.0814, row logsumexp 0.0880 -> 0.0813,
// f16 0.0831 -> 0.0766, tf32 0.1469 -> 0.1337; 128x192 0.0775 (bf16 relu).
// 168 columns (cuBLAS's own tile there, seen in ncu): 264 tiles, 2 whole
// waves; H200, 128x168 vs 128x176 (`fusejit run`, relu, one call,
// bench/results/ab_wgmma_168_H200_20261129.log): bf16 0.0702 vs 0.0720 ms,
// f16 0.0727 vs 0.0738, tf32 0.1256 vs 0.1295. Rated a little below 176 so that
// it takes only shapes like that one (1024x4096x9472 keeps 128x128 ping-pong).
WgmmaConfig heuristic_wgmma(const AnchorGeometry& geo, bool three_tf32, int64_t min_bn, bool odd_widths) {
  struct Shape {
    int bm, bn;
    double efficiency;  // tensor-core efficiency relative to 128x256 (operand reuse per wgmma)
  };
  const Shape shapes[] = {{128, 256, 1.0}, {128, 192, 0.92}, {128, 176, 0.9}, {128, 168, 0.88}, {128, 128, 0.85}, {64, 256, 0.8},
                          {64, 128, 0.7}, {128, 64, 0.65}, {64, 64, 0.5}};
  WgmmaConfig best;
  double best_cost = -1;
  for (const Shape& sh : shapes) {
    if ((sh.bn == 168 || sh.bn == 176 || sh.bn == 192) && !odd_widths) continue;  // measured with K-major B only
    WgmmaConfig t;
    t.bm = sh.bm;
    t.bn = sh.bn;
    t.stages = 2;
    if (sh.bn < min_bn || !validate_wgmma(t, three_tf32)) continue;
    const int64_t tiles = ((geo.m + sh.bm - 1) / sh.bm) * ((geo.n + sh.bn - 1) / sh.bn);
    const double cost = static_cast<double>((tiles + kSm90Sms - 1) / kSm90Sms) * sh.bm * sh.bn / sh.efficiency;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = t;
    }
  }
  best.stages = wgmma_max_stages(best, three_tf32);
  return best;
}

// Split-K on wgmma (templates/wgmma_schedule.cuh) for a GEMM whose tiles
// leave most SMs idle and whose K has 32 k-tiles or more: enough K ranges for
// about one unit per SM, at least 4 k-tiles each, at most 16. Or as the
// config says (split_k, split_from). H100, bias + relu, split vs not
// (bench_gemm_*_20261124-234822_splitk2.md): 256x4096x512 tf32 0.0164 vs
// 0.0250 ms, bf16 0.0126 vs 0.0154; 32x8192x1024 tf32 0.0257 vs 0.0456, bf16
// 0.0170 vs 0.0258; 100x1000x500 bf16 (16 k-tiles) 0.0106 vs 0.0097 (so not
// there), tf32 (32) 0.0112 vs 0.0111. Splitting only the last wave of
// 512x4096x11008 (split_from=264) was slower: bf16 0.093 (2 ranges) and 0.104
// (4) vs 0.082 ms.
// At most 16 K ranges, or, for a very deep K (4096 k-tiles and more, e.g.
// dW of a conv: K = N*Ho*Wo pixels), as many as fill the GPU: each range
// still holds 256 k-tiles or more.
WgmmaConfig with_wgmma_split_k(const PlanContext& ctx, const AnchorGeometry& geo, const std::string& kind,
                               WgmmaConfig tile) {
  const int64_t tiles = ceil_div(geo.m, tile.bm) * ceil_div(geo.n, tile.bn);
  const int64_t k_tiles = ceil_div(geo.k, kind == "bf16" || kind == "f16" ? 64 : 32);
  int64_t want = 1;
  if (ctx.heur.split_k) {
    want = *ctx.heur.split_k;
    tile.split_from = std::min(ctx.heur.split_from.value_or(0), tiles);
  } else if (!ctx.heur.wgmma && tiles * 2 <= kSm90Sms && k_tiles >= 32) {
    want = std::min<int64_t>({kSm90Sms / tiles, k_tiles / 4, max_split_k(k_tiles)});
    tile.split_from = 0;
  }
  want = std::min(want, k_tiles);
  tile.split_k = want > 1 ? static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, want))) : 1;  // no empty range
  constexpr int64_t kMaxWorkspace = int64_t{256} << 20;
  while (tile.split_k > 1 && (tiles - tile.split_from) * tile.split_k * tile.bm * tile.bn * 4 > kMaxWorkspace)
    tile.split_k = static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, tile.split_k / 2)));
  if (tile.split_k == 1 || tile.split_from >= tiles) {
    tile.split_k = 1;
    tile.split_from = 0;
  }
  return tile;
}

// Why a tf32 / 3xTF32 matmul cannot take B [K, N] as wgmma's register
// operand (swap-AB, templates/wgmma_swap_ab.cuh), or "".
std::string swap_ab_blocker(const PlanContext& ctx, const KernelPlan& kp, const AnchorGeometry& geo) {
  if (geo.op != OpKind::Matmul || (kp.mma_kind != "tf32" && kp.mma_kind != "f32x3"))
    return "swap-AB takes a tf32 or fp32 (3xTF32) matmul with B [K, N]";
  if ((geo.n * 4) % 16)
    return "TMA needs rows of a multiple of 16 bytes and B's N=" + std::to_string(geo.n) + " gives " +
           std::to_string(geo.n * 4);
  if (!kp.tails.empty()) return "a reduction or pool is fused into the epilogue (a swap-AB thread holds output columns)";
  if (ctx.heur.wgmma_schedule == "pingpong") return "wgmma_schedule=pingpong (swap-AB is cooperative)";
  if (ctx.heur.wgmma_cluster.value_or(1) > 1) return "wgmma_cluster=2 (swap-AB runs without clusters)";
  return "";
}

// 3xTF32 swap-AB loads B's hi and lo k-tiles into registers and waits for each
// k-tile's wgmmas (as 3xTF32 does): it wins where B's transposed copy is large
// next to the GEMM, i.e. few rows. H200, matmul + bias + relu, swap-AB vs the
// copy (bench_gemm_*_20261128-100702_matmul_fp32_swap_ab.md): 256x16384x16384
// 1.596 vs 2.023 ms, 1024x8192x8192 1.174 vs 1.239, but 4096^3 1.119 vs 1.099
// and 16384x2048x2048 1.161 vs 1.135.
constexpr int64_t kMaxRowsFor3xTf32SwapAb = 2048;

// Swap-AB (tf32 matmul, B [K, N] as wgmma's register operand A): no transposed
// copy of B. The tile by the same cost model with M and N exchanged (bm
// output rows are the wgmma's N). H200, dX of seed 2 (1024x8192x8192): see
// docs/codegen.md "Swap-AB".
Status choose_swap_ab_tile(PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo) {
  const bool three_tf32 = kp.mma_kind == "f32x3";
  WgmmaConfig tile;
  if (ctx.heur.wgmma) {
    tile = *ctx.heur.wgmma;
  } else {
    AnchorGeometry transposed = geo;
    std::swap(transposed.m, transposed.n);
    const WgmmaConfig t = heuristic_wgmma(transposed, three_tf32, 0, true);
    tile.bm = t.bn;
    tile.bn = t.bm;
  }
  tile.swap_ab = true;
  if (!ctx.heur.wgmma) tile.stages = wgmma_max_stages(tile, three_tf32);
  tile = with_wgmma_split_k(ctx, geo, kp.mma_kind, tile);
  if (Status s = validate_wgmma(tile, three_tf32); !s) return Error("codegen: " + s.error().message);
  kp.wgmma = tile;
  kp.notes.push_back("operand B [K, N] as wgmma's register operand: C^T = B^T A^T, no transposed copy (swap-AB)");
  return Status::success();
}

// A tf32 dW on the swap-AB tile (templates/wgrad_swap_ab.cuh; pass_mainloop.cpp says when): Cout as wgmma's N (the least
// waste among 256, 192, 128 and 64 rows), (kh, kw, ci) 64 columns a consumer, x's rows of 36 pixels (144 bytes)
// in the ring, split-K over the pixels. Where one kernel row's taps fit a block (wgrad_swap_shares_x: 192 columns,
// Cout at most 128), its three consumers read one box of x: a third of the x traffic, and grad's read by 3 column
// tiles instead of 5 or 9. H200, seed 1's tf32 dW (`fusejit run`, bench/results/ab_conv_paths_{d,e}_H200_20261129.log):
// 192 columns 1.63 ms, 128x128 (a box per consumer) 3.53, 128x64 split 14 3.14, mma.sync 2.50; ncu: the 128x64 kernel
// L2 95% busy, DRAM 76% (the blocks' shared operands re-read from DRAM); the 192-column kernel 1.06 ms (the grad
// copy aside), L2 81%, DRAM 54%, SM 71%. (Without split-K, 3 blocks: rel L2 6e-3 over K = 2M pixels, over tf32's
// 2e-3: the tensor core's fp32 accumulation over so long a chain; the default splits.)
Status choose_wgrad_swap_tile(PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo) {
  WgmmaConfig tile;
  const bool shared_x = wgrad_swap_shares_x(geo);
  if (ctx.heur.wgmma) {
    tile = *ctx.heur.wgmma;
    if (tile.bn % 64)  // (wgmma_tile's swap-AB check allows 64, 128 or 192 only)
      return Error("codegen config: the swap-AB dW takes tiles of 64, 128 or 192 columns (a consumer's 64 columns are "
                   "one tap), got wgmma_tile " + tile.str());
    if (tile.bn == 192 && !shared_x)
      return Error("codegen config: a swap-AB dW tile of 192 columns takes one kernel row's taps (Cin 64, KW 3, Cout "
                   "at most 128, their shifts within 12 pixels), got Cin " + std::to_string(geo.cin) + ", KW " +
                   std::to_string(geo.kw) + ", Cout " + std::to_string(geo.m));
  } else if (shared_x) {
    tile.bm = geo.m <= 64 ? 64 : 128;
    tile.bn = 192;
  } else {
    int64_t best = 0;
    for (int bm : {256, 192, 128, 64})
      if (const int64_t rows = ceil_div(geo.m, bm) * bm; best == 0 || rows < best) best = rows, tile.bm = bm;
    tile.bn = geo.n > 64 ? 128 : 64;
  }
  if (ctx.heur.wgmma_cluster.value_or(1) > 1) return Error("codegen config: the wgmma dW runs without clusters");
  if (ctx.heur.wgmma_schedule == "pingpong") return Error("codegen config: the swap-AB dW takes cooperative tiles");
  tile.swap_ab = true;
  tile.b_rows = tile.bn == 192 ? 64 : 0;
  tile.b_row_bytes = tile.b_rows ? wgrad_swap_shared_box_bytes(geo) : 144;  // a box per consumer: shifts 0..3
  // grad's planes flattened (WgradFlatSwapOperands: two boxes of x's 44-pixel rows), by default where grad's rows
  // are not whole 16 bytes (the padded copy it saves: seed 1's dW 1.60 -> 1.39 ms, ab_conv_paths_h_H200_20261129.log)
  const bool flat_fits = tile.bn == 192 && (geo.oh * geo.ow) % 4 == 0 && geo.dw <= 4;
  if (ctx.heur.wgrad_flat == true || (!ctx.heur.wgrad_flat && !ctx.heur.wgmma && flat_fits && geo.ow % 4)) {
    if (!flat_fits)
      return Error("codegen config: wgrad_flat=1 takes a 192-column swap-AB dW (one kernel row's taps) whose grad "
                   "planes are whole 16 bytes (OH * OW a multiple of 4) and dilation at most 4, got " + tile.str() +
                   ", OH * OW = " + std::to_string(geo.oh * geo.ow) + ", dilation " + std::to_string(geo.dw));
    tile.b_rows = 128;
    tile.b_row_bytes = 176;
    kp.grad_flat = true;
  }
  if (!ctx.heur.wgmma) tile.stages = wgmma_max_stages(tile, false);
  tile = with_wgmma_split_k(ctx, geo, kp.mma_kind, tile);
  if (Status s = validate_wgmma(tile, false); !s) return Error("codegen: " + s.error().message);
  kp.wgmma = tile;
  return Status::success();
}

// A conv with at most this many k-tiles (Cin 64 k3: 9 in 16-bit, 18 in tf32)
// gives up mainloop stages for 64-column epilogue chunks (choose_wgmma_tile).
constexpr int64_t kMaxKTilesForWideConvEpilogue = 18;
constexpr int kWideConvEpilogueStages = 4;

// Column tiles up to which a halo conv keeps its filter resident (each block
// keeps one column tile; the grid's blocks split evenly among them).
constexpr int64_t kMaxHaloColumnTiles = 16;

// conv2d on wgmma with the column tile's filter resident in shared memory and
// one TMA box of input halo per patch (templates/conv_wgmma_halo.cuh) instead
// of a patch-sized box and a filter tile per k-tile: where the filter fits
// (at the tile's width or 64 columns, not below min_bn) with a halo buffer or
// two and the epilogue's staging (room for 64-column chunks, whatever the
// tail). Taken with conv_halo=1 only, where ineligibility is an error.
Status choose_conv_halo(PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo, int64_t min_bn,
                        WgmmaConfig& tile) {
  // Opt-in: it measured no faster (H200, `fusejit run`: seed 1 bf16 1.079 ms vs
  // 1.013 with 4-stage tap boxes, tf32 1.871 vs 1.710; 32x64x224^2 -> 128 bf16
  // 0.828 vs 0.730): the L2 traffic it saves was not the limit, the epilogue is.
  if (ctx.heur.conv_halo != true) return Status::success();
  const int elem = kp.mma_kind == "bf16" || kp.mma_kind == "f16" ? 2 : 4;
  const bool nchw = ctx.heur.conv_nchw > 0 && geo.w % (16 / elem) == 0;  // halos from NCHW x (pass_buffers.cpp)
  int qh = 1, qw = 1;  // a fused pool's windows
  for (const FusedTail& t : kp.tails)
    if (op_category(ctx.node(t.op).op) == OpCategory::Pool && !t.spatial) {
      const auto& k = ctx.node(t.op).attr_ints("kernel_size");
      qh = static_cast<int>(k[0]);
      qw = static_cast<int>(k[1]);
    }
  const ConvPatch patch = conv_patch(geo, tile.bm, qh, qw, 0, true);
  std::string why;
  if (kp.mma_kind == "f32x3") why = "3xTF32 (the residuals would double the filter)";
  else if (patch.bh == 0) why = "no patch 8 or 64 pixels wide holds whole pool windows";
  int bn = 0, buffers = 0, b_stages = 0;
  // conv_halo=2: the filter streamed through a ring (4 stages or fewer), a halo per patch and channel block.
  const std::vector<int> ring_stages = ctx.heur.conv_halo_stream ? std::vector<int>{4, 3, 2} : std::vector<int>{0};
  if (why.empty()) {
    // 64-column staging, per-thread partials (ping-pong: each consumer's)
    const int64_t epilogue = (int64_t{tile.bm} * (64 + 8) * 4 + 2048) * (tile.pingpong ? 2 : 1);
    std::vector<int> widths = {tile.bn};
    if (!ctx.heur.wgmma && tile.bn > 64 && min_bn <= 64) widths.push_back(64);
    for (int w : widths)
      for (int b : {2, 1})
        for (int r : ring_stages)
          if (bn == 0 && conv_halo_ring_bytes(geo, patch, w, elem, b, nchw, r) + 1024 + epilogue <= kWgmmaDynamicSmemLimit)
            bn = w, buffers = b, b_stages = r;
    if (bn == 0)
      why = "the filter (" + std::to_string(conv_halo_ring_bytes(geo, patch, widths.back(), elem, 0, nchw, ring_stages.back())) +
            " bytes for " + std::to_string(widths.back()) + " columns) and a halo do not fit in shared memory";
    else if (ceil_div(geo.n, bn) > kMaxHaloColumnTiles)
      why = std::to_string(ceil_div(geo.n, bn)) + " column tiles (at most " + std::to_string(kMaxHaloColumnTiles) + ")";
  }
  if (!why.empty()) return Error("codegen config: conv_halo=1, but " + why);
  tile.bn = bn;
  tile.stages = buffers;
  tile.conv_halo = true;
  tile.conv_halo_b_stages = b_stages;
  tile.conv_halo_bytes = conv_halo_ring_bytes(geo, patch, bn, elem, buffers, nchw, b_stages);
  kp.notes.push_back(std::string("operands: ") +
                     (b_stages ? "the column tile's filter streamed by TMA, each channel block's taps in turn, "
                               : "the column tile's filter resident in shared memory (loaded once a block), ") +
                     "one TMA box of input halo per patch of " + std::to_string(patch.bh) + "x" + std::to_string(patch.bw) +
                     " pixels" + (b_stages ? " and channel block" : "") + "; each kernel tap's A is a window of it");
  return Status::success();
}

// A dW (conv2d_weight_grad) on wgmma: 128 rows of Cout (64 where Cout is no more), the 64-column multiple up to
// 256 that wastes the fewest of N = KH*KW*Cin (seed 1's 576: 192), cooperative, the deepest ring; split-K over
// the pixels fills the SMs (with_wgmma_split_k). H200, 128x64x128^2 p1 bf16 (x from NHWC): 1.265 ms on mma.sync
// -> 0.698 (128x192); 128x256x56^2: 1.525 -> 1.064 (bench/results/ab_conv_paths_a_H200_20261129.log).
WgmmaConfig wgrad_wgmma_tile(const AnchorGeometry& geo) {
  WgmmaConfig t;
  t.bm = geo.m <= 64 ? 64 : 128;
  int64_t best = 0;
  for (int bn : {256, 192, 128, 64})
    if (const int64_t cols = ceil_div(geo.n, bn) * bn; best == 0 || cols < best) best = cols, t.bn = bn;
  t.stages = wgmma_max_stages(t, false);
  return t;
}

Status choose_wgmma_tile(PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo) {
  const bool three_tf32 = kp.mma_kind == "f32x3";
  int64_t min_bn = 0;  // a tile spans N for row reductions fused whole
  for (const FusedTail& t : kp.tails)
    if (!t.partial && op_category(ctx.node(t.op).op) != OpCategory::Pool) min_bn = geo.n;
  // matmul's 16-bit B [K, N] (and a dW's x in NHWC) loads in 64-column boxes (tiles 64, 128 or 256 wide; a
  // cluster's blocks one each)
  const bool wgrad = geo.op == OpKind::Conv2dWeightGrad;
  if (wgrad && kp.mma_kind == "tf32") return choose_wgrad_swap_tile(ctx, kp, geo);
  const bool b_n_major = (geo.op == OpKind::Matmul || wgrad) && kp.mma_kind != "tf32" && kp.mma_kind != "f32x3";
  if (ctx.heur.wgmma && b_n_major && ctx.heur.wgmma->bn % 64)
    return Error("codegen config: " + std::string(wgrad ? "a dW reads x in NHWC" : "a 16-bit matmul reads B [K, N]") +
                 " in 64-column boxes: wgmma_tile " + ctx.heur.wgmma->str() + " must be a multiple of 64 wide");
  if (wgrad && ctx.heur.wgmma_cluster.value_or(1) > 1) return Error("codegen config: the wgmma dW runs without clusters");
  WgmmaConfig tile = ctx.heur.wgmma ? *ctx.heur.wgmma
                     : wgrad        ? wgrad_wgmma_tile(geo)
                                    : heuristic_wgmma(geo, three_tf32, min_bn,
                                                      !b_n_major && geo.op != OpKind::Conv2d &&
                                                          ctx.heur.wgmma_cluster.value_or(1) == 1);
  const bool sixteen_bit = kp.mma_kind == "bf16" || kp.mma_kind == "f16";
  const bool cheap_epilogue = kp.tails.empty() && std::all_of(kp.region.nodes.begin(), kp.region.nodes.end(),
                                                               [&](ValueId v) { return cheap_epilogue_op(ctx.node(v).op); });
  if (geo.op == OpKind::Matmul && (kp.mma_kind == "tf32" || three_tf32)) {  // B [K, N] of fp32: swap-AB or a copy
    const std::string why_not = swap_ab_blocker(ctx, kp, geo);
    if (ctx.heur.wgmma_swap_ab == true && !why_not.empty()) return Error("codegen config: wgmma_swap_ab=1, but " + why_not);
    // auto: unless the config sets the (plain) tile; 3xTF32 where B's copy costs more than the register loads
    const bool auto_swap = !ctx.heur.wgmma_swap_ab && !ctx.heur.wgmma && (!three_tf32 || geo.m <= kMaxRowsFor3xTf32SwapAb);
    if (why_not.empty() && (ctx.heur.wgmma_swap_ab == true || auto_swap)) return choose_swap_ab_tile(ctx, kp, geo);
    const std::string why_copy = !why_not.empty()                  ? why_not
                                 : ctx.heur.wgmma_swap_ab == false ? "wgmma_swap_ab=0 in the config"
                                 : ctx.heur.wgmma                  ? "the config sets wgmma_tile (add wgmma_swap_ab=1)"
                                                                   : "3xTF32 with more than " +
                                                       std::to_string(kMaxRowsFor3xTf32SwapAb) +
                                                       " rows (the copy measured faster)";
    kp.notes.push_back("operand B [K, N] transposed to [N, K] in scratch first: tf32 wgmma reads K-major B only (not "
                       "swap-AB: " + why_copy + ")");
  } else if (ctx.heur.wgmma_swap_ab == true) {
    return Error("codegen config: wgmma_swap_ab=1, but swap-AB takes a tf32 or fp32 (3xTF32) matmul with B [K, N], "
                 "or a tf32 conv2d_weight_grad");
  }
  if (ctx.heur.wgmma_schedule == "pingpong") {
    if (!ctx.heur.wgmma) {
      tile.bm = 64;
      tile.raster_group *= 2;  // the same rows per group as 128-row tiles
    }
    tile.pingpong = true;
    if (!ctx.heur.wgmma) tile.stages = wgmma_max_stages(tile, three_tf32);
  } else if (ctx.heur.wgmma_schedule == "auto" && !ctx.heur.wgmma && !three_tf32 && geo.op != OpKind::Conv2d &&
             tile.bm == 128 && tile.bn == 128 &&
             ((geo.m + 127) / 128) * ((geo.n + 127) / 128) >= 2 * kSm90Sms) {
    // 128x128 tiles (picked where 128x256 leaves a wave mostly idle): with
    // enough of them for two per SM, each consumer takes whole tiles and
    // their epilogues overlap the other's mainloop (H100, 512x4096x11008:
    // bf16 0.0911 -> 0.0855 ms, tf32 0.161 -> 0.152 ms). One stage less than
    // fits leaves each consumer 32-column epilogue chunks (6 stages, 16
    // columns: 4096^3 bf16 0.226 ms, 5 stages 0.199).
    tile.pingpong = true;
    tile.stages = std::max(2, wgmma_max_stages(tile, false) - 1);
  } else if (ctx.heur.wgmma_schedule == "auto" && !ctx.heur.wgmma && sixteen_bit && !cheap_epilogue &&
             geo.op != OpKind::Conv2d && tile.bm == 128 && tile.bn == 256 && geo.k <= 4096 &&
             ceil_div(geo.m, 64) * ceil_div(geo.n, 256) >= 2 * kSm90Sms) {
    // A costly epilogue (gelu, partial row reductions, softmax) over a short
    // K: 64x256 ping-pong tiles, whose epilogues overlap the other consumer's
    // mainloop. H100 bf16, cooperative 128x256 -> ping-pong 64x256 (5 stages):
    // 16384x2048x2048 gelu 0.239 -> 0.226 ms, row logsumexp 0.225 -> 0.191;
    // 4096^3 gelu 0.206 -> 0.205, row logsumexp 0.199 -> 0.191; but 8192^3
    // gelu 1.462 -> 1.507 (the epilogue's share shrinks as K grows). tf32
    // lost on 7 of 8 (4096^3 gelu 0.364 -> 0.382, row logsumexp 0.359 ->
    // 0.365; won only 16384x2048x2048 row logsumexp 0.382 -> 0.364): 16-bit only.
    tile.bm = 64;
    tile.raster_group *= 2;
    tile.pingpong = true;
    tile.stages = wgmma_max_stages(tile, false);
  }
  for (const FusedTail& t : kp.tails) {  // conv on wgmma: a fused pool's windows must tile the patches
    const Node& pn = ctx.node(t.op);
    if (geo.op != OpKind::Conv2d || op_category(pn.op) != OpCategory::Pool || t.spatial) continue;
    const auto& k = pn.attr_ints("kernel_size");
    const int qh = static_cast<int>(k[0]), qw = static_cast<int>(k[1]);
    if (conv_patch(geo, tile.bm, qh, qw).bh == 0 && !ctx.heur.wgmma && !tile.pingpong) {
      tile.bm = 128;
      tile.stages = wgmma_max_stages(tile, three_tf32);
    }
    if (conv_patch(geo, tile.bm, qh, qw).bh == 0)
      return Error("codegen: no patch of " + std::to_string(tile.bm) + " output pixels holds whole " +
                   std::to_string(qh) + "x" + std::to_string(qw) + " windows of " + ctx.g.describe(t.op));
  }
  if (geo.op == OpKind::Conv2d && ctx.heur.split_k && *ctx.heur.split_k > 1)
    return Error("codegen config: split_k applies to linear and matmul");
  const int64_t k_tiles = ceil_div(geo.k, kp.mma_kind == "bf16" || kp.mma_kind == "f16" ? 64 : 32);
  if (geo.op == OpKind::Conv2d && !ctx.heur.wgmma && !tile.pingpong && !three_tf32 &&
      k_tiles <= kMaxKTilesForWideConvEpilogue) {
    // The NCHW epilogue stages rows first through shared memory: at most 4
    // stages, leaving it 64-column chunks (a conv tile's K is short: 9 k-tiles
    // for Cin 64 k3). H200, `fusejit run` medians in one call, 128x128 tiles,
    // 4 / 5 (64-column chunks) / 6 stages (16): seed 1 bf16 1.013 / 1.069 /
    // 1.129 ms, tf32 1.699 / 1.785 / 1.796; 32x64x224^2 -> 128 bf16 0.730 /
    // 0.785 / 0.827, tf32 1.172 / 1.292 / 1.320.
    const int64_t room = kWgmmaDynamicSmemLimit - int64_t{tile.bm} * (64 + 8) * 4;
    tile.stages = std::min(tile.stages, kWideConvEpilogueStages);
    while (tile.stages > 2 && wgmma_smem_bytes(tile, false) > room) --tile.stages;
  }
  if (geo.op != OpKind::Conv2d) tile = with_wgmma_split_k(ctx, geo, kp.mma_kind, tile);
  if (!ctx.heur.wgmma_cluster && !ctx.heur.wgmma && sixteen_bit && cheap_epilogue && geo.op != OpKind::Conv2d &&
      !tile.pingpong && tile.split_k == 1 && !(b_n_major && tile.bn < 128) && tile.bn % 64 == 0 &&
      ceil_div(geo.m, tile.bm) * ceil_div(geo.n, tile.bn) >= kSm90Sms) {
    // 16-bit GEMMs of a wave of tiles or more with cheap epilogues: 2-block
    // clusters sharing B, 16 row tiles a raster group (H100, bias+relu, vs
    // cooperative 128x256: 4096^3 0.185 -> 0.180 ms, 8192^3 1.422 -> 1.392,
    // 16384x2048x2048 0.200 -> 0.186; tf32 gained nothing: 0.345 -> 0.347,
    // 2.911 -> 2.918, 0.365 -> 0.361; gelu, row logsumexp and softmax chains
    // lost 1-3%: bench_gemm_*_20261125-080506_cluster_default.md).
    tile.cluster_m = 2;
    tile.raster_group = 16;
  }
  if (ctx.heur.wgmma_cluster && *ctx.heur.wgmma_cluster > 1) {
    if (geo.op == OpKind::Conv2d && (ctx.heur.conv_halo == true || ctx.heur.conv_nchw > 0))
      return Error("codegen config: wgmma_cluster=2 on conv2d takes the per-tap TMA path (not conv_halo, conv_nchw)");
    if (b_n_major && tile.bn < 128)
      return Error("codegen config: wgmma_cluster=2 with B [K, N] needs a tile at least 128 wide, got " + tile.str());
    if (tile.pingpong && ctx.heur.wgmma_schedule == "auto") {  // the default's ping-pong: cooperative instead
      tile.pingpong = false;
      const bool pooled = std::any_of(kp.tails.begin(), kp.tails.end(), [&](const FusedTail& t) {
        return op_category(ctx.node(t.op).op) == OpCategory::Pool && !t.spatial;
      });
      if (geo.op == OpKind::Conv2d && !ctx.heur.wgmma && tile.bm == 64 && !pooled) {  // two consumers a block
        tile.bm = 128;
        tile.raster_group = std::max(1, tile.raster_group / 2);
      }
      if (!ctx.heur.wgmma) tile.stages = wgmma_max_stages(tile, three_tf32);
    }
    if (!ctx.heur.split_k) tile.split_k = 1, tile.split_from = 0;  // the default's split-K: whole tiles instead
    tile.cluster_m = *ctx.heur.wgmma_cluster;
    if (geo.op == OpKind::Conv2d && tile.pingpong)
      return Error("codegen config: wgmma_cluster=2 on conv2d runs the cooperative schedule (not wgmma_schedule=pingpong)");
    if (geo.op == OpKind::Conv2d && wgmma_cluster_b_box_rows(tile) * 2 != tile.bn)
      return Error("codegen config: wgmma_cluster=2 on conv2d splits the filter's tile in halves of whole 8-row "
                   "atoms, not " + tile.str());
    if (geo.op == OpKind::Conv2d && !ctx.heur.wgmma) {  // the cooperative NCHW epilogue's staging beside the ring
      const int64_t room = kWgmmaDynamicSmemLimit - int64_t{tile.bm} * (64 + 8) * 4;
      while (tile.stages > 2 && wgmma_smem_bytes(tile, false) > room) --tile.stages;
    }
  }
  if (geo.op == OpKind::Conv2d) {
    if (Status s = choose_conv_halo(ctx, kp, geo, min_bn, tile); !s) return s;
  } else if (ctx.heur.conv_halo == true) {
    return Error("codegen config: conv_halo=1 applies to conv2d on wgmma");
  }
  if (Status s = validate_wgmma(tile, three_tf32); !s) return Error("codegen: " + s.error().message);
  if (tile.bn < min_bn)
    return Error("codegen: wgmma tile " + tile.str() + " is narrower than N=" + std::to_string(geo.n) +
                 ", which a fused row reduction needs");
  kp.wgmma = tile;
  return Status::success();
}

// SIMT split-K (linear, matmul; no fused pool or row reduction): where the output tiles leave most SMs idle
// and K is deep (a skinny fp32 GEMM: 32x8192x1024 makes 8 tiles of 32x128), tiles 32 columns wide and 32 deep
// in k, 4x4 elements a thread, and K split for about four blocks an SM: at least 4 k tiles a split, at most 32
// splits (fj::split_k_gather sums them in order; a range past K adds zeros). `split_k=` in the config sets the
// split, `tile=` the tile.
TileConfig with_simt_split_k(const PlanContext& ctx, const AnchorGeometry& geo, TileConfig tile) {
  if (geo.op != OpKind::Linear && geo.op != OpKind::Matmul) return tile;
  auto tiles = [&](const TileConfig& t) { return geo.batch * ceil_div(geo.m, t.bm) * ceil_div(geo.n, t.bn); };
  if (ctx.heur.split_k) {
    tile.split_k = static_cast<int>(std::clamp<int64_t>(*ctx.heur.split_k, 1, ceil_div(geo.k, tile.bk)));
  } else {
    const int64_t sms = sm_count_guess(ctx.arch);
    if (tiles(tile) * 2 > sms) return tile;
    TileConfig narrow = tile;
    if (!ctx.heur.tile) {
      narrow.bm = cover(geo.m, {32, 64});
      narrow.bn = 32;
      narrow.bk = 32;
      narrow.tm = narrow.tn = 4;
    }
    const int64_t k_tiles = ceil_div(geo.k, narrow.bk);
    const int64_t want = std::min<int64_t>({ceil_div(4 * sms, tiles(narrow)), k_tiles / 4, 32});
    if (want < 2) return tile;
    tile = narrow;
    tile.split_k = static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, want)));  // no empty range
  }
  return tile;
}

}  // namespace

Status choose_anchor_tile(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  if (ctx.heur.wgrad_flat == true && !(kp.mainloop == Mainloop::Wgmma && geo.op == OpKind::Conv2dWeightGrad &&
                               kp.mma_kind == "tf32"))
    return Error("codegen config: wgrad_flat=1 takes a 192-column swap-AB dW (a tf32 conv2d_weight_grad on wgmma); "
                 "the anchor is " + ctx.g.describe(kp.root) + " on " + std::string(mainloop_name(kp.mainloop)) +
                 (kp.mma_kind.empty() ? std::string() : " " + kp.mma_kind));
  if (ctx.heur.gemv == true || ctx.heur.gemv_tile) {
    if (ctx.heur.gemv == false) return Error("codegen config: gemv_tile= sets the GEMV loop's tile, but gemv=0");
    if (std::string why = gemv_blocker(ctx, kp, geo); !why.empty())
      return Error(std::string("codegen config: ") + (ctx.heur.gemv_tile ? "gemv_tile=" : "gemv=1") + ", but " + why);
  }
  if (kp.mainloop == Mainloop::Wgmma) return choose_wgmma_tile(ctx, kp, flatten_batch_rows(geo));
  if (ctx.heur.conv_halo == true)
    return Error(std::string("codegen config: conv_halo=1 applies to conv2d on wgmma; this anchor runs ") +
                 std::string(mainloop_name(kp.mainloop)));
  if (kp.mainloop == Mainloop::Mma) return choose_mma_tile(ctx, kp, geo);
  bool pool_fused = false;
  for (const FusedTail& t : kp.tails) pool_fused = pool_fused || op_category(ctx.node(t.op).op) == OpCategory::Pool;
  TileConfig tile = ctx.heur.tile ? *ctx.heur.tile : heuristic_tile(geo, pool_fused);
  tile.warp_along_m = geo.op == OpKind::Conv2d;
  if (ctx.heur.split_k && *ctx.heur.split_k > 1 && geo.op != OpKind::Linear && geo.op != OpKind::Matmul)
    return Error("codegen config: split_k applies to linear and matmul on the SIMT mainloop");
  if (ctx.heur.gemv != false && gemv_blocker(ctx, kp, geo).empty()) {  // few fp32 rows: W read once at memory speed
    tile = gemv_tile(ctx, geo);
    if (Status s = validate_tile(tile); !s) return Error("codegen: " + s.error().message + " for M=" + std::to_string(geo.m));
  } else if (kp.tails.empty() && kp.wide.nodes.empty()) {
    tile = with_simt_split_k(ctx, geo, tile);  // (fused tails: whole tiles)
  }
  if (Status s = validate_tile(tile); !s) return s;
  kp.tile = tile;
  return Status::success();
}

}  // namespace fusejit::cg
