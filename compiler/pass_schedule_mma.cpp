// Pass (with pass_schedule.cpp): the mma.sync anchor's tile. BM 128 (64 when
// M is small), the narrowest BN that covers N (up to 128; 256 for 16-bit
// operands when N >= 256), 3 stages; halo-patch convs their own widths, warps
// and pixel tiles, and whether their halos are prefetched or double-buffered;
// split-K (64x64 tiles) when a GEMM's tiles would leave most SMs idle.
#include <algorithm>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Halo patches: whether each thread loads the next tile's halo into registers during the MMAs
// (halo_prefetch; default on for 3xTF32, where the MMAs are long enough to hide it: H200, seed 3 fp32 64x64
// 2.027 -> 1.874 ms; and 16-bit, whose halos are half the bytes: H200, 128x64 tiles 4 blocks an SM, seed 3 bf16
// 0.468 -> 0.441 ms, the global pool row 0.251 -> 0.230; tf32 lost, seed 3 0.595 -> 0.717, the pool row
// 0.271 -> 0.287; bench/results/ab_conv_paths_a_H200_20261129.log).
Status choose_halo_prefetch(const PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo) {
  kp.halo_prefetch = false;
  if (!kp.conv_patch || geo.op != OpKind::Conv2d) return Status::success();
  const bool want = ctx.heur.halo_prefetch.value_or(kp.mma_kind != "tf32");
  if (!want) return Status::success();
  const int eb = kp.mma_kind == "bf16" || kp.mma_kind == "f16" ? 2 : 4;
  int qh = 1, qw = 1;  // the patches emit_anchor takes: whole windows of a fused pool, warps' rows where in registers
  for (const FusedTail& t : kp.tails) {
    const Node& pn = ctx.node(t.op);
    if (op_category(pn.op) != OpCategory::Pool || t.spatial) continue;
    qh = static_cast<int>(pn.attr_ints("kernel_size")[0]), qw = static_cast<int>(pn.attr_ints("kernel_size")[1]);
  }
  const int warp_rows = qh > 1 && ctx.heur.pool_registers ? kp.mma.wm() : 0;
  const ConvPatch patch = conv_patch(geo, kp.mma.bm, qh, qw, eb, false, warp_rows);
  std::string why = conv_patch_prefetch_blocker(geo, patch, kp.mma.threads(), eb);
  if (why.empty() && conv_patch_operand_bytes(geo, patch, kp.mma.bn, eb, kp.halo_pipeline, eb == 4) >
                         kMaxPatchOperandBytes)
    why = "the halo's vector rows and the filters take more than " + std::to_string(kMaxPatchOperandBytes) +
          " bytes of shared memory";
  if (!why.empty()) {
    if (ctx.heur.halo_prefetch == true) return Error("codegen config: halo_prefetch=1, but " + why);
    return Status::success();
  }
  kp.halo_prefetch = true;
  for (std::string& note : kp.notes)
    if (note.rfind("mainloop: mma.sync", 0) == 0)
      if (size_t at = note.find(") each block copies"); at != std::string::npos)
        note.insert(at, ", the next tile's loaded into registers during the MMAs");
  return Status::success();
}

}  // namespace

