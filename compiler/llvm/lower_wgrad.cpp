// conv2d_weight_grad on the CPU:
//   dW[co, ci, kh, kw] = sum over images, oh, ow of grad[img, co, oh, ow] *
//                        x[img, g*CinG + ci, oh*SH - PH + kh*DH, ow*SW - PW + kw*DW]
// One work item per (group, block of R output channels, input channel ci,
// tap row kh): R x KW vector accumulators, one lane per output column of a
// chunk of `lanes`. Per chunk of an output row: R grad vectors and KW x
// vectors (masked loads, zero outside the image; a gather for SW > 1), R x KW
// FMAs. The partial sums go into the totals after each image (bounded
// partial sums), and after the last the lanes are summed and the kernel's
// epilogue tree runs at each tap. Not a packed GEMM: a backward program built
// for the CPU writes dW as im2col + the packed linear instead (docs/cpu.md).
#include <algorithm>

#include <llvm/IR/Intrinsics.h>

#include "compiler/llvm/lower.h"
#include "compiler/llvm/lower_anchor.h"

namespace fusejit::cg::cpu {

namespace {

using llvm::Value;

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

Expected<CpuLaunch> lower_wgrad_kernel(LowerContext& lc, int index) {
  const KernelPlan& kp = lc.plan.kernels.at(static_cast<size_t>(index));
  const Node& an = lc.pc.g.node(kp.root);
  if (an.op != OpKind::Conv2dWeightGrad)
    return Error("cpu codegen: internal error: kernel " + std::to_string(index) + " is no conv2d_weight_grad");
  if (!kp.tails.empty())
    return Error("cpu codegen: internal error: the CPU conv2d_weight_grad kernel cannot fuse " +
                 lc.pc.g.describe(kp.tails[0].op));
  const AnchorGeometry geo = analyze_anchor(lc.pc.g, kp.root);
  const int64_t cin_g = geo.cin / geo.groups, cout_g = geo.cout / geo.groups;
  const BufferRef x_ref = lc.plan.buffer.at(an.operands[0]), grad_ref = lc.plan.buffer.at(an.operands[1]);
  const EpilogueTree tree = build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, -1, true);
  const int lanes = lc.lanes;
  // Output channels per item: R x KW accumulators, R grad and KW x vectors within the registers.
  const int64_t rows = std::clamp<int64_t>((lc.vector_regs - 2 - geo.kw) / (geo.kw + 1), 1, 4);
  const int64_t r_blocks = (cout_g + rows - 1) / rows;
  const int64_t items = geo.groups * r_blocks * cin_g * geo.kh;

  KernelFunction kf(lc, kp.name.empty() ? "fj_cpu_conv2d_weight_grad" : kp.name);
  const std::string width = std::to_string(32 * lanes);
  kf.fn()->addFnAttr("min-legal-vector-width", width);
  kf.fn()->addFnAttr("prefer-vector-width", width);
  llvm::IRBuilder<>& b = kf.b();
  auto c = [&](int64_t v) { return kf.i64(v); };
  auto add = [&](Value* a, Value* v) { return b.CreateAdd(a, v); };
  auto mul = [&](Value* a, int64_t v) { return b.CreateMul(a, c(v)); };
  auto* f32v = llvm::FixedVectorType::get(kf.f32_type(), static_cast<unsigned>(lanes));
  llvm::Function* fma = llvm::Intrinsic::getDeclaration(&lc.module, llvm::Intrinsic::fma, {f32v});
  std::vector<llvm::Constant*> iota_c;
  for (int l = 0; l < lanes; ++l) iota_c.push_back(b.getInt32(static_cast<uint32_t>(l)));
  Value* iota = llvm::ConstantVector::get(iota_c);
  auto splat32 = [&](Value* v) { return b.CreateVectorSplat(static_cast<unsigned>(lanes), v); };
  auto splat_i = [&](int64_t v) { return splat32(b.getInt32(static_cast<uint32_t>(v))); };

  // `lanes` elements of a buffer from `offset` (lanes under `mask`; 0 elsewhere), as f32.
  auto load_vec = [&](BufferRef ref, Value* offset, Value* mask) {
    const DType dt = kf.buffer_dtype(ref);
    llvm::FixedVectorType* vt = raw_vector(kf, dt, lanes);
    Value* at = b.CreateBitCast(b.CreateGEP(vt->getElementType(), kf.buffer(ref), offset), vt->getPointerTo());
    return widen_to_f32(kf, dt, b.CreateMaskedLoad(vt, at, llvm::Align(dt == DType::F32 ? 4 : 2), mask,
                                                   llvm::Constant::getNullValue(vt)),
                        lanes);
  };
  // The same at offset + ow * stride for each lane's ow (a gather).
  auto gather_vec = [&](BufferRef ref, Value* offset, Value* ow, int64_t stride, Value* mask) {
    const DType dt = kf.buffer_dtype(ref);
    llvm::FixedVectorType* vt = raw_vector(kf, dt, lanes);
    Value* idx = b.CreateAdd(b.CreateVectorSplat(static_cast<unsigned>(lanes), offset),
                             b.CreateMul(b.CreateSExt(ow, llvm::FixedVectorType::get(b.getInt64Ty(), lanes)),
                                         b.CreateVectorSplat(static_cast<unsigned>(lanes), c(stride))));
    Value* ptrs = b.CreateGEP(vt->getElementType(), kf.buffer(ref), idx);
    return widen_to_f32(kf, dt, b.CreateMaskedGather(vt, ptrs, llvm::Align(dt == DType::F32 ? 4 : 2), mask,
                                                     llvm::Constant::getNullValue(vt)),
                        lanes);
  };

