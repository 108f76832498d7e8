// The gather kernels: flip, im2col, insert_zeros and the backward of max / avg
// pooling (the backward program of conv2d and pooling), and their adjoints
// (im2col_backward, insert_zeros_backward, max_pool2d_double_backward). One thread an output element
// reads its operands at computed positions (templates/gather.cuh), then the
// fused elementwise consumers run on the value before the store.
#include <algorithm>
#include <functional>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {
namespace {

// An operand at a flat index (an expression): a load, or the leaf expression
// computed there (KernelEmitter::operand_at).
using Operand = std::function<std::string(const std::string& index)>;
Operand operand(KernelEmitter& em, ValueId v) {
  return [&em, v](const std::string& index) { return em.operand_at(v, index); };
}

// Windows that tile the input (MaxPool2d(k): stride = kernel, no padding or
// dilation): each element lies in at most one window.
bool tiling_windows(const Node& r) {
  const auto& k = r.attr_ints("kernel_size");
  const auto& st = r.attr_ints("stride");
  const auto& pd = r.attr_ints("padding");
  const auto& dl = r.attr_ints("dilation");
  return k == st && pd == std::vector<int64_t>{0, 0} && dl == std::vector<int64_t>{1, 1};
}

// max_pool2d_backward over tiling windows: a thread a window-sized cell of
// the input reads the window once, finds its first maximum, and writes the
// window's grad there and 0 at the cell's other elements (cells past the last
// window: 0 everywhere), each through the fused consumers.
Expected<EmittedKernel> emit_tiling_max_pool_backward(KernelEmitter& em, const KernelPlan& kp, const std::string& post) {
  const PlanContext& ctx = em.ctx();
  const Node& r = ctx.g.node(kp.root);
  const Shape& xs = r.type.shape;
  const Shape& gs = ctx.g.node(r.operands[1]).type.shape;
  const auto& k = r.attr_ints("kernel_size");
  const int64_t cells_h = (xs[2] + k[0] - 1) / k[0], cells_w = (xs[3] + k[1] - 1) / k[1];
  const int64_t cells = xs[0] * xs[1] * cells_h * cells_w;
  KernelSource& s = em.src();
  s.constants.push_back({"kH", xs[2], "input rows"});
  s.constants.push_back({"kW", xs[3], "input columns"});
  s.constants.push_back({"kC", xs[1], "channels"});
  s.constants.push_back({"kKH", k[0], "window rows (= stride)"});
  s.constants.push_back({"kKW", k[1], "window columns (= stride)"});
  s.constants.push_back({"kOH", gs[2], "window rows of the pooled output"});
  s.constants.push_back({"kOW", gs[3], "window columns of the pooled output"});
  s.constants.push_back({"kCellsH", cells_h, "cells down a plane"});
  s.constants.push_back({"kCellsW", cells_w, "cells across a plane"});
  s.constants.push_back({"kCells", cells, "cells in all planes"});
  const Operand x = operand(em, r.operands[0]), g = operand(em, r.operands[1]);
  const PointwiseConfig& cfg = ctx.heur.pointwise;
  const unsigned grid = grid_for(cells, cfg.threads, cfg.max_blocks);
  const std::vector<std::string> body = {
      "for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < kCells; e += (long long)gridDim.x * blockDim.x) {",
      "  const int cw = (int)(e % kCellsW), ch = (int)(e / kCellsW % kCellsH);",
      "  const long long plane = e / ((long long)kCellsW * kCellsH);",
      "  const int i0 = (int)(plane / kC), i1 = (int)(plane % kC);",
      "  const long long base = plane * kH * kW;",
      "  float g = 0.f;",
      "  int arg = -1;  // the window's first maximum (the last NaN), as PyTorch picks it",
      "  if (ch < kOH && cw < kOW) {",
      "    float m = fj::neg_inf();",
      "    for (int a = 0; a < kKH && ch * kKH + a < kH; ++a)",
      "      for (int b = 0; b < kKW && cw * kKW + b < kW; ++b) {",
      "        const int at = (ch * kKH + a) * kW + cw * kKW + b;",
      "        const float v = " + x("base + at") + ";",
      "        if (arg < 0 || v > m || fj::is_nan(v)) arg = at, m = v;",
      "      }",
      "    g = " + g("(plane * kOH + ch) * kOW + cw") + ";",
      "  }",
      "  for (int a = 0; a < kKH && ch * kKH + a < kH; ++a)",
      "    for (int b = 0; b < kKW && cw * kKW + b < kW; ++b) {",
      "      const int i2 = ch * kKH + a, i3 = cw * kKW + b;",
      "      " + post_call(post, "i2 * kW + i3 == arg ? g : 0.f", 4),
      "    }",
      "}"};
  return finish_kernel(em, kp, body, {grid, 1, 1}, cfg.threads);
}

// The adjoints insert_zeros_backward and im2col_backward:
// the lines that compute `v` at output element (i0, i1, i2, i3) = e.
std::vector<std::string> adjoint_lines(KernelEmitter& em, const Node& r, const Shape& os, const Operand& x) {
  KernelSource& s = em.src();
  const Graph& g = em.ctx().g;
  auto constant = [&](const char* name, int64_t v, const char* doc) { s.constants.push_back({name, v, doc}); };
  auto pair_constants = [&](const char* attr, const char* h, const char* w, const char* doc_h, const char* doc_w) {
    const auto& a = r.attr_ints(attr);
    constant(h, a[0], doc_h);
    constant(w, a[1], doc_w);
  };
  std::vector<std::string> lines;
  if (r.op == OpKind::InsertZerosBackward) {  // x[.., i, j] = grad[.., i * stride - crop, j * stride - crop]
    const Shape& gs = g.node(r.operands[0]).type.shape;
    constant("kH", os[2], "result rows");
    constant("kW", os[3], "result columns");
    constant("kGH", gs[2], "grad rows");
    constant("kGW", gs[3], "grad columns");
    pair_constants("stride", "kSH", "kSW", "row spacing in grad", "column spacing in grad");
    pair_constants("crop", "kCH", "kCW", "rows cropped at each side", "columns cropped at each side");
    lines = {"const long long plane = (long long)e / (kH * kW);",
             "const long long gr = (long long)i2 * kSH - kCH, gc = (long long)i3 * kSW - kCW;",
             "const bool hit = gr >= 0 && gr < kGH && gc >= 0 && gc < kGW;",
             "const float v = hit ? " + x("(plane * kGH + gr) * kGW + gc") + " : 0.f;"};
    return lines;
  }
  const Shape& xs = os;  // im2col_backward: the unfolded input's shape
  constant("kH", xs[2], "input rows");
  constant("kW", xs[3], "input columns");
  pair_constants("kernel_size", "kKH", "kKW", "window rows", "window columns");
  pair_constants("stride", "kSH", "kSW", "row step between windows", "column step between windows");
  pair_constants("padding", "kPH", "kPW", "rows padded at each side", "columns padded at each side");
  pair_constants("dilation", "kDH", "kDW", "row spacing of the taps", "column spacing of the taps");
  // col2im: x[n, c, h, w] sums the column entries (row (c, i, j), column (n, ho, wo)) whose tap reads it
  const Shape& cols = g.node(r.operands[0]).type.shape;
  const auto& k = r.attr_ints("kernel_size");
  const int64_t ow = (xs[3] + 2 * r.attr_ints("padding")[1] - r.attr_ints("dilation")[1] * (k[1] - 1) - 1) /
                         r.attr_ints("stride")[1] + 1;
  constant("kOH", cols[1] / xs[0] / ow, "window rows of the conv's output");
  constant("kOW", ow, "window columns of the conv's output");
  constant("kColumns", cols[1], "columns of grad (N * kOH * kOW)");
  lines = {"float v = 0.f;",
           "for (int a = 0; a < kKH; ++a) {",
           "const int top = (int)i2 + kPH - a * kDH;  // the window row's first input row, if tap a reads i2",
           "if (top < 0 || top % kSH != 0 || top / kSH >= kOH) continue;",
           "for (int b = 0; b < kKW; ++b) {",
           "const int left = (int)i3 + kPW - b * kDW;",
           "if (left < 0 || left % kSW != 0 || left / kSW >= kOW) continue;",
           "const long long row = ((long long)i1 * kKH + a) * kKW + b;",
           "const long long col = ((long long)i0 * kOH + top / kSH) * kOW + left / kSW;",
           "v += " + x("row * kColumns + col") + ";",
           "}",
           "}"};
  return lines;
}

}  // namespace

