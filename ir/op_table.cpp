// The op table: every op's name, category, operands and attributes. The spec
// parser, builder, printer and verifier all read it, so an op is described once.
#include <limits>

#include "fusejit/ir.h"

namespace fusejit {
namespace {

using K = AttrKind;
constexpr double kInf = std::numeric_limits<double>::infinity();

AttrSpec req(std::string n, K k, std::string doc) { return {std::move(n), k, true, std::nullopt, std::move(doc)}; }
AttrSpec opt(std::string n, K k, AttrValue def, std::string doc) {
  return {std::move(n), k, false, std::move(def), std::move(doc)};
}
AttrSpec derived(std::string n, K k, std::string doc) { return {std::move(n), k, false, std::nullopt, std::move(doc)}; }

std::vector<int64_t> pair(int64_t a) { return {a, a}; }

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t;
  auto add = [&](OpKind op, OpCategory c, int lo, int hi, std::vector<std::string> operands,
                 std::vector<AttrSpec> attrs, std::string summary) {
    t.push_back(OpInfo{op, "", c, lo, hi, std::move(operands), std::move(attrs), std::move(summary)});
  };
  using C = OpCategory;
  add(OpKind::Input, C::Leaf, 0, 0, {}, {}, "a kernel argument");
  add(OpKind::Constant, C::Leaf, 0, 0, {}, {req("value", K::Float, "the scalar")}, "a scalar constant");

  add(OpKind::Linear, C::Anchor, 2, 3, {"x", "weight", "bias"}, {},
      "x[...,K] @ weight[N,K]^T (+ bias[N]) -> [...,N]");
  add(OpKind::Matmul, C::Anchor, 2, 2, {"a", "b"}, {}, "a[...,M,K] @ b[...,K,N] -> [...,M,N]");
  add(OpKind::Conv2d, C::Anchor, 2, 3, {"x", "weight", "bias"},
      {opt("stride", K::Pair, pair(1), "step between windows"),
       opt("padding", K::Pair, pair(0), "zero padding on each side"),
       opt("dilation", K::Pair, pair(1), "spacing of kernel taps"),
       opt("groups", K::Int, int64_t{1}, "channel groups")},
      "NCHW convolution, weight [Cout, Cin/groups, kh, kw], bias [Cout]");
  add(OpKind::Conv2dWeightGrad, C::Anchor, 2, 2, {"x", "grad"},
      {req("kernel_size", K::Pair, "the conv's kernel (kh, kw)"), opt("stride", K::Pair, pair(1), "the conv's stride"),
       opt("padding", K::Pair, pair(0), "the conv's zero padding"),
       opt("dilation", K::Pair, pair(1), "the conv's tap spacing"), opt("groups", K::Int, int64_t{1}, "channel groups")},
      "the gradient of conv2d's weight (torch.nn.grad.conv2d_weight): x [N, Cin, H, W] the conv's input, grad "
      "[N, Cout, Ho, Wo] the gradient of its output -> [Cout, Cin/groups, kh, kw]; an implicit GEMM over "
      "K = N*Ho*Wo, no im2col buffer");

