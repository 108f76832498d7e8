// Pass: the anchor's mainloop, in the precision the graph asks for: bf16 /
// f16 operands natively, f32 in tf32 mode as TF32, f32 in fp32 mode as
// 3xTF32 (fp32-accurate).
// - On sm_90a a linear anchor whose operands TMA can read (rows of 16-byte
//   multiples) runs on the wgmma pipeline; so does a matmul with one [K, N] B
//   (no batch dims: x's leading dims flatten into M): 16-bit B read N-major by
//   wgmma's transposed-B mode, fp32 B transposed into scratch by the operand
//   staging kernel first (tf32 wgmma reads K-major B only).
// - conv2d on sm_90a with stride 1, one group and Cin in whole 128-byte
//   channel blocks runs wgmma too: a staging kernel writes x in NHWC and w as
//   [Cout][KH][KW][Cin], and TMA loads 4-D boxes of x per kernel tap
//   (templates/conv_wgmma.cuh).
// - Otherwise, on sm_80 and newer, mma.sync: conv2d with few channels per
//   group from shared-memory copies of each output patch's input halo
//   (templates/conv_patch.cuh), other conv2d with an im2col gather
//   (cp.async) into swizzled shared memory, linear and (batched) matmul with
//   dense cp.async tile copies (matmul's B read as [K, N]: ldmatrix.trans for
//   16-bit, scalar shared loads for fp32).
// - conv2d_weight_grad (dW) on mma.sync, split-K over the N*Ho*Wo output
//   pixels, grad read in place (templates/conv_wgrad.cuh); x staged to NHWC
//   first where Cin / groups is whole 16-byte chunks (B's k rows: a tap's
//   channels at a pixel, 16-byte cp.async), else gathered per (ci, kh, kw)
//   row from NCHW (4-byte copies, 16-bit: element loads).
// Everything else keeps the SIMT FFMA mainloop, with a note saying why.
// `mainloop=ffma` (or a SIMT `tile=`) in the config forces SIMT;
// `mainloop=wgmma` / `mainloop=mma` make ineligibility an error.
#include <cstdlib>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// The fj::MmaKind for the anchor's operands, or "" with `why` set.
std::string mma_kind(const Graph& g, const Node& anchor, std::string& why) {
  const DType a = g.node(anchor.operands[0]).type.dtype, b = g.node(anchor.operands[1]).type.dtype;
  if (a != b) {
    why = "its operands have different dtypes";
    return "";
  }
  if (a == DType::BF16) return "bf16";
  if (a == DType::F16) return "f16";
  if (g.precision == Precision::TF32) return "tf32";
  if (g.precision == Precision::FP32) return "f32x3";
  why = "its operands are f32 in a " + std::string(precision_name(g.precision)) + " graph";
  return "";
}

constexpr int64_t kMinKFor3xTf32Conv = 256;
// 3xTF32 GEMMs with fewer rows take mma.sync split-K on small grids (below).
constexpr int64_t kMinRowsFor3xTf32Wgmma = 512;
// ... or from this K on, where wgmma splits K (pass_schedule's with_wgmma_split_k),
constexpr int64_t kMinKFor3xTf32WgmmaSplit = 2048;
// ... but at most this many rows take mma.sync whatever K: H100, bench_gemm fp32 bias + relu
// (bench/results/bench_gemm_*_20261207-114257.md), mma.sync / wgmma ms: 64x8192x2048 0.0908 / 0.112,
// 16x4096x4096 0.0843 / 0.109, 8x2048x8192 0.0991 / 0.111; from 128 rows wgmma (128x4096x1024 0.0484 / 0.0383).
constexpr int64_t kMaxRowsFor3xTf32Mma = 64;
// ... unless the output has at most 2^17 elements and K has 4096 k-tiles or
// more (a conv's dW): then the residual-split kernel, which reads and writes
// both operands, costs more than the GEMM, and mma.sync splits in registers.
constexpr int64_t kMaxOutputForDeep3xTf32Mma = int64_t{1} << 17;
constexpr int64_t kMinKForDeep3xTf32Mma = 4096 * 32;
// fp32 GEMMs of at most this many rows and at least this K run FFMA (with split-K where its tiles leave half
// the SMs idle, pass_schedule.cpp): W is read once, where 3xTF32 on wgmma first writes its TF32 residual and
// reads both, and mma.sync pads the rows to 64 and runs three MMAs. H100, bench_gemm fp32 bias + relu
// (bench/results/bench_gemm_*_20261207-114257.md), FFMA / wgmma / mma.sync ms: 32x8192x1024 0.0531 (split 16) /
// 0.0641 / 0.0635, 8x2048x8192 0.0776 / 0.111 / 0.0991, 16x4096x4096 0.0852 / 0.109 / 0.0843, 1x4096x4096
// 0.0840 / 0.110 / 0.0836; but 64x8192x2048 0.179 / 0.112 / 0.0908 (the SIMT loop at 12 TFLOP/s): 32 rows.
constexpr int64_t kMaxRowsForFfma = 32;
constexpr int64_t kMinKForFfma = 1024;