Expected<EmittedKernel> emit_gather(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const Shape& os = r.type.shape;
  const int rank = static_cast<int>(os.size());
  const PointwiseConfig& cfg = ctx.heur.pointwise;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root) + " -> " + shape_str(os);
  s.constants.push_back({"kNumel", numel(os), "elements of " + shape_str(os)});
  CudaStruct ws;
  ws.name = "WindowShape";
  auto member = [&](const std::string& n, int64_t v) {
    ws.members.push_back("static constexpr int " + n + " = " + int_literal(v) + ";");
  };
  auto window = [&](const Shape& in, const Shape& out) {
    const auto& k = r.attr_ints("kernel_size");
    const auto& st = r.attr_ints("stride");
    const auto& pd = r.attr_ints("padding");
    const std::vector<int64_t> dl = r.attrs.count("dilation") ? r.attr_ints("dilation") : std::vector<int64_t>{1, 1};
    member("kH", in[2]);
    member("kW", in[3]);
    member("kOH", out[2]);
    member("kOW", out[3]);
    member("kKH", k[0]);
    member("kKW", k[1]);
    member("kSH", st[0]);
    member("kSW", st[1]);
    member("kPH", pd[0]);
    member("kPW", pd[1]);
    member("kDH", dl[0]);
    member("kDW", dl[1]);
    s.structs.push_back(ws);
  };
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                        "the gathered value and its fused consumers, at output coordinates");
  std::vector<std::string> inner;
  const Operand x = operand(em, r.operands[0]);
  switch (r.op) {
    case OpKind::Flip: {  // the source offset: flipped dims count from the end
      const auto& dims = r.attr_ints("dims");
      std::string off;
      int64_t stride = 1;
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t n = os[static_cast<size_t>(d)];
        const bool flipped = std::find(dims.begin(), dims.end(), d) != dims.end();
        std::string c = "(long long)" + (flipped ? "(" + int_literal(n - 1) + " - i" + std::to_string(d) + ")"
                                                 : "i" + std::to_string(d));
        if (n > 1) off += (off.empty() ? "" : " + ") + (stride == 1 ? c : c + " * " + int_literal(stride));
        stride *= n;
      }
      inner.push_back("const float v = " + x(off.empty() ? "0" : off) + ";");
      break;
    }
    case OpKind::InsertZeros: {
      const Shape& xs = g.node(r.operands[0]).type.shape;
      const auto& st = r.attr_ints("stride");
      s.constants.push_back({"kH", xs[2], "input rows"});
      s.constants.push_back({"kW", xs[3], "input columns"});
      s.constants.push_back({"kSH", st[0], "row spacing"});
      s.constants.push_back({"kSW", st[1], "column spacing"});
      const std::vector<int64_t> crop = r.attrs.count("crop") ? r.attr_ints("crop") : std::vector<int64_t>{0, 0};
      inner.push_back("const long long plane = (long long)e / (" + int_literal(os[2] * os[3]) + ");");
      if (crop[0] != 0 || crop[1] != 0) {  // the spread position: the result's, shifted by the crop
        s.constants.push_back({"kCH", crop[0], "rows cropped at each side"});
        s.constants.push_back({"kCW", crop[1], "columns cropped at each side"});
        inner.push_back("const long long sr = (long long)i2 + kCH, sc = (long long)i3 + kCW;");
      } else {
        inner.push_back("const long long sr = i2, sc = i3;");
      }
      inner.push_back("const bool hit = sr % kSH == 0 && sc % kSW == 0 && sr / kSH < kH && sc / kSW < kW;");
      inner.push_back("const float v = hit ? " + x("(plane * kH + sr / kSH) * kW + sc / kSW") + " : 0.f;");
      break;
    }
    case OpKind::Im2col: {
      const Shape& xs = g.node(r.operands[0]).type.shape;
      const auto& k = r.attr_ints("kernel_size");
      const int64_t pixels = os[1] / xs[0];
      const int64_t ow = (xs[3] + 2 * r.attr_ints("padding")[1] - r.attr_ints("dilation")[1] * (k[1] - 1) - 1) /
                             r.attr_ints("stride")[1] + 1;
      window(xs, {xs[0], xs[1], pixels / ow, ow});
      s.constants.push_back({"kChannels", xs[1], "channels of the unfolded input"});
      inner.push_back("const float v = fj::im2col_at<WindowShape>(i0, i1, [&](long long n, long long c, int ih, int iw) {");
      inner.push_back("  return " + x("((n * kChannels + c) * WindowShape::kH + ih) * WindowShape::kW + iw") + "; });");
      break;
    }
    case OpKind::MaxPool2dBackward:
      if (tiling_windows(r)) return emit_tiling_max_pool_backward(em, kp, post);
      [[fallthrough]];
    case OpKind::AvgPool2dBackward: {
      const bool is_max = r.op == OpKind::MaxPool2dBackward;
      const ValueId grad = r.operands[is_max ? 1 : 0];
      const Shape& gs = g.node(grad).type.shape;
      window(os, gs);
      inner.push_back("const long long plane = (long long)e / (WindowShape::kH * WindowShape::kW);");
      const std::string load_grad = "[&](int oh, int ow) { return " +
                                    operand(em, grad)("(plane * WindowShape::kOH + oh) * WindowShape::kOW + ow") + "; }";
      if (is_max)
        inner.push_back("const float v = fj::max_pool2d_backward_at<WindowShape>(i2, i3, [&](int ih, int iw) { "
                        "return " + x("(plane * WindowShape::kH + ih) * WindowShape::kW + iw") + "; }, " +
                        load_grad + ");");
      else
        inner.push_back(std::string("const float v = fj::avg_pool2d_backward_at<WindowShape, ") +
                        (r.attr_bool("count_include_pad") ? "true" : "false") + ">(i2, i3, " + load_grad + ");");
      break;
    }
    case OpKind::MaxPool2dDoubleBackward: {  // grad (shaped like x) at each window's first maximum of x
      window(g.node(r.operands[0]).type.shape, os);
      inner = {"const long long plane = (long long)e / (WindowShape::kOH * WindowShape::kOW);",
               "const long long base = plane * WindowShape::kH * WindowShape::kW;",
               "const int arg = fj::window_first_max<WindowShape>(i2, i3, [&](int ih, int iw) { return " +
                   x("base + ih * WindowShape::kW + iw") + "; });",
               "const float v = arg < 0 ? 0.f : " + operand(em, r.operands[1])("base + arg") + ";"};
      break;
    }
    case OpKind::InsertZerosBackward:
    case OpKind::Im2colBackward:
      inner = adjoint_lines(em, r, os, x);
      break;
    default:
      return Error("codegen: internal error: " + std::string(op_name(r.op)) + " is no gather op");
  }
  inner.push_back(post_call(post, "v", rank));
  const unsigned grid = grid_for(numel(os), cfg.threads, cfg.max_blocks);
  return finish_kernel(em, kp, element_loop(os, cfg.threads, grid, inner), {grid, 1, 1}, cfg.threads);
}

}  // namespace fusejit::cg