  auto unary = [&](OpKind op, std::vector<AttrSpec> attrs, std::string s) {
    add(op, C::Unary, 1, 1, {"x"}, std::move(attrs), std::move(s));
  };
  unary(OpKind::Relu, {}, "max(x, 0)");
  unary(OpKind::LeakyRelu, {opt("negative_slope", K::Float, 0.01, "slope for x < 0")},
        "x > 0 ? x : negative_slope * x");
  unary(OpKind::Gelu, {opt("approximate", K::String, std::string("none"), "\"none\" (erf) or \"tanh\"")},
        "0.5 x (1 + erf(x / sqrt 2)), or the tanh form");
  unary(OpKind::Sigmoid, {}, "1 / (1 + exp(-x))");
  unary(OpKind::Tanh, {}, "tanh(x)");
  unary(OpKind::Silu, {}, "x * sigmoid(x)");
  unary(OpKind::Mish, {}, "x * tanh(softplus(x))");
  unary(OpKind::Softplus,
        {opt("beta", K::Float, 1.0, "scale"), opt("threshold", K::Float, 20.0, "linear above this")},
        "beta x > threshold ? x : log1p(exp(beta x)) / beta");
  unary(OpKind::Hardswish, {}, "x * clamp(x + 3, 0, 6) / 6");
  unary(OpKind::Hardsigmoid, {}, "clamp(x + 3, 0, 6) / 6");
  unary(OpKind::Hardtanh, {opt("min_val", K::Float, -1.0, "lower bound"), opt("max_val", K::Float, 1.0, "upper bound")},
        "clamp(x, min_val, max_val)");
  unary(OpKind::Elu, {opt("alpha", K::Float, 1.0, "scale for x <= 0")}, "x > 0 ? x : alpha (exp(x) - 1)");
  unary(OpKind::Exp, {}, "exp(x)");
  unary(OpKind::Log, {}, "log(x)");
  unary(OpKind::Abs, {}, "|x|");
  unary(OpKind::Neg, {}, "-x");
  unary(OpKind::Sqrt, {}, "sqrt(x)");
  unary(OpKind::Rsqrt, {}, "1 / sqrt(x)");
  unary(OpKind::Square, {}, "x * x");
  unary(OpKind::Clamp, {opt("min", K::Float, -kInf, "lower bound"), opt("max", K::Float, kInf, "upper bound")},
        "min(max(x, min), max)");
  unary(OpKind::Erf, {}, "erf(x)");
  unary(OpKind::Cast, {req("dtype", K::String, "the result's dtype: \"f32\", \"bf16\" or \"f16\"")},
        "x converted to dtype (round to nearest even), as x.to(dtype)");

  auto binary = [&](OpKind op, std::string s) { add(op, C::Binary, 2, 2, {"a", "b"}, {}, std::move(s)); };
  binary(OpKind::Add, "a + b");
  binary(OpKind::Sub, "a - b");
  binary(OpKind::Mul, "a * b");
  binary(OpKind::Div, "a / b");
  binary(OpKind::Minimum, "min(a, b)");
  binary(OpKind::Maximum, "max(a, b)");
  binary(OpKind::Pow, "a ^ b");
  binary(OpKind::Gt, "a > b ? 1 : 0");
  binary(OpKind::Ge, "a >= b ? 1 : 0");
  binary(OpKind::Lt, "a < b ? 1 : 0");
  binary(OpKind::Le, "a <= b ? 1 : 0");
  binary(OpKind::Eq, "a == b ? 1 : 0");

  auto reduction = [&](OpKind op, std::string s) {
    add(op, C::Reduction, 1, 1, {"x"},
        {req("dims", K::Ints, "dims to reduce (negative counts from the end)"),
         opt("keepdim", K::Bool, false, "keep reduced dims as size 1")},
        std::move(s));
  };
  reduction(OpKind::Sum, "sum over dims");
  reduction(OpKind::Mean, "mean over dims");
  reduction(OpKind::Max, "max over dims");
  reduction(OpKind::Min, "min over dims");
  reduction(OpKind::LogSumExp, "log(sum(exp(x))) over dims, computed stably");

  add(OpKind::Softmax, C::Normalize, 1, 1, {"x"}, {req("dim", K::Int, "the normalized dim")},
      "exp(x) / sum(exp(x)) along dim");
  add(OpKind::LogSoftmax, C::Normalize, 1, 1, {"x"}, {req("dim", K::Int, "the normalized dim")},
      "x - logsumexp(x) along dim");

  const AttrSpec eps = opt("eps", K::Float, 1e-5, "added to the variance before the square root");
  add(OpKind::GroupNorm, C::Norm, 1, 3, {"x", "weight", "bias"},
      {req("num_groups", K::Int, "groups of C / num_groups consecutive channels"), eps},
      "x [N,C,*] normalized over each (sample, group of channels), then * weight[C] + bias[C]");
  add(OpKind::InstanceNorm, C::Norm, 1, 3, {"x", "weight", "bias"}, {eps},
      "x [N,C,*] normalized over each (sample, channel), then * weight[C] + bias[C]");
  add(OpKind::LayerNorm, C::Norm, 1, 3, {"x", "weight", "bias"},
      {req("normalized_shape", K::Ints, "the trailing dims normalized together"), eps},
      "x normalized over its trailing normalized_shape dims, then * weight + bias (both of that shape)");
  add(OpKind::BatchNorm, C::Norm, 3, 5, {"x", "running_mean", "running_var", "weight", "bias"}, {eps},
      "inference: (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c], c = dim 1");

