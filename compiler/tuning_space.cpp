#include "compiler/tuning_space.h"

#include <algorithm>

#include "compiler/codegen.h"
#include "compiler/plan.h"

namespace fusejit {
namespace {

// Whether codegen puts the graph's anchor on `mainloop` ("_wgmma_", "_mma_") for `arch`.
bool uses(const Graph& g, const std::string& arch, const char* mainloop) {
  auto p = generate_program(g, {arch, ""});
  return p && p->name.find(mainloop) != std::string::npos;
}

// A dW on wgmma (sm_90a; tf32: the swap-AB dW, x in registers): its K (the pixels) is deep, so each tile comes with
// the split that fills the SMs, and half of it (an explicit wgmma_tile is not split by default). 16-bit: BN 64 / 128
// / 256 columns; tf32: 64 / 128, and 192 where one box of x serves a kernel row's taps; the deepest two rings.
void wgrad_wgmma_candidates(const Graph& g, const std::string& arch, const cg::AnchorGeometry& geo,
                            std::vector<std::string>& out) {
  if (arch != "sm_90a" || g.precision == Precision::FP32) return;
  const bool tf32 = g.precision == Precision::TF32;
  const std::string swap = tf32 ? "wgmma_swap_ab=1," : "";
  auto on_wgmma = [&](const std::string& c) {  // (a dW the wgmma path cannot take stays on mma.sync)
    auto p = generate_program(g, {arch, c});
    return p && p->name.find("_wgmma_") != std::string::npos;
  };
  // tf32 on mma.sync by default: the swap-AB dW's default tile and split (the other way: `mainloop=mma`, below)
  if (tf32 && !on_wgmma("") && on_wgmma("wgmma_swap_ab=1")) out.push_back("wgmma_swap_ab=1");
  const int64_t sms = cg::sm_count_guess(arch);
  for (int bm : {128, 64}) {
    if (bm > 2 * geo.m && bm > 64) continue;
    for (int bn : tf32 ? std::vector<int>{192, 128, 64} : std::vector<int>{256, 128, 64}) {
      const int64_t tiles = (geo.m + bm - 1) / bm * ((geo.n + bn - 1) / bn);
      const int64_t fill = std::max<int64_t>(1, sms / tiles);
      int found = 0;
      for (int stages = 8; stages >= 2 && found < 2; --stages) {
        const std::string tile = swap + "wgmma_tile=" + std::to_string(bm) + "x" + std::to_string(bn) + "x" +
                                 std::to_string(stages);
        if (!on_wgmma(tile + ",split_k=" + std::to_string(fill))) continue;
        ++found;
        for (int64_t split : {fill, fill / 2})
          if (split >= 1) out.push_back(tile + ",split_k=" + std::to_string(split));
      }
    }
  }
}

}  // namespace

std::vector<std::string> tuning_candidates(const Graph& g, const std::string& arch) {
  std::vector<std::string> out{""};
  auto anchor = g.anchor();
  if (!anchor) return out;
  const cg::AnchorGeometry geo = cg::analyze_anchor(g, *anchor);
  if (uses(g, arch, "_mma_")) {
    // fp32 matmul reads B as [K, N] by scalar shared loads: bn >= 32.
    const bool fp32_kn_b = g.node(*anchor).op == OpKind::Matmul &&
                           g.node(g.node(*anchor).operands[1]).type.dtype == DType::F32;
    for (int bm : {128, 64}) {
      if (bm > 2 * geo.m && bm > 64) continue;
      for (int bn : {256, 128, 64, 32, 16}) {
        if ((bn > 2 * geo.n && bn > 16) || (fp32_kn_b && bn < 32)) continue;
        for (int stages : {3, 4})
          out.push_back("mma_tile=" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(stages));
      }
    }
    out.push_back("mainloop=ffma");  // the SIMT mainloop's default tile
    // Halo patches (few threads a block, latency-bound): register caps for more blocks an SM
    // (H100, seed 3's dX conv: 6 blocks 4% faster in fp32, 11% in bf16; 8 spills).
    if (g.node(*anchor).op == OpKind::Conv2d) {
      auto p = generate_program(g, {arch, ""});
      if (p && p->name.find("_halo") != std::string::npos) {  // kernel names say "_halo" (plan_text.cpp)
        // Warps 32 columns wide (the default's) on the other tiles, and the halo prefetch either way.
        for (const char* c : {"mma_min_blocks=2", "mma_min_blocks=4", "mma_min_blocks=6",
                              "mma_tile=64x16x2,mma_min_blocks=8", "mma_tile=128x32x3x32", "mma_tile=64x32x3x32",
                              "mma_tile=128x64x3x32", "mma_tile=64x64x3x32"})
          if (generate_program(g, {arch, c})) out.push_back(c);
        const bool prefetched = p->source.find("conv.accumulate_prefetched<") != std::string::npos;
        if (const char* c = prefetched ? "halo_prefetch=0" : "halo_prefetch=1"; generate_program(g, {arch, c}))
          out.push_back(c);
      }
      // A fused pool reduced in registers (the default where warps hold whole windows) or staged in shared memory.
      if (p && p->source.find("fj::patch_pool_in_registers<") != std::string::npos) out.push_back("pool_registers=0");
    }
    if (g.node(*anchor).op == OpKind::Conv2dWeightGrad) {
      // dW's K (N*Ho*Wo) is deep: half and twice the default's split (whole waves of its blocks), and 1.
      auto p = generate_program(g, {arch, ""});
      const int64_t split = p && !p->launches.empty() ? p->launches[0].grid[2] : 1;
      for (int64_t s : {int64_t{1}, split / 2, split * 2})
        if (s >= 1 && s != split) out.push_back("split_k=" + std::to_string(s));
      // The other B: x in NHWC (the 16-bit default where eligible) or gathered from NCHW (fp32's).
      const bool nhwc = p && p->name.find("_nhwc") != std::string::npos;
      const std::string other = nhwc ? "wgrad_nhwc=0" : "wgrad_nhwc=1";
      if (generate_program(g, {arch, other})) out.push_back(other);
      wgrad_wgmma_candidates(g, arch, geo, out);  // (where the default is mma.sync: the tf32 swap-AB dW's)
    } else if (g.node(*anchor).op != OpKind::Conv2d) {
      const int64_t k_tiles = (geo.k * 4 + 127) / 128;  // fp32 k tiles (16-bit: half as many, still legal)
      for (int split : {1, 2, 4, 8, 16})
        if (split == 1 || split * 4 <= k_tiles) out.push_back("split_k=" + std::to_string(split));
    }
  }
  if (uses(g, arch, "_wgmma_")) {
    const bool three_tf32 = g.precision == Precision::FP32;
    const int64_t rows = cg::flatten_batch_rows(geo).m;  // the wgmma path's M
    // 176 / 192 columns: K-major B only (linear; tf32 / fp32 matmul reads B transposed), not conv
    const OpKind op = g.node(*anchor).op;
    const bool k_major_b = op == OpKind::Linear || (op == OpKind::Matmul && (g.precision == Precision::TF32 || three_tf32));
    if (op == OpKind::Conv2dWeightGrad) wgrad_wgmma_candidates(g, arch, geo, out);  // (tiles with their splits)
    for (int bm : op == OpKind::Conv2dWeightGrad ? std::vector<int>{} : std::vector<int>{128, 64}) {
      if (bm > 2 * rows && bm > 64) continue;
      for (int bn : {256, 192, 176, 168, 128, 64}) {
        if (bn > 2 * geo.n && bn > 64) continue;
        if ((bn == 168 || bn == 176 || bn == 192) && !k_major_b) continue;
        cg::WgmmaConfig t;
        t.bm = bm;
        t.bn = bn;
        int most = 0;  // the deepest ring that fits, and one stage less
        for (t.stages = 2; t.stages <= 8; ++t.stages)
          if (cg::wgmma_fits_with_epilogue(t, three_tf32))
            most = t.stages;
        std::vector<int> depths = {most, most - 1};
        if (op == OpKind::Conv2d)  // shallower rings leave a conv's NCHW epilogue wider chunks (the default: 4)
          for (int stages : {4, 3})
            if (stages < most - 1) depths.push_back(stages);
        for (int stages : depths) {
          if (stages < 2) continue;
          for (int group : {8, 16})
            out.push_back("wgmma_tile=" + std::to_string(bm) + "x" + std::to_string(bn) + "x" +
                          std::to_string(stages) + "x" + std::to_string(group));
        }
      }
    }
    if (g.node(*anchor).op != OpKind::Conv2d) {  // split-K where even 64x64 tiles leave SMs idle (1: none)
      const int64_t k_tiles = (geo.k * (three_tf32 || g.precision == Precision::TF32 ? 4 : 2) + 127) / 128;
      const int64_t small_tiles = ((rows + 63) / 64) * ((geo.n + 63) / 64);
      if (small_tiles * 2 <= cg::sm_count_guess(arch))
        for (int split : {1, 2, 4, 8, 16})
          if (split == 1 || (split * 4 <= k_tiles && small_tiles * split <= 2 * cg::sm_count_guess(arch)))
            out.push_back("split_k=" + std::to_string(split));
    }
    // the default tile with and without 2-block clusters sharing B (linear, or a B tile of two 64-column boxes)
    if (op != OpKind::Conv2d && op != OpKind::Conv2dWeightGrad && !three_tf32 && (op == OpKind::Linear || geo.n >= 128)) {
      out.push_back("wgmma_cluster=1");
      out.push_back("wgmma_cluster=2");
    }
    if (op == OpKind::Matmul && (g.precision == Precision::TF32 || three_tf32))  // fp32 B [K, N]: swap-AB tiles, the copy
      for (const char* c : {"wgmma_swap_ab=0", three_tf32 ? "wgmma_swap_ab=1" : "wgmma_swap_ab=0,tma_store=0",
                            "wgmma_swap_ab=1,wgmma_tile=256x128x4x8",
                            "wgmma_swap_ab=1,wgmma_tile=256x128x4x16", "wgmma_swap_ab=1,wgmma_tile=192x128x5x8",
                            "wgmma_swap_ab=1,wgmma_tile=128x128x6x8", "wgmma_swap_ab=1,wgmma_tile=256x64x5x8",
                            "wgmma_swap_ab=1,wgmma_tile=128x64x8x8", "wgmma_swap_ab=1,wgmma_tile=128x128x3x8",
                            "wgmma_swap_ab=1,wgmma_tile=128x64x4x8"})
        if (generate_program(g, {arch, c})) out.push_back(c);  // (3xTF32: tiles of at most 128 rows)
    if (op == OpKind::Conv2dWeightGrad)  // the mma.sync dW (its default tile and split)
      out.push_back("mainloop=mma");
    if (op == OpKind::Conv2d && generate_program(g, {arch, "conv_halo=1"}))
      out.push_back("conv_halo=1");  // the filter resident, a halo box per patch (conv_wgmma_halo.cuh)
    if (op == OpKind::Conv2d && generate_program(g, {arch, "conv_runs=0"}))
      out.push_back("conv_runs=0");  // the fp32-staged epilogue storing element by element (and its cooperative tile)
    out.push_back("tma_store=1");  // the default tile, outputs by TMA bulk stores (auto: cheap epilogues only)
    out.push_back("tma_store=0");  // ... or by staged global stores
    // ... two columns a call (where that changes the kernel). Not epilogue_direct=1: stores from the fragment's
    // registers measured 1.3-1.6x slower than the staged default (H100, bench/results/*_s48_direct.md).
    if (op == OpKind::Linear || op == OpKind::Matmul) {
      auto pairs = generate_program(g, {arch, "epilogue_pairs=1"});
      auto plain = generate_program(g, {arch, ""});
      if (pairs && plain && pairs->source != plain->source) out.push_back("epilogue_pairs=1");
    }
    if (!three_tf32 && op != OpKind::Conv2dWeightGrad)  // ping-pong: two consumers taking turns, a whole tile each
      for (auto [bm, bn] : {std::pair{64, 256}, std::pair{64, 128}, std::pair{128, 128}}) {
        if ((bn > 2 * geo.n && bn > 64) || (bm > 2 * rows && bm > 64)) continue;
        cg::WgmmaConfig t;
        t.bm = bm;
        t.bn = bn;
        t.pingpong = true;
        int most = 0;
        for (t.stages = 2; t.stages <= 8; ++t.stages)
          if (cg::wgmma_fits_with_epilogue(t, false)) most = t.stages;
        for (int stages : {most, most - 1}) {
          if (stages < 2) continue;
          for (int group : {16, 32})
            out.push_back("wgmma_tile=" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(stages) + "x" +
                          std::to_string(group) + ",wgmma_schedule=pingpong");
        }
      }
    // 128x168 ping-pong where the default tile is 168 wide (K-major B): the cooperative tile's B traffic, and each
    // epilogue but a block's last behind the other consumer's mainloop.
    if (!three_tf32 && op == OpKind::Linear) {
      auto plain = generate_program(g, {arch, ""});
      const std::string tall = "wgmma_tile=128x168x5,wgmma_schedule=pingpong";
      const bool wide168 = plain && !plain->launches.empty() && plain->launches[0].tensor_maps.size() > 1 &&
                           plain->launches[0].tensor_maps[1].box_rows == 168;  // B's box: the tile's width
      if (wide168 && generate_program(g, {arch, tall}))
        out.push_back(tall);
    }
    out.push_back("mainloop=ffma");  // the SIMT mainloop's default tile
  }
  // A linear / matmul on the SIMT mainloop by default (fp32 with few rows: pass_mainloop.cpp): the tensor-core
  // mainloops it was chosen over, splits around the default's, and the SIMT tile where it is the GEMV loop.
  if ((geo.op == OpKind::Linear || geo.op == OpKind::Matmul) && !uses(g, arch, "_wgmma_") && !uses(g, arch, "_mma_")) {
    for (const char* c : {"mainloop=mma", "mainloop=wgmma"})
      if (generate_program(g, {arch, c})) out.push_back(c);
    auto p = generate_program(g, {arch, ""});
    const int64_t split = p && !p->launches.empty() ? p->launches[0].grid[2] : 1;
    for (int64_t s : {int64_t{1}, split / 2, split * 2})
      if (s >= 1 && s != split && s <= 64) out.push_back("mainloop=ffma,split_k=" + std::to_string(s));
    if (p && p->plan_text.find("tile GEMV") != std::string::npos) {  // the SIMT tile's split-K, and other GEMV tiles
      out.push_back("mainloop=ffma,gemv=0");
      // longer runs of each W row a k-tile (1 KiB, 512 bytes), more stages or fewer, wider columns, one k group;
      // one that plans the default's tile and split (32x128x1x4 or 64x64x2x4x2) is left out
      auto tile_line = [](const std::string& plan) {
        const size_t at = plan.find("tile GEMV");
        return at == std::string::npos ? std::string() : plan.substr(at, plan.find('\n', at) - at);
      };
      for (const char* t :
           {"32x256x1x4x3", "32x128x1x4", "64x64x2x4", "64x64x2x4x2", "64x32x2x4x3", "128x32x4x4", "256x16x2x1"}) {
        const std::string c = std::string("gemv_tile=") + t;
        auto q = generate_program(g, {arch, c});
        if (q && tile_line(q->plan_text) != tile_line(p->plan_text)) out.push_back(c);
      }
    }
  }
  for (int bm : {32, 64, 128, 256}) {
    if (bm > 2 * geo.m && bm > 32) continue;  // mostly idle rows
    for (int bn : {16, 32, 64, 128, 256}) {
      if (bn > 2 * geo.n && bn > 16) continue;
      for (int tm : {4, 8}) {
        for (int tn : {4, 8}) {
          cg::TileConfig t;
          t.bm = bm;
          t.bn = bn;
          t.tm = tm;
          t.tn = tn;
          if (!cg::validate_tile(t) || t.threads() < 64 || t.threads() > 512) continue;
          out.push_back("tile=" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(tm) + "x" +
                        std::to_string(tn));
        }
      }
    }
  }
  return out;
}

}  // namespace fusejit