Status choose_mma_tile(PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo) {
  int64_t min_bn = 0;  // a tile spans N for row reductions fused whole
  for (const FusedTail& t : kp.tails)
    if (!t.partial && op_category(ctx.node(t.op).op) != OpCategory::Pool) min_bn = geo.n;
  MmaConfig tile;
  if (ctx.heur.mma) {
    tile = *ctx.heur.mma;
  } else {
    tile = default_mma_tile(geo, min_bn);
    // 16-bit operands gather twice the elements per FLOP: a 256-wide tile
    // halves the gathers (H100, 32x256x56x56 k3 bf16: 0.638 -> 0.539 ms; tf32
    // got slower, 0.868 -> 0.909, so it keeps 128).
    const bool half = kp.mma_kind == "bf16" || kp.mma_kind == "f16";
    // (Not a dW from x in NHWC: there 128 columns, two blocks an SM, are faster; see with_split_k.)
    if (half && geo.n >= 256 && kp.tails.empty() && !kp.wgrad_nhwc) tile.bn = 256;  // with fused tails: correct, not timed
    if (kp.conv_patch) {
      // Halo patches: at most 32 columns (more blocks, fewer registers); 64-pixel
      // tiles under a fused pool. H100, seed 3 (64 -> 64 k3, 4x4 max pool): bf16
      // 1.60 -> 1.15 ms, tf32 1.73 -> 1.47, fp32 4.03 -> 3.30 (128x64 -> 64x32).
      tile.bn = std::max<int>(std::min(tile.bn, 32), static_cast<int>(std::min<int64_t>(min_bn, 128)));
      tile.bn = cover(tile.bn, {16, 32, 64, 128});
      // Each column tile copies the halo again: up to 64 channels a tile. Warps 32 columns wide (fewer A
      // fragment loads an MMA), 16-column tiles 64 pixels (3xTF32 aside). H200
      // (bench/results/ab_conv_halo_tiles_H200_20261128.log): seed 3 (64 channels, 128x32 -> 128x64, warps
      // 64x32) bf16 0.674 -> 0.559 ms, tf32 0.802 -> 0.674, 3xTF32 64x64 (128 rows spill) 2.430 -> 2.027;
      // row 6 (32 channels, warps 64x16 -> 64x32) bf16 0.439 -> 0.293, tf32 0.691 -> 0.501, 3xTF32 1.734 ->
      // 1.270; row 7 (16 a group, 128x16 -> 64x16) bf16 0.287 -> 0.252, tf32 0.315 -> 0.271 (3xTF32 0.578 -> 0.594).
      if (geo.n > 32 && tile.bn < 64) {
        tile.bn = 64;
        if (kp.mma_kind == "f32x3") tile.bm = 64;
      }
      if (tile.bn >= 32) tile.warp_n = 32;
      else if (kp.mma_kind != "f32x3") tile.bm = 64;
      // Unless the pool reduces in the fragment's registers, which 128-pixel tiles (64 rows a warp) allow for
      // more windows: H200, seed 3 bf16 0.823 -> 0.704 ms, tf32 1.003 -> 0.835, fp32 2.615 -> 2.581 against
      // 64x32 tiles (bench/results/abrun_conv_seed3_H200_20261128.log).
      for (const FusedTail& t : kp.tails) {
        const Node& pn = ctx.node(t.op);
        if (op_category(pn.op) != OpCategory::Pool || t.spatial) continue;
        const auto& k = pn.attr_ints("kernel_size");
        const int qh = static_cast<int>(k[0]), qw = static_cast<int>(k[1]);
        const int eb = kp.mma_kind == "bf16" || kp.mma_kind == "f16" ? 2 : 4;
        if (tile.bm == 128 && ctx.heur.pool_registers && qh > 1 &&
            pool_registers_fit(conv_patch(geo, 128, qh, qw, eb, false, 64), 64, qh, qw))
          continue;
        if (conv_patch(geo, 64, qh, qw).bh) tile.bm = 64;
      }
      // 3xTF32 over several channel blocks: 64-pixel tiles. H100, seed 3's dX (64 -> 8, k3 p2): 5.57 -> 5.37 ms,
      // and ptxas: 255 registers with 64 bytes of spills -> 245, none.
      if (kp.mma_kind == "f32x3" && conv_patch_blocks(geo, 4) > 1) tile.bm = 64;
    }
  }
  // fp32 B read as [K, N] by scalar shared loads (matmul; dW from x in NHWC): rows padded for 32 columns.
  const bool fp32_kn_b = kp.mma_b_kn_major(geo.op) && kp.mma_kind != "bf16" && kp.mma_kind != "f16";
  if (fp32_kn_b && !ctx.heur.mma) tile.bn = std::max(tile.bn, 32);
  if (geo.op == OpKind::Conv2d && ctx.heur.split_k && *ctx.heur.split_k > 1)
    return Error("codegen config: split_k applies to linear, matmul and conv2d_weight_grad");
  if (geo.op != OpKind::Conv2d)
    tile = with_split_k(ctx, geo, kp.mma_kind, min_bn, tile, kp.wgrad_nhwc);
  if (Status s = validate_mma(tile); !s) return Error("codegen: " + s.error().message);
  if (fp32_kn_b && tile.bn < 32)
    return Error("codegen: mma tile " + tile.str() + ": fp32 B read as [K, N] (matmul, dW from x in NHWC) needs bn >= 32");
  if (tile.bn < min_bn)
    return Error("codegen: mma tile " + tile.str() + " is narrower than N=" + std::to_string(geo.n) +
                 ", which a fused row reduction needs");
  kp.halo_pipeline = false;
  if (kp.conv_patch) {  // halo patches: the filters of a wide tile may not fit beside the halo
    const int eb = kp.mma_kind == "bf16" || kp.mma_kind == "f16" ? 2 : 4;
    auto bytes_of = [&](bool pipelined) {
      return conv_patch_operand_bytes(geo, conv_patch(geo, tile.bm, 1, 1, eb), tile.bn, eb, pipelined);
    };
    // Two cp.async halo buffers over several channel blocks: 3xTF32's default where they fit (H200, seed 3's dX
    // 64 -> 8: 5.474 -> 5.176 ms; tf32 lost, 1.872 -> 1.970: bench/results/ab_conv_dx_pipeline_H200_20261128.log).
    bool pipelined = conv_patch_pipelined(geo, eb, ctx.heur.halo_pipeline.value_or(kp.mma_kind == "f32x3"));
    if (pipelined && !ctx.heur.halo_pipeline && bytes_of(true) > kMaxPatchOperandBytes) pipelined = false;
    const int64_t bytes = bytes_of(pipelined);
    kp.halo_pipeline = pipelined;
    if (bytes > kMaxPatchOperandBytes) {
      kp.halo_pipeline = false;
      const std::string why = "the filters of a " + std::to_string(tile.bn) + "-column tile and a patch's halo take " +
                              std::to_string(bytes) + " bytes of shared memory";
      if (ctx.heur.conv_patch == true) return Error("codegen config: conv_patch=1, but " + why);
      kp.conv_patch = false;
      for (std::string& note : kp.notes)
        if (note.rfind("mainloop: mma.sync", 0) == 0)
          note = "mainloop: mma.sync " + kp.mma_kind + ", im2col gather by cp.async into a shared-memory ring (not "
                 "from halo patches: " + why + ")";
    }
  }
  for (const FusedTail& t : kp.tails) {  // halo patches: a fused pool's windows must tile the patches
    const Node& pn = ctx.node(t.op);
    if (!kp.conv_patch || op_category(pn.op) != OpCategory::Pool || t.spatial) continue;
    const auto& k = pn.attr_ints("kernel_size");
    if (conv_patch(geo, tile.bm, static_cast<int>(k[0]), static_cast<int>(k[1])).bh == 0)
      return Error("codegen: no patch of " + std::to_string(tile.bm) + " output pixels holds whole " +
                   std::to_string(k[0]) + "x" + std::to_string(k[1]) + " windows of " + ctx.g.describe(t.op));
  }
  kp.mma = tile;
  if (kp.halo_pipeline)
    for (std::string& note : kp.notes)
      if (note.rfind("mainloop: mma.sync", 0) == 0)
        if (size_t at = note.find(") each block copies"); at != std::string::npos)
          note.insert(at, ", two buffers filled by cp.async");
  return choose_halo_prefetch(ctx, kp, geo);
}