  add(OpKind::MaxPool2d, C::Pool, 1, 1, {"x"},
      {req("kernel_size", K::Pair, "window"), derived("stride", K::Pair, "step (default: kernel_size)"),
       opt("padding", K::Pair, pair(0), "implicit -inf padding"), opt("dilation", K::Pair, pair(1), "tap spacing"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size")},
      "max over 2-D windows of NCHW input");
  add(OpKind::AvgPool2d, C::Pool, 1, 1, {"x"},
      {req("kernel_size", K::Pair, "window"), derived("stride", K::Pair, "step (default: kernel_size)"),
       opt("padding", K::Pair, pair(0), "implicit zero padding"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size"),
       opt("count_include_pad", K::Bool, true, "divide by the padded window size")},
      "mean over 2-D windows of NCHW input");
  add(OpKind::GlobalAvgPool, C::Pool, 1, 1, {"x"}, {}, "mean over H and W: [N,C,H,W] -> [N,C,1,1]");
  add(OpKind::MaxPool1d, C::Pool, 1, 1, {"x"},
      {req("kernel_size", K::Int, "window"), derived("stride", K::Int, "step (default: kernel_size)"),
       opt("padding", K::Int, int64_t{0}, "implicit -inf padding"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size")},
      "max over windows along the last dim");
  add(OpKind::AvgPool1d, C::Pool, 1, 1, {"x"},
      {req("kernel_size", K::Int, "window"), derived("stride", K::Int, "step (default: kernel_size)"),
       opt("padding", K::Int, int64_t{0}, "implicit zero padding"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size"),
       opt("count_include_pad", K::Bool, true, "divide by the padded window size")},
      "mean over windows along the last dim");

  add(OpKind::Expand, C::Layout, 1, 1, {"x"}, {req("shape", K::Ints, "the result's shape")},
      "x broadcast to shape (PyTorch's expand: align right, dims of 1 stretch)");
  add(OpKind::Reshape, C::Layout, 1, 1, {"x"}, {req("shape", K::Ints, "the result's shape (same element count)")},
      "the same elements in row-major order, viewed as shape");
  add(OpKind::Transpose, C::Layout, 1, 1, {"x"}, {req("dims", K::Ints, "the two dims swapped")},
      "x with two dims swapped (a contiguous copy)");

  add(OpKind::Flip, C::Gather, 1, 1, {"x"}, {req("dims", K::Ints, "the dims reversed")},
      "x with the order of its elements reversed along dims (torch.flip)");
  add(OpKind::Im2col, C::Gather, 1, 1, {"x"},
      {req("kernel_size", K::Pair, "window"), opt("stride", K::Pair, pair(1), "step between windows"),
       opt("padding", K::Pair, pair(0), "zero padding on each side"),
       opt("dilation", K::Pair, pair(1), "spacing of kernel taps")},
      "x [N,C,H,W] -> columns [C*kh*kw, N*Ho*Wo]: row (c, i, j), column (n, ho, wo) holds "
      "x[n, c, ho*stride - padding + i*dilation, ...] (0 in the padding)");
  add(OpKind::MaxPool2dBackward, C::Gather, 2, 2, {"x", "grad"},
      {req("kernel_size", K::Pair, "window"), derived("stride", K::Pair, "step (default: kernel_size)"),
       opt("padding", K::Pair, pair(0), "implicit -inf padding"), opt("dilation", K::Pair, pair(1), "tap spacing"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size")},
      "the gradient of max_pool2d(x) for its gradient grad: each window's grad added at the window's first "
      "maximum of x (PyTorch's rule; NaN counts as the maximum)");
  add(OpKind::AvgPool2dBackward, C::Gather, 1, 1, {"grad"},
      {req("input_shape", K::Ints, "the pooled input's shape [N,C,H,W]"), req("kernel_size", K::Pair, "window"),
       derived("stride", K::Pair, "step (default: kernel_size)"),
       opt("padding", K::Pair, pair(0), "implicit zero padding"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size"),
       opt("count_include_pad", K::Bool, true, "divide by the padded window size")},
      "the gradient of avg_pool2d over an input_shape input for its gradient grad: each window's grad spread "
      "over the window's elements, divided as the forward divides");
  add(OpKind::InsertZeros, C::Gather, 1, 1, {"x"},
      {req("stride", K::Pair, "the spacing of x's pixels in the result"),
       opt("extra", K::Pair, pair(0), "zero rows and columns appended at the end"),
       opt("crop", K::Pair, pair(0), "rows and columns then removed at each side")},
      "x [N,C,H,W] spread out: [N, C, (H-1)*stride+1+extra-2*crop, (W-1)*stride+1+extra-2*crop], x[n,c,i,j] at "
      "(i*stride-crop, j*stride-crop), 0 elsewhere (the dZ of a strided or over-padded conv's dX)");
  // The adjoints of the gather ops above (their derivatives: a backward program differentiated once more).
  add(OpKind::Im2colBackward, C::Gather, 1, 1, {"grad"},
      {req("input_shape", K::Ints, "the unfolded input's shape [N,C,H,W]"), req("kernel_size", K::Pair, "window"),
       opt("stride", K::Pair, pair(1), "step between windows"),
       opt("padding", K::Pair, pair(0), "zero padding on each side"),
       opt("dilation", K::Pair, pair(1), "spacing of kernel taps")},
      "col2im, the gradient of im2col for its gradient grad [C*kh*kw, N*Ho*Wo]: each element of the "
      "input_shape result the sum of the column entries that read it (padding taps read nothing)");
  add(OpKind::MaxPool2dDoubleBackward, C::Gather, 2, 2, {"x", "grad"},
      {req("kernel_size", K::Pair, "window"), derived("stride", K::Pair, "step (default: kernel_size)"),
       opt("padding", K::Pair, pair(0), "implicit -inf padding"), opt("dilation", K::Pair, pair(1), "tap spacing"),
       opt("ceil_mode", K::Bool, false, "ceil instead of floor for the output size")},
      "the gradient of max_pool2d_backward(x, .) for its gradient grad [N,C,H,W]: each window's grad at the "
      "window's first maximum of x (NaN counts as the maximum), shaped like max_pool2d(x)");
  add(OpKind::InsertZerosBackward, C::Gather, 1, 1, {"grad"},
      {req("stride", K::Pair, "the spacing of the result's pixels in grad"),
       opt("extra", K::Pair, pair(0), "zero rows and columns the forward appended at the end"),
       opt("crop", K::Pair, pair(0), "rows and columns the forward removed at each side")},
      "the gradient of insert_zeros for its gradient grad [N,C,Hg,Wg]: [N, C, (Hg-1-extra+2*crop)/stride+1, ...], "
      "element (i, j) = grad[n, c, i*stride-crop, j*stride-crop] (0 outside grad)");

  // Names come from the one list in ir.h, so the table and the enum cannot drift.
  static const char* const kNames[] = {
#define FUSEJIT_NAME(e, n, c) n,
      FUSEJIT_OPS(FUSEJIT_NAME)
#undef FUSEJIT_NAME
  };
  std::vector<OpInfo> by_kind(t.size());
  for (auto& info : t) {
    info.name = kNames[static_cast<size_t>(info.op)];
    by_kind.at(static_cast<size_t>(info.op)) = std::move(info);
  }
  return by_kind;
}

}  // namespace

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = build_table();
  return table;
}

const OpInfo& op_info(OpKind k) { return all_ops().at(static_cast<size_t>(k)); }
std::string_view op_name(OpKind k) { return op_info(k).name; }
OpCategory op_category(OpKind k) { return op_info(k).category; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const auto& info : all_ops())
    if (info.name == name) return info.op;
  return std::nullopt;
}

const AttrSpec* OpInfo::find_attr(std::string_view n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

}  // namespace fusejit