  // Output columns [lo, hi) of tap column kw whose input column lies in the image.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t kw = 0; kw < geo.kw; ++kw) {
    const int64_t shift = kw * geo.dw - geo.pw;  // iw = ow*SW + shift
    spans.push_back({std::max<int64_t>(0, -floor_div(shift, geo.sw)),
                     std::min<int64_t>(geo.ow, floor_div(geo.w - 1 - shift, geo.sw) + 1)});
  }

  std::vector<Value*> partial, total;  // [r * KW + kw], vector locals (SROA keeps the partials in registers)
  Value* zero = llvm::Constant::getNullValue(f32v);
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* item) {
    Value* kh = b.CreateURem(item, c(geo.kh), "kh");
    Value* rest = b.CreateUDiv(item, c(geo.kh));
    Value* ci = b.CreateURem(rest, c(cin_g), "ci");
    rest = b.CreateUDiv(rest, c(cin_g));
    Value* rb = b.CreateURem(rest, c(r_blocks), "rb");
    Value* group = b.CreateUDiv(rest, c(r_blocks), "group");
    Value* x_channel = add(mul(group, cin_g), ci);
    std::vector<Value*> co;  // the block's output channels (rows past the group's last read its last)
    for (int64_t r = 0; r < rows; ++r) {
      Value* m = add(mul(rb, rows), c(r));
      co.push_back(add(mul(group, cout_g), b.CreateSelect(b.CreateICmpULT(m, c(cout_g)), m, c(cout_g - 1))));
    }
    partial.clear();
    total.clear();
    for (int64_t j = 0; j < rows * geo.kw; ++j) total.push_back(kf.local(zero, "total"));
    for (int64_t j = 0; j < rows * geo.kw; ++j) partial.push_back(kf.local(zero, "partial"));
    Value* ih0 = b.CreateSub(mul(kh, geo.dh), c(geo.ph));
    kf.loop(0, geo.batch_n, 1, [&](Value* img) {
      for (Value* p : partial) b.CreateStore(zero, p);
      Value* x_plane = mul(add(mul(img, geo.cin), x_channel), geo.h * geo.w);
      kf.loop(0, geo.oh, 1, [&](Value* oh) {
        Value* ih = add(mul(oh, geo.sh), ih0);
        kf.if_then(b.CreateICmpULT(ih, c(geo.h)), [&] {  // 0 <= ih < H
          Value* x_row = add(x_plane, mul(ih, geo.w));
          kf.loop(c(0), c(geo.ow), lanes, [&](Value* c0) {
            Value* ow = b.CreateAdd(splat32(b.CreateTrunc(c0, b.getInt32Ty())), iota, "ow");
            Value* in_row = b.CreateICmpSLT(ow, splat_i(geo.ow));
            std::vector<Value*> g;
            for (int64_t r = 0; r < rows; ++r) {
              Value* grad_row = mul(add(mul(add(mul(img, geo.cout), co[static_cast<size_t>(r)]), geo.oh), oh), geo.ow);
              g.push_back(load_vec(grad_ref, add(grad_row, c0), in_row));
            }
            for (int64_t kw = 0; kw < geo.kw; ++kw) {
              const auto [lo, hi] = spans[static_cast<size_t>(kw)];
              if (lo >= hi) continue;
              Value* mask = b.CreateAnd(b.CreateICmpSGE(ow, splat_i(lo)), b.CreateICmpSLT(ow, splat_i(hi)));
              Value* tap = add(x_row, c(kw * geo.dw - geo.pw));
              Value* xv = geo.sw == 1 ? load_vec(x_ref, add(tap, c0), mask)
                                      : gather_vec(x_ref, tap, ow, geo.sw, mask);
              for (int64_t r = 0; r < rows; ++r) {
                Value* p = partial[static_cast<size_t>(r * geo.kw + kw)];
                b.CreateStore(b.CreateCall(fma, {g[static_cast<size_t>(r)], xv, b.CreateLoad(f32v, p)}), p);
              }
            }
          }, "ow");
        });
      }, "oh");
      for (size_t j = 0; j < total.size(); ++j)
        b.CreateStore(b.CreateFAdd(b.CreateLoad(f32v, total[j]), b.CreateLoad(f32v, partial[j])), total[j]);
    }, "img");
    for (int64_t r = 0; r < rows; ++r)
      kf.if_then(b.CreateICmpULT(add(mul(rb, rows), c(r)), c(cout_g)), [&] {
        for (int64_t kw = 0; kw < geo.kw; ++kw) {
          Value* v = b.CreateFAddReduce(kf.f32(0), b.CreateLoad(f32v, total[static_cast<size_t>(r * geo.kw + kw)]));
          llvm::FastMathFlags f;
          f.setAllowReassoc();
          llvm::cast<llvm::Instruction>(v)->setFastMathFlags(f);
          emit_tree(kf, tree, {co[static_cast<size_t>(r)], ci, kh, c(kw)}, v);
        }
      });
  }, "item");

  return kf.finish(items, 1,
                   "conv2d_weight_grad: " + std::to_string(items) + " items of " + std::to_string(rows) +
                       " output channels x 1 input channel x 1 x " + std::to_string(geo.kw) +
                       " taps, K = " + std::to_string(geo.batch_n * geo.oh * geo.ow) + " (" +
                       std::to_string(lanes) + "-lane FMAs along ow" + (geo.sw == 1 ? "" : ", x gathered") + ")");
}

}  // namespace fusejit::cg::cpu
