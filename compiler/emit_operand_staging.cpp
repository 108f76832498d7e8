// Emitter for the operand staging kernel (templates/operand_staging.cuh),
// launched before a wgmma anchor that needs it: 3xTF32 (f32x3) reads each
// operand's TF32 residual (x - x truncated to TF32, rounded to nearest), and
// an fp32 matmul B [K, N] is read transposed, [N, K] (tf32 wgmma reads K-major
// B only); conv2d reads x in NHWC and w as [Cout][KH][KW][Cin]; an mma.sync
// conv2d_weight_grad (wgrad_nhwc) reads x in NHWC. One kernel
// writes all of it to the plan's scratch.
#include <algorithm>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {

// (conv_nchw: x is split by the conv's producer, w's residual still staged)
bool needs_tf32_split(const KernelPlan& kp) { return (kp.residual_a >= 0 || kp.conv_nchw) && kp.residual_b >= 0; }
bool needs_operand_staging(const KernelPlan& kp) {
  return needs_tf32_split(kp) || kp.b_transposed >= 0 || kp.a_staged >= 0 || kp.grad_padded >= 0;
}

namespace {

constexpr int kStagingThreads = 256;

// The staging kernel from its run() body: a launch of `blocks` blocks of
// kStagingThreads, marked as operand staging.
EmittedKernel finish_staging(KernelEmitter& em, const std::string& name, std::vector<std::string> body,
                             int64_t blocks) {
  KernelSource& s = em.src();
  CudaFunction fn;
  fn.comment = "block-stride loops over each job's share of the grid";
  fn.prefix = "__device__ __forceinline__ void";
  fn.name = "run";
  fn.params = "const Params& p";
  fn.body = std::move(body);
  s.functions.push_back(fn);
  EmittedKernel out;
  out.launch.kernel = name;
  out.launch.block = {kStagingThreads, 1, 1};
  out.launch.grid = {static_cast<unsigned>(blocks), 1, 1};
  out.launch.operand_staging = true;
  out.launch.args = em.finish(name, kStagingThreads, {s.ns + "::run(p);"});
  out.source = std::move(em.src());
  return out;
}

// conv2d on wgmma (conv_wgmma.cuh): w [Cout][Cin][KH*KW] -> [Cout][KH*KW][Cin]
// by the first blocks, x [N][Cin][H*W] -> NHWC by the rest (3xTF32: with
// their residuals), each a batched transpose through 32 x 64 tiles (16-bit
// x: 64 x 64 tiles with 16-byte accesses, fj::transpose16_wide).
// conv2d_weight_grad on mma.sync (conv_wgrad.cuh, MmaWgradNhwc): x alone.
Expected<EmittedKernel> emit_conv_staging(const PlanContext& ctx, const Plan& plan, int anchor) {
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(anchor)];
  const bool split = needs_tf32_split(kp), weights = kp.b_transposed >= 0;
  const Node& a = ctx.g.node(kp.root);
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  const bool grad = kp.grad_padded >= 0;  // a wgmma dW's grad, rows padded (x in NHWC too with wgrad_nhwc)
  const std::string name = grad              ? (kp.a_staged >= 0 ? "fj_x_nhwc_grad_rows_padded" : "fj_grad_rows_padded")
                           : !weights        ? "fj_x_nhwc"
                           : kp.a_staged < 0   ? (split ? "fj_split_tf32_conv_weights_khwc" : "fj_conv_weights_khwc")
                           : split             ? "fj_split_tf32_conv_operands_nhwc"
                                               : "fj_conv_operands_nhwc";
  KernelEmitter em(ctx, plan, anchor);
  KernelSource& s = em.src();
  s.ns = "staging";
  s.comment = name + ": " +
              (grad ? (kp.a_staged >= 0 ? ctx.g.describe(a.operands[0]) + " in NHWC and " : std::string()) +
                          ctx.g.describe(a.operands[1]) + " with rows of " + std::to_string(kp.grad_pitch) + " elements"
               : kp.a_staged < 0 ? ctx.g.describe(a.operands[1]) + " as [Cout][KH][KW][Cin]"
                               : ctx.g.describe(a.operands[0]) + " in NHWC" +
                                     (weights ? " and " + ctx.g.describe(a.operands[1]) + " as [Cout][KH][KW][Cin]"
                                              : std::string())) +
              (split ? ", with their TF32 residuals," : "") + " for " + kp.name;
  const int64_t taps = geo.kh * geo.kw, pixels = geo.h * geo.w;
  if (weights || kp.a_staged >= 0) {  // (a dW's grad alone: none of these)
    s.constants.push_back({"kBatch", geo.batch_n, "images"});
    s.constants.push_back({"kCin", geo.cin, "input channels"});
    s.constants.push_back({"kPixels", pixels, "H * W"});
  }
  auto tiles = [](int64_t batches, int64_t r, int64_t c) { return batches * ((r + 31) / 32) * ((c + 63) / 64); };
  const int64_t cap = 16 * sm_count_guess(ctx.arch);  // about 16 blocks per SM at most for each
  const int64_t w_blocks = weights ? std::clamp<int64_t>((tiles(geo.cout, geo.cin, taps) + 3) / 4, 1, cap) : 0;
  const bool x_staged = kp.a_staged >= 0;  // not with conv_nchw (the conv's producer reads NCHW x)
  const int64_t x_blocks = x_staged ? std::clamp<int64_t>((tiles(geo.batch_n, geo.cin, pixels) + 3) / 4, 1, cap) : 0;
  auto scratch = [&](int index) { return em.buffer_param({BufferKind::Scratch, index}, true); };
  const std::string T = ctype(ctx.g.node(a.operands[0]).type.dtype);
  auto staged = [&](int index) {  // scratch parameters are float*: 16-bit operands stay 16-bit
    return T == "float" ? scratch(index) : "reinterpret_cast<" + T + "*>(" + scratch(index) + ")";
  };
  const std::string residual = split ? "true" : "false";
  auto lo = [&](int index) { return split ? scratch(index) : std::string("nullptr"); };
  std::vector<std::string> body;
  if (weights) {
    s.constants.push_back({"kCout", geo.cout, "output channels"});
    s.constants.push_back({"kTaps", taps, "KH * KW"});
    s.constants.push_back({"kWeightBlocks", w_blocks, "blocks that reorder w (the first)"});
    body = {"if (blockIdx.x < kWeightBlocks) {  // w [Cout][Cin][KH*KW] -> [Cout][KH*KW][Cin]",
            "fj::transpose_batched<" + residual + ", " + T + ">(" + em.load_param(a.operands[1]) + ", " +
                staged(kp.b_transposed) + ", " + lo(kp.residual_b) +
                ", kCout, kCin, kTaps, blockIdx.x, kWeightBlocks);",
            "return;", "}"};
  }
  // A wgmma dW's grad [N*Cout*OH][OW] -> rows of grad_pitch, by the last blocks (the widest unit dividing a row)
  int64_t grad_blocks = 0;
  int grad_unit = 0;
  if (grad) {
    const int64_t eb = dtype_size(ctx.g.node(a.operands[1]).type.dtype), row_bytes = geo.ow * eb;
    const int unit = grad_unit = row_bytes % 8 == 0 ? 8 : row_bytes % 4 == 0 ? 4 : 2;
    const char* u = unit == 8 ? "unsigned long long" : unit == 4 ? "unsigned" : "unsigned short";
    const int64_t rows = geo.batch_n * geo.cout * geo.oh;
    s.constants.push_back({"kGradRows", rows, "N * Cout * OH"});
    grad_blocks = std::clamp<int64_t>((rows * kp.grad_pitch * eb / unit + 8 * kStagingThreads - 1) / (8 * kStagingThreads), 1, cap);
    s.constants.push_back({"kGradBlocks", grad_blocks, "blocks that pad grad's rows (the last)"});
    const std::string src = em.load_param(a.operands[1]);
    const std::string copy = std::string("fj::pad_rows<") + u + ", " + std::to_string(row_bytes / unit) + ", " +
                             std::to_string(kp.grad_pitch * eb / unit) + ">(reinterpret_cast<const " + u + "*>(" + src +
                             "), reinterpret_cast<" + u + "*>(" + scratch(kp.grad_padded) +
                             "), kGradRows, blockIdx.x - (gridDim.x - kGradBlocks), kGradBlocks);";
    body.insert(body.begin(), {"if (blockIdx.x >= gridDim.x - kGradBlocks) {  // grad's rows padded with zeros to a "
                               "TMA stride", copy, "return;", "}"});
  }
  auto finish = [&](int64_t blocks) {  // grad's rows copied in units of grad_unit bytes: its address a multiple
    EmittedKernel out = finish_staging(em, name, std::move(body), blocks);
    if (grad_unit > 2) out.launch.aligned.push_back({plan.buffer.at(a.operands[1]), grad_unit});
    return out;
  };
  if (!x_staged) return finish(w_blocks + grad_blocks);
  const std::string first = weights ? "blockIdx.x - kWeightBlocks" : "blockIdx.x";
  const std::string count = std::string(weights ? "gridDim.x - kWeightBlocks" : "gridDim.x") +
                            (grad ? " - kGradBlocks" : "");
  body.push_back("// x [N][Cin][H*W] -> [N][H*W][Cin]");
  const std::string x = em.load_param(a.operands[0]);
  const std::string args = ", " + staged(kp.a_staged) + ", " + lo(kp.residual_a) + ", kBatch, kCin, kPixels, " +
                           first + ", " + count + ");";
  if (T == "float") {  // 4-byte accesses already move whole 128-byte lines a warp (the wide form measured no faster)
    body.push_back("fj::transpose_batched<" + residual + ", " + T + ">(" + x + args);
  } else {  // 16-bit: wide loads along the pixels and stores along the channels where they divide and x is aligned
    auto widest = [](int64_t n) { return n % 8 == 0 ? 8 : n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1; };
    const int vl = widest(pixels), vs = widest(geo.cin);
    if (vl > 1) body.push_back("if (fj::aligned_to<" + std::to_string(2 * vl) + ">(" + x + "))");
    const std::string pre = ctx.heur.staging_prefetch ? ", true" : "";  // staging_prefetch=1
    body.push_back("  fj::transpose16_wide<" + std::to_string(vl) + ", " + std::to_string(vs) + pre + ">(" + x + ", " +
                   staged(kp.a_staged) + ", kBatch, kCin, kPixels, " + first + ", " + count + ");");
    if (vl > 1) {  // x itself not aligned to vl elements (a view at an odd offset): element-wide loads
      body.push_back("else");
      body.push_back("  fj::transpose16_wide<1, " + std::to_string(vs) + ">(" + x + ", " + staged(kp.a_staged) +
                     ", kBatch, kCin, kPixels, " + first + ", " + count + ");");
    }
  }
  return finish(w_blocks + x_blocks + grad_blocks);
}

}  // namespace

