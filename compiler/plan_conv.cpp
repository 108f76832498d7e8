// Plan helpers for conv anchors: the pixel patches of the halo mainloops (mma.sync, wgmma), their shared-memory
// sizes and blockers, and the tf32 swap-AB dW's shared box of x.
#include <algorithm>

#include "compiler/passes.h"
#include "compiler/plan.h"

namespace fusejit::cg {

int wgrad_swap_shared_box_bytes(const AnchorGeometry& geo) {
  if (geo.op != OpKind::Conv2dWeightGrad || geo.cin != 64 || geo.kw != 3 || geo.groups != 1 || geo.m > 128) return 0;
  const int64_t first = -geo.pw, aligned = first >= 0 ? first & ~int64_t{3} : -((3 - first) & ~int64_t{3});
  const int64_t reach = first + 2 * geo.dw - aligned;  // the last tap's shift past the box's start
  return reach <= 4 ? 144 : reach <= 12 ? 176 : 0;
}

bool wgrad_swap_shares_x(const AnchorGeometry& geo) { return wgrad_swap_shared_box_bytes(geo) > 0; }

ConvPatch conv_patch(const AnchorGeometry& geo, int bm, int qh, int qw, int halo_elem_bytes, bool wgmma_halo,
                     int pool_warp_rows) {
  if (wgmma_halo) {  // 8 pixels wide or a multiple of 64; short NCHW runs cost, the halo's pixels a little
    ConvPatch best;
    double best_cost = 0;
    for (int bw : {64, 8}) {  // (128: never fewer tiles than 64 at bm 128, and a larger halo)
      if (bw > bm || bm % bw) continue;
      const int bh = bm / bw;
      if (bw % qw || bh % qh) continue;
      const int64_t tiles = ((geo.oh + bh - 1) / bh) * ((geo.ow + bw - 1) / bw);
      const int64_t halo_pixels = (bh + (geo.kh - 1) * geo.dh) * (bw + (geo.kw - 1) * geo.dw);
      const double cost = static_cast<double>(tiles) * (bm * (bw >= 32 ? 1.0 : 1.3) + 0.1 * halo_pixels);
      if (best.bh == 0 || cost < best_cost) {
        best = {bh, bw, tiles};
        best_cost = cost;
      }
    }
    return best;
  }
  // H100, Cin 64 -> 8 k3 p2 (a dX conv), fp32: 1x128 patches 8.57 ms, 8x16 5.57; Cin 8 -> 64 (one block) got
  // slower with 8x16 (6.48 -> 9.66 ms, its stores dominate), so one-block halos keep the store-only cost.
  const bool halo = halo_elem_bytes > 0 && conv_patch_blocks(geo, halo_elem_bytes) > 1;
  ConvPatch best;
  double best_cost = 0;
  for (int bw = std::min(bm, 128); bw >= 8; bw /= 2) {
    const int bh = bm / bw;
    if (bw % qw || bh % qh) continue;
    if (pool_warp_rows > 0 && pool_warp_rows % (qh * bw)) continue;  // a warp's rows: whole windows
    const int64_t tiles = ((geo.oh + bh - 1) / bh) * ((geo.ow + bw - 1) / bw);
    const int64_t halo_pixels = halo ? ((bh - 1) * geo.sh + (geo.kh - 1) * geo.dh + 1) *
                                           ((bw - 1) * geo.sw + (geo.kw - 1) * geo.dw + 1)
                                     : 0;
    const double cost = static_cast<double>(tiles) * (bm * (bw >= 32 ? 1.0 : bw == 16 ? 1.15 : 1.3) + halo_pixels);
    if (best.bh == 0 || cost < best_cost) {
      best = {bh, bw, tiles};
      best_cost = cost;
    }
  }
  if (best.bh == 0 && pool_warp_rows > 0) return conv_patch(geo, bm, qh, qw, halo_elem_bytes, false);
  return best;
}

bool pool_registers_fit(const ConvPatch& patch, int warp_rows, int qh, int qw) {
  return patch.bh > 0 && patch.bw % 8 == 0 && (qw == 1 || qw == 2 || qw == 4 || qw == 8) && patch.bw % qw == 0 &&
         warp_rows % (qh * patch.bw) == 0;
}

int64_t conv_halo_ring_bytes(const AnchorGeometry& geo, const ConvPatch& patch, int bn, int elem_bytes, int buffers,
                             bool nchw, int b_stages) {
  const int64_t blocks = geo.cin * elem_bytes / 128;  // 128-byte channel blocks
  const int64_t filter = (b_stages > 0 ? b_stages : geo.kh * geo.kw * blocks) * bn * 128;
  int64_t halo_w = patch.bw + (geo.kw - 1) * geo.dw;
  if (nchw) {  // rows from an input column aligned to 16 bytes (fj::ConvHalo::kHaloWS)
    const int64_t vec = 16 / elem_bytes, shift = (vec - geo.pw % vec) % vec;
    halo_w = (shift + halo_w + vec - 1) / vec * vec;
  }
  const int64_t halo = (patch.bh + (geo.kh - 1) * geo.dh) * halo_w * 128;
  return filter + buffers * ((halo + 1023) / 1024 * 1024);
}

namespace {
constexpr int64_t kMaxPatchChannelChunks = 4;  // 16-byte chunks of one pixel's channels in a halo block
constexpr int64_t kMaxPatchKChunks = 64;       // chunks along K per block (unrolled mma steps: half that)
constexpr int64_t kMaxBlockedPatchCout = 32;   // Cout/groups up to which several halo blocks beat the gather

// 16-byte chunks of one pixel's channels of a group.
int64_t channel_chunks(const AnchorGeometry& geo, int elem_bytes) {
  const int64_t per_chunk = 16 / elem_bytes;
  return (geo.cin / geo.groups + per_chunk - 1) / per_chunk;
}
}  // namespace

int conv_patch_block_chunks(const AnchorGeometry& geo, int elem_bytes) {
  const int64_t cc = channel_chunks(geo, elem_bytes);
  int64_t block = std::min(cc, kMaxPatchChannelChunks);
  while (block > 0 && block * geo.kh * geo.kw > kMaxPatchKChunks) --block;
  if (block > 0) block = (cc + (cc + block - 1) / block - 1) / ((cc + block - 1) / block);  // even blocks
  return static_cast<int>(block);
}

int conv_patch_blocks(const AnchorGeometry& geo, int elem_bytes) {
  const int64_t cc = channel_chunks(geo, elem_bytes);
  const int64_t block = std::max(1, conv_patch_block_chunks(geo, elem_bytes));
  return static_cast<int>((cc + block - 1) / block);
}

std::string conv_patch_prefetch_blocker(const AnchorGeometry& geo, const ConvPatch& patch, int threads,
                                       int elem_bytes) {
  const int64_t vec = geo.w % 4 == 0 ? 4 : geo.w % 2 == 0 ? 2 : 1;
  if (vec == 1) return "an odd input width (no vector copies)";
  if (conv_patch_blocks(geo, elem_bytes) > 1) return "the halo takes several channel blocks";
  const int64_t hr = (patch.bh - 1) * geo.sh + (geo.kh - 1) * geo.dh + 1;
  const int64_t hc = (patch.bw - 1) * geo.sw + (geo.kw - 1) * geo.dw + 1;
  const int64_t units = conv_patch_block_chunks(geo, elem_bytes) * hr * ((hc + 2 * (vec - 1)) / vec);
  if (units > 2 * int64_t{threads}) return "the halo takes more than two vector units a thread";
  return "";
}

bool conv_patch_pipelined(const AnchorGeometry& geo, int elem_bytes, bool halo_pipeline) {
  return halo_pipeline && elem_bytes == 4 && conv_patch_blocks(geo, elem_bytes) > 1;
}

int64_t conv_patch_operand_bytes(const AnchorGeometry& geo, const ConvPatch& patch, int bn, int elem_bytes,
                                 bool pipelined, bool vector_f32) {
  const int64_t block = std::max(1, conv_patch_block_chunks(geo, elem_bytes)), blocks = conv_patch_blocks(geo, elem_bytes);
  const int64_t steps = (block * geo.kh * geo.kw + 1) / 2;  // per block
  const int64_t hr = (patch.bh - 1) * geo.sh + (geo.kh - 1) * geo.dh + 1;
  int64_t hc = (patch.bw - 1) * geo.sw + (geo.kw - 1) * geo.dw + 1;
  // 16-bit halos copied kVec pixels a load from an aligned column (ConvPatchMma::kHCS).
  const bool two_buffers = conv_patch_pipelined(geo, elem_bytes, pipelined);
  const int64_t vec =
      elem_bytes == 2 || (vector_f32 && !two_buffers) ? (geo.w % 4 == 0 ? 4 : geo.w % 2 == 0 ? 2 : 1) : 1;
  if (vec > 1) hc = (hc + 2 * (vec - 1)) / vec * vec;
  const int64_t rows = std::min<int64_t>(bn, geo.cout / geo.groups);  // filter rows held (ConvPatchMma::kBRows)
  const int64_t buffers = two_buffers ? 2 : 1;
  return (rows * (2 * steps * blocks + 1) * 16 + 16 + buffers * block * hr * hc * 16 + 127) / 128 * 128;
}

std::string conv_patch_blocker(const AnchorGeometry& geo, int elem_bytes) {
  const int64_t per_chunk = 16 / elem_bytes, cin_g = geo.cin / geo.groups, cout_g = geo.cout / geo.groups;
  // Several halo blocks: only for narrow GEMM N, where the gather's tiles reuse each gathered element least.
  if (channel_chunks(geo, elem_bytes) > kMaxPatchChannelChunks && cout_g > kMaxBlockedPatchCout)
    return "Cin/groups=" + std::to_string(cin_g) + " is over " + std::to_string(kMaxPatchChannelChunks * per_chunk) +
           " channels and Cout/groups=" + std::to_string(cout_g) + " over " + std::to_string(kMaxBlockedPatchCout);
  if (conv_patch_block_chunks(geo, elem_bytes) == 0)
    return "a " + std::to_string(geo.kh) + "x" + std::to_string(geo.kw) + " kernel is over " +
           std::to_string(kMaxPatchKChunks) + " taps";
  const ConvPatch p = conv_patch(geo, 128, 1, 1, elem_bytes);
  if (const int64_t bytes = conv_patch_operand_bytes(geo, p, 16, elem_bytes); bytes > kMaxPatchOperandBytes)
    return "the filters of a 16-column tile and a patch's input halo take " + std::to_string(bytes) +
           " bytes of shared memory";
  return "";
}

}  // namespace fusejit::cg