// Whether only elementwise ops (and views) follow the anchor: no reduction, softmax, pool or norm that the
// epilogue could take (which would keep whole SIMT tiles, without split-K).
bool only_elementwise_after(const PlanContext& ctx, ValueId anchor) {
  std::vector<ValueId> stack = {anchor};
  std::vector<bool> seen(ctx.g.nodes.size(), false);
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
      if (seen[static_cast<size_t>(u)]) continue;
      seen[static_cast<size_t>(u)] = true;
      if (!ctx.pointwise(u) && ctx.node(u).op != OpKind::Reshape) return false;
      stack.push_back(u);
    }
  }
  return true;
}

// Whether an fp32 (3xTF32) linear / matmul is skinny enough for FFMA (kMaxRowsForFfma).
bool skinny_fp32_for_ffma(const PlanContext& ctx, const AnchorGeometry& geo) {
  if (geo.op != OpKind::Linear && geo.op != OpKind::Matmul) return false;
  return geo.m <= kMaxRowsForFfma && geo.k >= kMinKForFfma && only_elementwise_after(ctx, geo.node);
}

// Why a conv2d cannot take the wgmma path (templates/conv_wgmma.cuh: x
// staged to NHWC, 4-D TMA boxes of output-pixel patches), or "".
// A conv with at most this many output channels runs on mma.sync (narrow tiles), not wgmma.
constexpr int64_t kMaxNForMmaConv = 8;

std::string conv_wgmma_blocker(const AnchorGeometry& geo, const std::string& kind) {
  const int eb = kind == "bf16" || kind == "f16" ? 2 : 4;
  if (geo.groups != 1) return "groups=" + std::to_string(geo.groups) + " (the TMA conv path takes one group)";
  if (geo.sh != 1 || geo.sw != 1) return "a strided conv2d (the TMA conv path needs stride 1)";
  if ((geo.cin * eb) % 128)
    return "Cin=" + std::to_string(geo.cin) + " is not a multiple of " + std::to_string(128 / eb) +
           " (the TMA conv path loads whole 128-byte channel blocks)";
  if (kind == "f32x3" && geo.k < kMinKFor3xTf32Conv)
    return "3xTF32 with K=" + std::to_string(geo.k) + " below " + std::to_string(kMinKFor3xTf32Conv);
  return "";
}

// Why conv2d_weight_grad cannot read x staged to NHWC ("" if it can).
std::string wgrad_nhwc_blocker(const AnchorGeometry& geo, int elem_bytes, const Heuristics& heur) {
  const int64_t per_chunk = 16 / elem_bytes, cin_g = geo.cin / geo.groups;
  if (cin_g % per_chunk)
    return "Cin/groups=" + std::to_string(cin_g) + " is not a multiple of " + std::to_string(per_chunk) +
           " (x in NHWC is copied in 16-byte chunks of one tap's channels)";
  if (elem_bytes == 4 && heur.mma && heur.mma->bn < 32)
    return "the config's mma_tile is narrower than 32 columns (fp32 B [pixels][columns] is read by scalar shared "
           "loads from rows padded for 32 columns)";
  return "";
}

