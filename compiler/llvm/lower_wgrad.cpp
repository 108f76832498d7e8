// conv2d_weight_grad on the CPU: one work item per (output channel co, input
// channel ci of its group), i.e. the KH x KW taps dW[co, ci, :, :]:
//   dW[co, ci, kh, kw] = sum over images, oh, ow of grad[img, co, oh, ow] *
//                        x[img, g*CinG + ci, oh*SH - PH + kh*DH, ow*SW - PW + kw*DW]
// For each (image, output row, tap) a loop over the output columns whose
// input column lies in the image (bounds fixed per tap at compile time; rows
// outside it are skipped), its partial sum added to the tap's total: loads
// contiguous along ow for stride 1, so LLVM vectorizes the loop. The kernel's
// epilogue tree then runs at each tap. No packing and no register blocking
// across output channels: the grad row is read once per tap from L1 — a
// correct, simple kernel, not a tuned GEMM (a backward program built for the
// CPU writes dW as im2col + the packed linear instead: docs/cpu.md).
#include "compiler/llvm/lower.h"

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

  KernelFunction kf(lc, kp.name.empty() ? "fj_cpu_conv2d_weight_grad" : kp.name);
  const std::string width = std::to_string(32 * lc.lanes);
  kf.fn()->addFnAttr("min-legal-vector-width", width);
  kf.fn()->addFnAttr("prefer-vector-width", width);
  llvm::IRBuilder<>& b = kf.b();
  auto c = [&](int64_t v) { return kf.i64(v); };
  auto add = [&](Value* a, Value* v) { return b.CreateAdd(a, v); };
  auto mul = [&](Value* a, int64_t v) { return b.CreateMul(a, c(v)); };

  // Output columns [lo, hi) of tap column kw whose input column lies in the image.
  struct Span {
    int64_t lo, hi;
  };
  std::vector<Span> spans;
  for (int64_t kw = 0; kw < geo.kw; ++kw) {
    const int64_t shift = kw * geo.dw - geo.pw;  // iw = ow*SW + shift
    const int64_t lo = std::max<int64_t>(0, -floor_div(shift, geo.sw));  // ceil(-shift / SW)
    const int64_t hi = std::min<int64_t>(geo.ow, floor_div(geo.w - 1 - shift, geo.sw) + 1);
    spans.push_back({lo, hi});
  }

  std::vector<Value*> acc;  // one total per tap, on the stack (SROA keeps them in registers)
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* item) {
    Value* co = b.CreateUDiv(item, c(cin_g), "co");
    Value* ci = b.CreateURem(item, c(cin_g), "ci");
    Value* group = b.CreateUDiv(co, c(cout_g), "group");
    Value* x_channel = add(mul(group, cin_g), ci);  // x's channel
    acc.clear();
    for (int64_t t = 0; t < geo.kh * geo.kw; ++t) acc.push_back(kf.local(kf.f32(0), "acc"));
    kf.loop(0, geo.batch_n, 1, [&](Value* img) {
      Value* grad_plane = mul(add(mul(img, geo.cout), co), geo.oh * geo.ow);
      Value* x_plane = mul(add(mul(img, geo.cin), x_channel), geo.h * geo.w);
      kf.loop(0, geo.oh, 1, [&](Value* oh) {
        Value* grad_row = add(grad_plane, mul(oh, geo.ow));
        for (int64_t kh = 0; kh < geo.kh; ++kh) {
          Value* ih = add(mul(oh, geo.sh), c(kh * geo.dh - geo.ph));
          Value* inside = b.CreateICmpULT(ih, c(geo.h), "row.inside");  // 0 <= ih < H
          kf.if_then(inside, [&] {
            Value* x_row = add(x_plane, mul(ih, geo.w));
            for (int64_t kw = 0; kw < geo.kw; ++kw) {
              const Span s = spans[static_cast<size_t>(kw)];
              if (s.lo >= s.hi) continue;
              Value* partial = kf.local(kf.f32(0), "partial");
              Value* x_tap = add(x_row, c(kw * geo.dw - geo.pw));
              kf.loop(s.lo, s.hi, 1, [&](Value* ow) {
                Value* g = kf.load_f32(grad_ref, add(grad_row, ow));
                Value* xv = kf.load_f32(x_ref, add(x_tap, mul(ow, geo.sw)));
                Value* sum = sum_add(b, b.CreateLoad(kf.f32_type(), partial), b.CreateFMul(g, xv));
                b.CreateStore(sum, partial);
              }, "ow");
              Value* a = acc[static_cast<size_t>(kh * geo.kw + kw)];
              b.CreateStore(b.CreateFAdd(b.CreateLoad(kf.f32_type(), a), b.CreateLoad(kf.f32_type(), partial)), a);
            }
          });
        }
      }, "oh");
    }, "img");
    for (int64_t kh = 0; kh < geo.kh; ++kh)
      for (int64_t kw = 0; kw < geo.kw; ++kw)
        emit_tree(kf, tree, {co, ci, c(kh), c(kw)},
                  b.CreateLoad(kf.f32_type(), acc[static_cast<size_t>(kh * geo.kw + kw)]));
  }, "item");

  const int64_t items = geo.cout * cin_g;
  return kf.finish(items, 1,
                   "conv2d_weight_grad: " + std::to_string(items) + " (output channel, input channel) items of " +
                       std::to_string(geo.kh) + "x" + std::to_string(geo.kw) + " taps over K = " +
                       std::to_string(geo.batch_n * geo.oh * geo.ow) + " (a dot product per tap, vectorized along ow)");
}

}  // namespace fusejit::cg::cpu
