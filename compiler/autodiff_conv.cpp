// conv2d's backward as fusejit stages (PyTorch's convolution_backward):
//   dX = conv2d(dZ, W'), W' [Cin, Cout/groups, kh, kw] each group's W
//        transposed with its taps reversed, padding dilation*(k-1) - padding,
//        stride 1 (a strided conv's dZ spread out first: insert_zeros; a negative padding is a crop of
//        dZ there, then padding 0);
//   dW = dZ^T [Cout, N*Ho*Wo] (dZ with N and C swapped) times im2col(x)^T: a linear with both operands
//        K-major over K = N*Ho*Wo; grouped: per group, a batched matmul of dZ^T [g, Cout/g, P] and
//        im2col(x) per group transposed, [g, P, Cin/g*kh*kw] (conv_wgrad); or one conv2d_weight_grad(x, dZ).
// conv2d_weight_grad(x, G)'s backward, U = d(loss)/d(its output): dG = conv2d(x, U) (the conv forward) and
//   dX = conv2d's dX with dZ := G, W := U.
#include <algorithm>

#include "compiler/autodiff.h"
#include "ir/passes.h"

namespace fusejit::ad {

namespace {

// dX's operands of a conv-like node `an` (conv2d; conv2d_weight_grad for its dX) whose input is xs, weight ws and
// output zs: dZ spread stride apart and / or cropped (insert_zeros) where needed, and the weight with each group
// transposed and its taps reversed. `dz` and `wv` are stage values; `what` describes the node.
void conv_dx_operands(const Node& an, const Shape& xs, const Shape& ws, const Shape& zs, ValueId dz, ValueId wv,
                      const std::string& w_base, const std::string& w_what, const std::string& what, StageWriter& w,
                      const EmitFn& emit, ConvOperands& out) {
  const auto& stride = an.attr_ints("stride");
  const auto& pad = an.attr_ints("padding");
  const auto& dil = an.attr_ints("dilation");
  const int64_t groups = an.attr_int("groups");
  // dX = conv2d(dZ', W') with stride 1 and padding p' = dilation*(k-1) - padding, dZ' = dZ spread stride apart
  // (insert_zeros). Where padding exceeds dilation*(k-1), p' < 0: a conv with padding -e is the conv with
  // padding 0 over its input cropped by e at each side, so insert_zeros crops dZ' by e (conv_dgrad pads 0).
  std::vector<int64_t> extra(2, 0), crop(2, 0);  // extra: the input rows / columns the last window left out
  for (size_t i = 0; i < 2; ++i) {
    extra[i] = (xs[2 + i] + 2 * pad[i] - dil[i] * (ws[2 + i] - 1) - 1) % stride[i];
    crop[i] = std::max<int64_t>(0, pad[i] - dil[i] * (ws[2 + i] - 1));  // dZ' keeps H + dil*(k-1) >= 1
  }
  const bool cropped = crop[0] > 0 || crop[1] > 0;
  if (stride[0] == 1 && stride[1] == 1 && !cropped) {
    out.dz = emit(dz, "tmp_dz", BufferRole::Temporary, "dZ, the gradient of " + what);
  } else {  // dZ's pixels spread stride apart and / or cropped: then dX is a stride-1 conv with padding >= 0
    Shape spread = zs;
    for (size_t i = 0; i < 2; ++i) spread[2 + i] = (zs[2 + i] - 1) * stride[i] + 1 + extra[i] - 2 * crop[i];
    const ValueId z = w.op(OpKind::InsertZeros, {dz}, {{"stride", stride}, {"extra", extra}, {"crop", crop}}, spread);
    const bool strided = stride[0] != 1 || stride[1] != 1;
    std::string desc = "dZ of " + what;
    if (strided) desc += " with zeros between its pixels (stride " + attr_str(an.attrs.at("stride")) + ")";
    if (cropped)
      desc += std::string(strided ? " and" : "") + " cropped by " + std::to_string(crop[0]) + "x" +
              std::to_string(crop[1]) + " at each side (padding " + attr_str(an.attrs.at("padding")) +
              " > dilation * (kernel - 1))";
    out.dz = emit(z, strided ? "tmp_dz_spread" : "tmp_dz_cropped", BufferRole::Temporary, desc);
  }
  const int64_t co = ws[0], cig = ws[1], kh = ws[2], kw = ws[3];
  const ValueId t = groups == 1 ? w.transpose(wv, 0, 1)
                                : w.reshape(w.transpose(w.reshape(wv, {groups, co / groups, cig, kh, kw}), 1, 2),
                                            {groups * cig, co / groups, kh, kw});
  out.w_flipped = emit(w.op(OpKind::Flip, {t}, {{"dims", std::vector<int64_t>{2, 3}}}, w.shape(t)), w_base,
                       BufferRole::Temporary, w_what + " with each group transposed and its taps reversed, for dX");
}

}  // namespace

Expected<ConvOperands> conv_backward_operands(const Graph& fwd, ValueId conv, ValueId dz, bool want_x, bool want_w,
                                              ConvWgrad wgrad, StageWriter& w,
                                              const std::function<ValueId(ValueId)>& primal, const EmitFn& emit) {
  const Node& an = fwd.node(conv);
  const ValueId x = an.operands[0], wt = an.operands[1];
  const Shape& xs = fwd.node(x).type.shape;
  const Shape& ws = fwd.node(wt).type.shape;
  const Shape& zs = an.type.shape;
  const auto& stride = an.attr_ints("stride");
  const auto& pad = an.attr_ints("padding");
  const auto& dil = an.attr_ints("dilation");
  const int64_t groups = an.attr_int("groups");
  const std::string& xn = fwd.node(x).name;
  const std::string& wn = fwd.node(wt).name;
  ConvOperands out;
  if (want_x)
    conv_dx_operands(an, xs, ws, zs, dz, primal(wt), "tmp_" + wn + "_flipped", "'" + wn + "'", fwd.describe(conv), w,
                     emit, out);
  if (want_w && wgrad == ConvWgrad::Implicit) {  // dZ as it is (the buffer dX reads, where that is dZ itself)
    out.dz_w = emit(dz, "tmp_dz", BufferRole::Temporary, "dZ, the gradient of " + fwd.describe(conv));
  } else if (want_w) {
    const int64_t pixels = zs[0] * zs[2] * zs[3];
    out.dz_t = emit(w.transpose(dz, 0, 1), "tmp_dz_t", BufferRole::Temporary,
                    "dZ with N and C swapped, read by dW as [Cout, N*Ho*Wo]");
    AttrMap a{{"kernel_size", std::vector<int64_t>{ws[2], ws[3]}},
              {"stride", stride},
              {"padding", pad},
              {"dilation", dil}};
    const int64_t ck = xs[1] * ws[2] * ws[3];
    const ValueId cols = w.op(OpKind::Im2col, {primal(x)}, a, {ck, pixels});
    if (groups == 1)
      out.cols = emit(cols, "tmp_" + xn + "_cols", BufferRole::Temporary,
                      "im2col('" + xn + "') [Cin*kh*kw, N*Ho*Wo], for dW");
    else  // group g's rows are a contiguous block; the batched matmul of dW wants [K, N] = [P, Cin/g*kh*kw]
      out.cols = emit(w.transpose(w.reshape(cols, {groups, ck / groups, pixels}), 1, 2), "tmp_" + xn + "_cols_t",
                      BufferRole::Temporary, "im2col('" + xn + "') per group, transposed: [g, N*Ho*Wo, Cin/g*kh*kw], for dW");
  }
  return out;
}

Expected<ConvOperands> wgrad_backward_operands(const Graph& fwd, ValueId wgrad, ValueId dw_grad, ValueId grad,
                                               bool want_x, bool want_grad, StageWriter& w, const EmitFn& emit) {
  const Node& an = fwd.node(wgrad);
  const ValueId x = an.operands[0], g = an.operands[1];
  ConvOperands out;
  // The conv whose dW this is has input x, weight d(dW)'s shape, output grad's: its dX with dZ := grad.
  if (want_x)
    conv_dx_operands(an, fwd.node(x).type.shape, an.type.shape, fwd.node(g).type.shape, grad, dw_grad,
                     "tmp_dz_flipped", "the gradient of " + fwd.describe(wgrad), "'" + fwd.node(g).name + "'", w,
                     emit, out);
  if (want_grad) out.dz_w = emit(dw_grad, "tmp_dz", BufferRole::Temporary, "the gradient of " + fwd.describe(wgrad));
  return out;
}

ValueId conv_forward(const Node& conv, StageWriter& w, ValueId x, ValueId weight, const Shape& z_shape) {
  AttrMap a{{"stride", conv.attr_ints("stride")},
            {"padding", conv.attr_ints("padding")},
            {"dilation", conv.attr_ints("dilation")},
            {"groups", conv.attr_int("groups")}};
  return w.op(OpKind::Conv2d, {x, weight}, a, z_shape);
}

ValueId conv_wgrad(const Node& conv, StageWriter& w, const std::string& dz_t, const TensorType& dz_t_type,
                   const std::string& cols, const TensorType& cols_type) {
  const int64_t groups = conv.attr_int("groups");
  const int64_t cout = dz_t_type.shape[0], pixels = numel(dz_t_type.shape) / cout;
  // dZ^T [Cout, N, Ho, Wo] read as [Cout, N*Ho*Wo]; grouped, as [g, Cout/g, N*Ho*Wo] (group g's rows).
  if (groups == 1)
    return w.linear(w.input(dz_t, {dz_t_type.dtype, {cout, pixels}}), w.input(cols, cols_type));
  const ValueId a = w.input(dz_t, {dz_t_type.dtype, {groups, cout / groups, pixels}});
  return w.matmul(a, w.input(cols, cols_type));  // [g, Cout/g, Cin/g*kh*kw]: W's layout
}

ValueId conv_wgrad_implicit(const Node& conv, StageWriter& w, ValueId x, ValueId dz, const Shape& w_shape) {
  AttrMap a{{"kernel_size", std::vector<int64_t>{w_shape[2], w_shape[3]}},
            {"stride", conv.attr_ints("stride")},
            {"padding", conv.attr_ints("padding")},
            {"dilation", conv.attr_ints("dilation")},
            {"groups", conv.attr_int("groups")}};
  return w.op(OpKind::Conv2dWeightGrad, {x, dz}, a, w_shape);
}

ValueId conv_dgrad(const Node& conv, StageWriter& w, ValueId dz, ValueId w_flipped, const Shape& x_shape) {
  const auto& pad = conv.attr_ints("padding");
  const auto& dil = conv.attr_ints("dilation");
  const Shape& wf = w.shape(w_flipped);
  AttrMap a{{"stride", std::vector<int64_t>{1, 1}},
            // a negative padding is the crop conv_backward_operands gave dZ (insert_zeros): 0 here
            {"padding", std::vector<int64_t>{std::max<int64_t>(0, dil[0] * (wf[2] - 1) - pad[0]),
                                             std::max<int64_t>(0, dil[1] * (wf[3] - 1) - pad[1])}},
            {"dilation", dil},
            {"groups", conv.attr_int("groups")}};
  return w.op(OpKind::Conv2d, {dz, w_flipped}, a, x_shape);
}

}  // namespace fusejit::ad