// Why conv2d_weight_grad cannot take the wgmma path (templates/conv_wgmma.cuh WgradOperands: grad's 4-D boxes as
// K-major A, x in NHWC as N-major B), or "". Grad's rows that are not a TMA stride are copied to rows padded to one
// (pass_buffers.cpp). x cannot be read in place as K-major B: a tap's shift would be TMA's innermost coordinate.
// A tf32 dW takes the swap-AB form (templates/wgrad_swap_ab.cuh: x read in place into registers as wgmma's A; W a
// multiple of 4 for x's TMA rows) on request (wgmma_swap_ab=1), and by default where a block's 192 columns share one
// box of x (wgrad_swap_shares_x: rows of 36 pixels, or 44 where padded). H200 (`fusejit run`, the grad copy
// included): seed 1's tf32 dW mma.sync 2.498 ms, swap-AB on 192 columns 1.628 (bench/results/
// ab_conv_paths_e_H200_20261129.log); 128x64x128^2 padded 1: 3.556 -> 1.106 (ab_conv_paths_h_H200_20261129.log); on
// 128 columns (a box of x per consumer) 3.53 (ab_conv_paths_d_H200_20261129.log), so those stay opt-in.
std::string wgrad_wgmma_blocker(const AnchorGeometry& geo, const std::string& kind, const Heuristics& heur) {
  const bool swap = kind == "tf32" && (heur.wgmma_swap_ab == true || (!heur.wgmma_swap_ab.has_value() &&
                                                                      wgrad_swap_shares_x(geo)));
  if (kind != "bf16" && kind != "f16" && !swap)
    return "a " + kind + " dW (B from x in NHWC is N-major: 16-bit only" +
           (kind == "tf32" ? std::string("; wgmma_swap_ab=1 reads x into registers instead)") : std::string(")"));
  if (swap && (geo.w * 4) % 16)
    return "W=" + std::to_string(geo.w) + ": x's rows of " + std::to_string(geo.w * 4) +
           " bytes (the swap-AB dW reads x by TMA: rows a multiple of 16 bytes)";
  if (geo.groups != 1) return "groups=" + std::to_string(geo.groups) + " (the wgmma dW takes one group)";
  if (geo.sh != 1 || geo.sw != 1) return "a strided conv (B's boxes are runs of consecutive pixels)";
  if (geo.cin % 64) return "Cin=" + std::to_string(geo.cin) + " is not a multiple of 64 (B's 128-byte channel boxes)";
  if (geo.ow - geo.pw < 1) return "padding " + std::to_string(geo.pw) + " wider than the output's " + std::to_string(geo.ow) + " columns";
  if (heur.wgrad_nhwc == false && !swap) return "wgrad_nhwc=0 (the wgmma dW reads x in NHWC)";
  if (heur.wgrad_nhwc == true && swap) return "wgrad_nhwc=1 (the swap-AB dW reads x in place)";
  return "";
}

const char* kind_text(const std::string& kind) {
  return kind == "f32x3" ? "3xTF32 (fp32-accurate: hi*hi + hi*lo + lo*hi)"
         : kind == "tf32" ? "TF32 operands, fp32 accumulation"
                          : "fp32 accumulation";
}

}  // namespace