// Split-K for a GEMM whose output tiles cannot fill the GPU: blocks share a
// tile, each over a K range of whole k tiles, and the last to finish sums
// the splits (fj::split_k_gather) and runs the epilogue. The default takes
// 64x64 tiles (more of them) and enough splits for about one block per SM,
// at least 4 k tiles per split, at most 16 splits.
MmaConfig with_split_k(const PlanContext& ctx, const AnchorGeometry& geo, const std::string& mma_kind,
                       int64_t min_bn, MmaConfig tile, bool wgrad_nhwc) {
  const int elem_bytes = mma_kind == "bf16" || mma_kind == "f16" ? 2 : 4;
  auto tiles = [&](const MmaConfig& t) { return geo.batch * ceil_div(geo.m, t.bm) * ceil_div(geo.n, t.bn); };
  const int64_t k_tiles = ceil_div(geo.k, 128 / elem_bytes);
  if (ctx.heur.split_k) {
    tile.split_k = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(*ctx.heur.split_k, k_tiles)));
  } else {
    const int64_t sms = sm_count_guess(ctx.arch);
    if (tiles(tile) * 2 > sms || k_tiles < 8) return tile;
    if (geo.op == OpKind::Conv2dWeightGrad && !ctx.heur.mma) {
      // dW: tiles as wide as N (up to 128 columns: x's gather runs once per K range, not once per column
      // tile), 4 stages, K split for about two 256-thread blocks an SM, rounded to whole waves of the blocks
      // an SM holds: a last, partial wave takes as long as a full one. (H100, ncu, seed 1's tf32 dW: 5 tiles
      // of 128x128 x 53 splits, one 128 KiB block an SM: 265 blocks = 2 waves and 1 block; SMs active 65% of
      // the 3.72 ms.)
      // 16-bit from x in NHWC (cheap copies): 3 stages, two blocks of 128x128 an SM, about four blocks an SM
      // in all (H100, seed 1's bf16 dW: 128x128x3 split 105 1.53 ms, 128x128x4 split 52 1.61, 128x256x4
      // split 88 1.75, 128x64x3 split 88 2.46). Past one wave, at most 8 MiB of partials a tile: the last
      // block of a tile sums them alone (seed 3's one 64x128 tile: split 264 0.99 ms, 527 1.16).
      const bool nhwc16 = wgrad_nhwc && elem_bytes == 2;
      constexpr int64_t kMaxPartialBytes = int64_t{8} << 20;
      tile.stages = nhwc16 ? 3 : 4;
      const int64_t per_sm = nhwc16 ? 4 : 2;
      const int64_t slots =
          sms * mma_resident_blocks(tile, mma_kind, ctx.arch, ctx.heur.mma_min_blocks);  // blocks in one wave
      const int64_t waves =
          std::max<int64_t>(1, (ceil_div(per_sm * sms, tiles(tile)) * tiles(tile) + slots / 2) / slots);
      int64_t want = waves * slots / tiles(tile);
      if (nhwc16)
        want = std::min(want, std::max(slots / tiles(tile), kMaxPartialBytes / (int64_t{tile.bm} * tile.bn * 4)));
      want = std::max<int64_t>(1, std::min<int64_t>({want, k_tiles / 4, max_split_k(k_tiles)}));
      tile.split_k = static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, want)));
      return tile;
    }
    const bool deep = k_tiles >= 4096;
    if (!ctx.heur.mma && k_tiles >= 128 && !deep) {
      // Long K: the default tile (wide, 256 threads) split for one wave of the blocks the SMs hold. H200,
      // 3xTF32 64x8192x2048 (16 tiles of 64x128): split 8 0.0664 ms, 9 (a second, partial wave) 0.102,
      // 64x16 tiles split 9 0.0944, 64x64 split 8 0.0775; 48x4096x4096: split 8 0.0695, 64x16 split 5 0.0987.
      const int64_t slots = sms * mma_resident_blocks(tile, mma_kind, ctx.arch, ctx.heur.mma_min_blocks);
      const int64_t want = std::max<int64_t>(2, std::min<int64_t>({slots / tiles(tile), k_tiles / 4,
                                                                   max_split_k(k_tiles)}));
      tile.split_k = static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, want)));
      return tile;
    }
    MmaConfig small = tile;
    if (!ctx.heur.mma) {  // smaller tiles first: more of them
      small.bm = 64;
      if (min_bn <= 64) small.bn = std::min(tile.bn, 64);  // a whole-row reduction keeps bn >= N
    }
    int64_t want = std::min<int64_t>({ceil_div(sms, tiles(small)), k_tiles / 4, max_split_k(k_tiles)});
    if (want < 2) return tile;
    tile = small;
    // Then the narrowest columns (16; an fp32 [K, N] B: 32) before deeper
    // splits: more tiles, fewer accumulator slabs to gather. H100 tuner
    // (bench_gemm --tuned, 2026-11-24): 64x16 won over 64x64 + split-K by
    // 1.16-1.52x on 100x1000x500 (linear fp32, matmul bf16) and 32x8192x1024
    // (linear fp32); 64x32 on the fp32 matmul.
    // Deep K (a conv's dW: K = N*Ho*Wo): 64x32 tiles, 4 stages, about six
    // 128-thread blocks an SM (H100, 3xTF32 [64, 8258048] x [72, 8258048]:
    // 64x32x4 split 256 3.43 ms, split 512 3.52, 64x64x4 split 256 4.23,
    // 64x16x3 split 27 (one block an SM) 6.36, wgmma + residual split 7.61).
    const int narrowest = deep || (geo.op == OpKind::Matmul && elem_bytes == 4) ? 32 : 16;
    const int64_t blocks_per_sm = deep ? 6 : 1;
    if (!ctx.heur.mma && narrowest < tile.bn && narrowest >= min_bn) tile.bn = narrowest;
    if (!ctx.heur.mma && deep) tile.stages = 4;
    if (!ctx.heur.mma && (tile.bn == narrowest || deep))
      want = std::max<int64_t>(2, std::min<int64_t>({ceil_div(blocks_per_sm * sms, tiles(tile)), k_tiles / 4,
                                                     max_split_k(k_tiles)}));
    tile.split_k = static_cast<int>(ceil_div(k_tiles, ceil_div(k_tiles, want)));  // no empty split
  }
  constexpr int64_t kMaxWorkspace = int64_t{256} << 20;
  while (tile.split_k > 1 && tiles(tile) * tile.split_k * tile.bm * tile.bn * 4 > kMaxWorkspace) tile.split_k /= 2;
  return tile;
}

MmaConfig default_mma_tile(const AnchorGeometry& geo, int64_t min_bn) {
  MmaConfig tile;
  tile.bm = geo.m <= 64 ? 64 : 128;
  tile.bn = cover(std::max(geo.n, min_bn), {16, 32, 64, 128});
  return tile;
}

}  // namespace fusejit::cg