Expected<EmittedKernel> emit_operand_staging_kernel(const PlanContext& ctx, const Plan& plan, int anchor) {
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(anchor)];
  if (!needs_operand_staging(kp)) return Error("codegen: kernel " + std::to_string(anchor) + " stages no operands");
  if (kp.a_staged >= 0 || kp.conv_nchw || kp.grad_padded >= 0) return emit_conv_staging(ctx, plan, anchor);
  const bool split = needs_tf32_split(kp), transpose = kp.b_transposed >= 0;
  const Node& a = ctx.g.node(kp.root);
  const AnchorGeometry geo = flatten_batch_rows(analyze_anchor(ctx.g, kp.root));
  const std::string name = std::string("fj") + (split ? "_split_tf32_operands" : "") + (transpose ? "_transpose_b" : "");
  KernelEmitter em(ctx, plan, anchor);
  KernelSource& s = em.src();
  s.ns = "staging";
  s.comment = name + ": " + (split ? "the TF32 residuals of " + ctx.g.describe(a.operands[0]) + " and " +
                                         ctx.g.describe(a.operands[1])
                                   : std::string()) +
              (split && transpose ? ", and " : "") +
              (transpose ? ctx.g.describe(a.operands[1]) + " transposed to [N, K]" : std::string()) + " for " + kp.name;
  s.constants.push_back({"kM", geo.m, "A's rows"});
  s.constants.push_back({"kN", geo.n, "B's columns"});
  s.constants.push_back({"kK", geo.k, "reduction length"});
  auto param = [&](BufferRef b, bool write) { return em.buffer_param(b, write); };
  auto scratch = [&](int index) { return param({BufferKind::Scratch, index}, true); };
  auto f4 = [](const std::string& e, bool write) {
    return std::string("reinterpret_cast<") + (write ? "" : "const ") + "float4*>(" + e + ")";
  };
  const std::string x = em.load_param(a.operands[0]), w = em.load_param(a.operands[1]);
  // Rows of 16-byte multiples (the wgmma path's condition): residuals by whole float4s.
  int64_t vectors = 0;      // float4s of residuals done by grid-stride blocks
  int64_t b_tiles = 0;      // 32 x 64 tiles of B to transpose
  std::vector<std::string> body;
  if (transpose) {
    b_tiles = ((geo.k + 31) / 32) * ((geo.n + 63) / 64);
    const std::string lo = split ? scratch(kp.residual_b) : "nullptr";
    body.push_back(std::string("// the first blocks: B [K, N] -> [N, K]") + (split ? ", with its residuals" : ""));
    body.push_back("if (blockIdx.x < kTransposeBlocks) {");
    body.push_back("fj::transpose_batched<" + std::string(split ? "true" : "false") + ">(" + w + ", " +
                   scratch(kp.b_transposed) + ", " + lo + ", 1, kK, kN, blockIdx.x, kTransposeBlocks);");
    body.push_back("return;");
    body.push_back("}");
  }
  if (split) {
    vectors = geo.m * geo.k / 4 + (transpose ? 0 : geo.n * geo.k / 4);
    s.constants.push_back({"kAVectors", geo.m * geo.k / 4, "float4s of A"});
    const std::string first = transpose ? "blockIdx.x - kTransposeBlocks" : "blockIdx.x";
    const std::string count = transpose ? "gridDim.x - kTransposeBlocks" : "gridDim.x";
    body.push_back("fj::tf32_residuals(" + f4(x, false) + ", " + f4(scratch(kp.residual_a), true) + ", kAVectors, " +
                   first + ", " + count + ");");
    if (!transpose) {
      s.constants.push_back({"kBVectors", geo.n * geo.k / 4, "float4s of B"});
      body.push_back("fj::tf32_residuals(" + f4(w, false) + ", " + f4(scratch(kp.residual_b), true) +
                     ", kBVectors, " + first + ", " + count + ");");
    }
  }
  // About 8 float4s per thread for the residuals, one block per 4 tiles of B,
  // at most 16 blocks per SM of the usual part for each.
  const int64_t cap = 16 * sm_count_guess(ctx.arch);
  const int64_t transpose_blocks = transpose ? std::clamp<int64_t>((b_tiles + 3) / 4, 1, cap) : 0;
  const int64_t split_blocks = split ? std::clamp<int64_t>((vectors + 8 * kStagingThreads - 1) / (8 * kStagingThreads), 1, cap) : 0;
  if (transpose) s.constants.push_back({"kTransposeBlocks", transpose_blocks, "blocks that transpose B (the first)"});
  EmittedKernel out = finish_staging(em, name, std::move(body), transpose_blocks + split_blocks);
  if (split)  // float4 copies
    for (const BufferRef& b : out.launch.args)
      if (b != plan.buffer.at(a.operands[1]) || !transpose) out.launch.aligned.push_back({b, 16});
  return out;
}

}  // namespace fusejit::cg