Status choose_mainloop(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const Node& a = ctx.node(kp.root);
  const bool gemv_asked = ctx.heur.gemv == true || ctx.heur.gemv_tile;
  if (ctx.heur.mainloop == "ffma" || (ctx.heur.mainloop == "auto" && (ctx.heur.tile || gemv_asked))) {
    kp.notes.push_back(std::string("mainloop: SIMT FFMA (") +
                       (ctx.heur.tile ? "the config sets its tile"
                        : ctx.heur.mainloop == "ffma" ? "mainloop=ffma in the config"
                                                      : "the config asks for the GEMV loop") + ")");
    return Status::success();
  }
  if (ctx.heur.tile)
    return Error("codegen config: tile= sets the SIMT mainloop's tile, but mainloop=" + ctx.heur.mainloop);
  std::string why, kind;
  const bool sm80_up = ctx.arch.rfind("sm_", 0) == 0 && std::atoi(ctx.arch.c_str() + 3) >= 80;
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  if (ctx.heur.mainloop == "auto" && !ctx.heur.wgmma && !ctx.heur.mma && !ctx.heur.split_k && sm80_up &&
      mma_kind(ctx.g, a, why) == "f32x3" && skinny_fp32_for_ffma(ctx, geo)) {
    kp.notes.push_back("mainloop: SIMT FFMA (fp32 with " + std::to_string(geo.m) + " rows and K=" +
                       std::to_string(geo.k) + ": W read once; 3xTF32 would first write its TF32 residual)");
    return Status::success();
  }
  why.clear();
  // wgmma first where it can run: sm_90a, linear or matmul with one B, rows TMA can read (fp32 B [K, N]
  // goes through a transposed copy).
  std::string why_not_wgmma;
  const std::string wgmma_kind = mma_kind(ctx.g, a, why);
  const bool sixteen_bit = wgmma_kind == "bf16" || wgmma_kind == "f16";
  if (ctx.heur.mainloop == "mma")
    why_not_wgmma = "mainloop=mma in the config";
  else if (ctx.heur.mainloop == "auto" && ctx.heur.mma)
    why_not_wgmma = "mma_tile in the config";
  else if (ctx.arch != "sm_90a")
    why_not_wgmma = "the target is " + ctx.arch + ", not sm_90a";
  else if (a.op == OpKind::Matmul && geo.b_batched)
    why_not_wgmma = "matmul's B has batch dims (the wgmma path takes one [K, N] B)";
  else if (wgmma_kind.empty())
    why_not_wgmma = why;
  else if (std::string conv_why = a.op == OpKind::Conv2d             ? conv_wgmma_blocker(geo, wgmma_kind)
                                  : a.op == OpKind::Conv2dWeightGrad ? wgrad_wgmma_blocker(geo, wgmma_kind, ctx.heur)
                                                                     : "";
           !conv_why.empty())
    why_not_wgmma = conv_why;
  else if (a.op == OpKind::Conv2d && ctx.heur.mainloop == "auto" && !ctx.heur.wgmma && geo.n <= kMaxNForMmaConv)
    // wgmma tiles are 64 columns or more: Cout=8 (dX of a conv with Cin=8) would compute 8x the outputs
    why_not_wgmma = "Cout=" + std::to_string(geo.n) + " fills a fraction of a 64-column wgmma tile (mma.sync "
                    "tiles are narrower)";
  else if (const int eb = sixteen_bit ? 2 : 4; a.op != OpKind::Conv2dWeightGrad && (geo.k * eb) % 16)  // (a dW: pixels)
    why_not_wgmma = "TMA needs rows of a multiple of 16 bytes and K=" + std::to_string(geo.k) + " gives " +
                    std::to_string(geo.k * eb);
  else if (a.op == OpKind::Matmul && sixteen_bit && (geo.n * eb) % 16)
    why_not_wgmma = "TMA needs rows of a multiple of 16 bytes and B's N=" + std::to_string(geo.n) + " gives " +
                    std::to_string(geo.n * eb);
  else if (const MmaConfig split = with_split_k(ctx, geo, wgmma_kind, 0, default_mma_tile(geo, 0));
           a.op != OpKind::Conv2d && wgmma_kind == "f32x3" && ctx.heur.mainloop == "auto" && !ctx.heur.wgmma &&
           split.split_k > 1 &&
           ((flatten_batch_rows(geo).m < kMinRowsFor3xTf32Wgmma && geo.k < kMinKFor3xTf32WgmmaSplit) ||
            flatten_batch_rows(geo).m <= kMaxRowsFor3xTf32Mma ||
            (flatten_batch_rows(geo).m * geo.n <= kMaxOutputForDeep3xTf32Mma && geo.k >= kMinKForDeep3xTf32Mma)))
    // H100, fusejit run, split-K vs wgmma from the staging kernel (bench/results/probe_small_fp32_h100.log):
    // 100x1000x500 0.024 vs 0.026 ms, 256x4096x512 0.055 vs 0.065, 32x8192x1024 0.074 vs 0.126, but
    // 512x1024x1024 0.060 vs 0.027. bf16 and tf32 stay on wgmma (mma.sync split-K was 1.2-2x slower there).
    // Since wgmma splits K too (bench_gemm_*_20261125-000219_fp32_wgmma_split.md, mma.sync split-K vs wgmma
    // split-K): 100x1000x500 0.0141 vs 0.0206 ms, 256x4096x512 0.0488 vs 0.0368, 32x8192x1024 0.0634 vs 0.0643.
    // H100, 3xTF32 linear, mma.sync 64x32 split-K vs wgmma split-K after the residual-split kernel:
    // [64, 8258048] x [72, 8258048] (seed 3's conv dW) 3.35 vs 7.61 ms; [128, 2032128] x [576, 2032128]
    // (seed 1's) 9.36 vs 14.43 ms.
    why_not_wgmma = "3xTF32 on a small grid: mma.sync with split-K " + std::to_string(split.split_k) +
                    " over K=" + std::to_string(geo.k) + " fills more SMs" +
                    (geo.k >= kMinKForDeep3xTf32Mma ? " and splits the operands in registers (no residual-split kernel over them)" : "");
  if (why_not_wgmma.empty()) {
    kp.mainloop = Mainloop::Wgmma;
    kp.mma_kind = wgmma_kind;
    if (a.op == OpKind::Conv2d) {
      kp.notes.push_back("mainloop: wgmma " + kp.mma_kind + " (" + kind_text(kp.mma_kind) +
                         "), implicit GEMM over patches of output pixels: a staging kernel writes x in NHWC and w "
                         "as [Cout][KH][KW][Cin] first" + (kp.mma_kind == "f32x3" ? ", with their TF32 residuals" : "") +
                         ", then 4-D TMA boxes per kernel tap, warp-specialized, persistent");
      return Status::success();
    }
    if (a.op == OpKind::Conv2dWeightGrad && kp.mma_kind == "tf32") {  // swap-AB: x in place (wgrad_swap_ab.cuh)
      kp.notes.push_back("mainloop: wgmma tf32 (" + std::string(kind_text(kp.mma_kind)) + "), dW as a GEMM over the "
                         "output pixels, swap-AB: grad's 4-D TMA boxes as wgmma's B (K-major), x's rows read in "
                         "place by TMA and into registers at each tap's shift as wgmma's A, warp-specialized, "
                         "persistent");
      return Status::success();
    }
    if (a.op == OpKind::Conv2dWeightGrad) {  // x staged to NHWC (pass_buffers.cpp)
      kp.wgrad_nhwc = true;
      kp.notes.push_back("mainloop: wgmma " + kp.mma_kind + " (" + kind_text(kp.mma_kind) + "), dW as a GEMM over "
                         "the output pixels: grad's 4-D TMA boxes (A, K-major), x in NHWC from a staging kernel "
                         "(B, N-major, a box per kernel tap and 64 channels), warp-specialized, persistent");
      return Status::success();
    }
    // (an fp32 B [K, N]: how it is read is the tile's choice, noted by choose_wgmma_tile)
    const char* b_read = a.op == OpKind::Matmul && sixteen_bit ? " (B [K, N] read N-major)" : "";
    kp.notes.push_back("mainloop: wgmma " + kp.mma_kind + " (" + kind_text(kp.mma_kind) + "), TMA loads" + b_read +
                       ", warp-specialized, persistent");
    if (kp.mma_kind == "f32x3")
      kp.notes.push_back("operands: a split kernel first writes each operand's TF32 residual (x - x truncated to "
                         "TF32) to scratch; each stage loads both operands and their residuals");
    return Status::success();
  }
  if (ctx.heur.mainloop == "wgmma") return Error("codegen config: mainloop=wgmma, but " + why_not_wgmma);
  // Then mma.sync (sm_80+): conv2d's im2col gather, linear / matmul by dense cp.async copies.
  why.clear();
  if (!sm80_up)
    why = "the target is " + ctx.arch + ", and mma.sync needs sm_80 or newer";
  else
    kind = mma_kind(ctx.g, a, why);
  // conv2d with few channels per group: the patches' input halo in shared
  // memory (conv_patch.cuh) instead of the im2col gather.
  std::string why_not_patch;
  if (!kind.empty() && a.op == OpKind::Conv2d) {
    why_not_patch = conv_patch_blocker(geo, kind == "bf16" || kind == "f16" ? 2 : 4);
    if (ctx.heur.conv_patch == false) why_not_patch = "conv_patch=0 in the config";
    // Strided: each input pixel feeds fewer outputs, so the halo's reuse is lower and the
    // gather wins (H100, ResNet stem k7 s2 Cin 3: bf16 0.38 vs 0.56 ms, tf32 0.42 vs 0.53).
    if (!ctx.heur.conv_patch.has_value() && why_not_patch.empty() && (geo.sh > 1 || geo.sw > 1))
      why_not_patch = "a strided conv (the gather measured faster; conv_patch=1 forces patches)";
    if (ctx.heur.conv_patch == true && !why_not_patch.empty())
      return Error("codegen config: conv_patch=1, but " + why_not_patch);
    kp.conv_patch = why_not_patch.empty();
  }
  // 3xTF32 runs three mmas per product and the gather is the same: with a
  // short K (little reuse per gathered element) FFMA is faster (H100, seed 3,
  // K=72: 5.59 vs 4.19 ms; seed 1, K=576: 7.57 vs 9.91 ms).
  if (kind == "f32x3" && a.op == OpKind::Conv2d && ctx.heur.mainloop == "auto" && !kp.conv_patch &&
      geo.k < kMinKFor3xTf32Conv) {
    kp.notes.push_back("mainloop: SIMT FFMA, not mma.sync 3xTF32: K=" + std::to_string(geo.k) + " is below " +
                       std::to_string(kMinKFor3xTf32Conv) + ", where FFMA is faster (mainloop=mma forces it)");
    return Status::success();
  }
  if (kind.empty()) {
    if (ctx.heur.mainloop == "mma") return Error("codegen config: mainloop=mma, but " + why);
    kp.notes.push_back("mainloop: SIMT FFMA, not mma.sync: " + why);
    return Status::success();
  }
  kp.mainloop = Mainloop::Mma;
  kp.mma_kind = kind;
  std::string why_not_nhwc;
  if (a.op == OpKind::Conv2dWeightGrad) {
    why_not_nhwc = wgrad_nhwc_blocker(geo, kind == "bf16" || kind == "f16" ? 2 : 4, ctx.heur);
    if (ctx.heur.wgrad_nhwc == true && !why_not_nhwc.empty())
      return Error("codegen config: wgrad_nhwc=1, but " + why_not_nhwc);
    if (ctx.heur.wgrad_nhwc == false) why_not_nhwc = "wgrad_nhwc=0 in the config";
    // fp32 operands: B [pixels][columns] goes through scalar shared loads (no 32-bit ldmatrix.trans), and
    // the gather is faster (H100, seed 1's dW: tf32 2.48 vs 2.84 ms, 3xTF32 6.91 vs 7.25; seed 3's: tf32
    // 1.39 vs 1.46). 16-bit: 8 element loads a chunk become one cp.async (bf16 2.00 -> 1.53 ms, seed 3
    // 1.10 -> 1.00, the staging kernel included).
    else if (why_not_nhwc.empty() && !ctx.heur.wgrad_nhwc && kind != "bf16" && kind != "f16")
      why_not_nhwc = "fp32 operands gather faster from NCHW (wgrad_nhwc=1 forces it)";
    kp.wgrad_nhwc = why_not_nhwc.empty();
  }
  std::string halo_channels = "every channel";
  if (kp.conv_patch) {
    const int eb = kind == "bf16" || kind == "f16" ? 2 : 4, per_block = conv_patch_block_chunks(geo, eb) * (16 / eb);
    if (per_block < geo.cin / geo.groups) halo_channels = "blocks of " + std::to_string(per_block) + " channels";
  }
  const std::string staging =
      kp.conv_patch ? "tiles are patches of output pixels whose input halo (" + halo_channels +
                          ") each block copies to shared memory once, the im2col in ldmatrix addresses; filters "
                          "copied once per block"
      : a.op == OpKind::Conv2d ? "im2col gather by cp.async into a shared-memory ring" +
                                     (why_not_patch.empty() ? "" : " (not from halo patches: " + why_not_patch + ")")
      : a.op == OpKind::Conv2dWeightGrad && kp.wgrad_nhwc
          ? "grad's channel planes (A, read in place) and x in NHWC (B [pixels][(kh, kw, ci)]: a staging kernel "
            "writes x in NHWC first, then 16-byte copies of a tap's channels at each pixel) copied by cp.async into "
            "a shared-memory ring"
      : a.op == OpKind::Conv2dWeightGrad
          ? "grad's channel planes (A, read in place) and x's im2col rows (B, gathered per (ci, kh, kw) from the "
            "loader's addresses: no im2col buffer; not from x in NHWC: " + why_not_nhwc +
            ") copied by cp.async into a shared-memory ring"
      : a.op == OpKind::Matmul ? "A [M, K] and B [K, N] copied by cp.async into a shared-memory ring"
                               : "x [M, K] and W [N, K] copied by cp.async into a shared-memory ring";
  kp.notes.push_back("mainloop: mma.sync " + kind + " (" + kind_text(kind) + "), " + staging +
                     (a.op == OpKind::Conv2d && ctx.arch != "sm_90a" ? "" : " (not wgmma: " + why_not_wgmma + ")"));
  return Status::success();
}

}  // namespace fusejit::cg
