// The derivative of each op as IR: given g = dL/dy of y = op(operands), the
// contributions dL/d(operand). Formulas and masks follow PyTorch's autograd
// (derivatives.yaml): e.g. relu passes g where x > 0, hardtanh where
// min < x < max, maximum splits g evenly on ties, amax/amin spread g evenly over
// the maxima. The forward's values are recomputed in the stage (cx.primal).
// Pooling goes through the pools' backward ops (max: the window's first
// maximum of the recomputed input, as PyTorch picks it; avg: spread); 1-D
// pools as 2-D pools of height 1. The gather ops into their adjoints. The
// norms: autodiff_norm.cpp.
#include <cmath>
#include <numbers>

#include "compiler/autodiff.h"
#include "ir/passes.h"

namespace fusejit::ad {
namespace {

using K = OpKind;

struct Rules {
  SweepContext& cx;
  StageWriter& w;
  const Node& n;
  ValueId y;  // the forward value, as the stage sees it (recomputed on first use)

  ValueId x(int k = 0) { return cx.primal(n.operands[static_cast<size_t>(k)]); }
  ValueId c(double v) { return w.constant(v); }
  ValueId cmp(OpKind op, ValueId a, double b) { return w.binary(op, a, c(b)); }
  ValueId un(OpKind op, ValueId a, AttrMap attrs = {}) { return w.unary(op, a, std::move(attrs)); }

  // dy/dx of a unary op, as a value of x's shape (or nullopt: zero).
  ValueId unary_derivative() {
    const ValueId a = x();
    switch (n.op) {
      case K::Relu: return cmp(K::Gt, a, 0);
      case K::LeakyRelu: {  // x > 0 ? 1 : slope
        const double s = n.attr_float("negative_slope");
        return w.add(w.scale(cmp(K::Gt, a, 0), 1 - s), c(s));
      }
      case K::Gelu: {
        if (n.attr_string("approximate") == "tanh") {  // PyTorch's GeluBackward (tanh form)
          const double beta = std::sqrt(2 / std::numbers::pi), kappa = 0.044715;
          const ValueId x2 = un(K::Square, a);
          const ValueId inner = w.scale(w.add(a, w.scale(w.mul(x2, a), kappa)), beta);
          const ValueId t = un(K::Tanh, inner);
          const ValueId left_d = w.scale(w.add(t, c(1)), 0.5);
          const ValueId right_d = w.mul(w.sub(c(1), un(K::Square, t)), w.add(w.scale(x2, 3 * kappa), c(1)));
          return w.add(left_d, w.mul(w.scale(a, 0.5 * beta), right_d));
        }
        // Phi(x) + x phi(x)
        const ValueId cdf = w.scale(w.add(un(K::Erf, w.scale(a, std::numbers::sqrt2 / 2)), c(1)), 0.5);
        const ValueId pdf = w.scale(un(K::Exp, w.scale(un(K::Square, a), -0.5)), 1 / std::sqrt(2 * std::numbers::pi));
        return w.add(cdf, w.mul(a, pdf));
      }
      case K::Sigmoid: return w.mul(y, w.sub(c(1), y));
      case K::Tanh: return w.sub(c(1), un(K::Square, y));
      case K::Silu: {  // s (1 + x (1 - s))
        const ValueId s = un(K::Sigmoid, a);
        return w.mul(s, w.add(c(1), w.mul(a, w.sub(c(1), s))));
      }
      case K::Mish: {  // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)
        AttrMap sp_attrs{{"beta", 1.0}, {"threshold", 20.0}};
        const ValueId t = un(K::Tanh, un(K::Softplus, a, sp_attrs));
        return w.add(t, w.mul(w.mul(a, un(K::Sigmoid, a)), w.sub(c(1), un(K::Square, t))));
      }
      case K::Softplus: {  // beta x > threshold ? 1 : sigmoid(beta x)
        const ValueId bx = w.scale(a, n.attr_float("beta"));
        const ValueId linear_part = cmp(K::Gt, bx, n.attr_float("threshold"));
        return w.add(linear_part, w.mul(w.sub(c(1), linear_part), un(K::Sigmoid, bx)));
      }
      case K::Hardswish: {  // x < -3: 0; x <= 3: x / 3 + 1/2; else 1
        const ValueId mid = w.mul(cmp(K::Ge, a, -3), cmp(K::Le, a, 3));
        return w.add(w.mul(mid, w.add(w.scale(a, 1.0 / 3), c(0.5))), cmp(K::Gt, a, 3));
      }
      case K::Hardsigmoid: return w.scale(w.mul(cmp(K::Gt, a, -3), cmp(K::Lt, a, 3)), 1.0 / 6);
      case K::Hardtanh:
        return w.mul(cmp(K::Gt, a, n.attr_float("min_val")), cmp(K::Lt, a, n.attr_float("max_val")));
      case K::Clamp: return w.mul(cmp(K::Ge, a, n.attr_float("min")), cmp(K::Le, a, n.attr_float("max")));
      case K::Elu: {  // x > 0 ? 1 : alpha exp(x); exp of min(x, 0) keeps large x finite
        const ValueId neg = w.scale(un(K::Exp, w.binary(K::Minimum, a, c(0))), n.attr_float("alpha"));
        const ValueId pos = cmp(K::Gt, a, 0);
        return w.add(pos, w.mul(w.sub(c(1), pos), neg));
      }
      case K::Exp: return y;
      case K::Log: return w.div(c(1), a);
      case K::Abs: return w.sub(cmp(K::Gt, a, 0), cmp(K::Lt, a, 0));
      case K::Neg: return c(-1);
      case K::Sqrt: return w.div(c(0.5), y);
      case K::Rsqrt: return w.scale(w.mul(un(K::Square, y), y), -0.5);
      case K::Square: return w.scale(a, 2);
      case K::Erf: return w.scale(un(K::Exp, un(K::Neg, un(K::Square, a))), 2 / std::sqrt(std::numbers::pi));
      default: return -1;
    }
  }

  Status binary(ValueId g) {
    const ValueId a = x(0), b = x(1);
    const ValueId ia = n.operands[0], ib = n.operands[1];
    auto give = [&](ValueId operand, ValueId contribution) { cx.accumulate(operand, contribution); };
    switch (n.op) {
      case K::Add: give(ia, g); give(ib, g); break;
      case K::Sub: give(ia, g); give(ib, w.unary(K::Neg, g)); break;
      case K::Mul: give(ia, w.mul(g, b)); give(ib, w.mul(g, a)); break;
      case K::Div:
        give(ia, w.div(g, b));
        give(ib, w.unary(K::Neg, w.div(w.mul(g, a), w.mul(b, b))));
        break;
      case K::Maximum:
      case K::Minimum: {  // the winner takes g; ties split it
        const OpKind wins = n.op == K::Maximum ? K::Gt : K::Lt, loses = n.op == K::Maximum ? K::Lt : K::Gt;
        const ValueId half_tie = w.scale(w.binary(K::Eq, a, b), 0.5);
        give(ia, w.mul(g, w.add(w.binary(wins, a, b), half_tie)));
        give(ib, w.mul(g, w.add(w.binary(loses, a, b), half_tie)));
        break;
      }
      case K::Pow: {
        // d/da = b a^(b-1) (0 where b == 0); d/db = a^b log(a) (0 where a == 0 and b >= 0).
        const ValueId b_zero = cmp(K::Eq, b, 0);
        const ValueId exponent = w.add(w.sub(b, c(1)), b_zero);
        give(ia, w.mul(g, w.mul(b, w.binary(K::Pow, a, exponent))));
        const ValueId a_zero = cmp(K::Eq, a, 0);
        const ValueId keep = w.sub(c(1), w.mul(a_zero, cmp(K::Ge, b, 0)));
        const ValueId log_a = w.unary(K::Log, w.add(a, a_zero));
        give(ib, w.mul(w.mul(g, keep), w.mul(y, log_a)));
        break;
      }
      default: break;  // comparisons: no gradient
    }
    return {};
  }

  Status reduction(ValueId g) {
    const ValueId xi = n.operands[0];
    const Shape& in = cx.fwd.node(xi).type.shape;
    const auto& dims = n.attr_ints("dims");
    const bool keep = n.attr_bool("keepdim");
    const ValueId gk = w.keep_dims(g, in, dims, keep);
    int64_t count = 1;
    for (int64_t d : dims) count *= in[static_cast<size_t>(d)];
    switch (n.op) {
      case K::Sum: cx.accumulate(xi, w.expand(gk, in)); break;
      case K::Mean: cx.accumulate(xi, w.expand(w.scale(gk, 1.0 / static_cast<double>(count)), in)); break;
      case K::Max:
      case K::Min: {  // amax / amin: g spread evenly over the elements equal to the result
        const ValueId mask = w.binary(K::Eq, x(), w.keep_dims(y, in, dims, keep));
        const ValueId ties = w.reduce(K::Sum, mask, dims, /*keepdim=*/true);
        cx.accumulate(xi, w.div(w.mul(gk, mask), ties));
        break;
      }
      default:  // logsumexp: g exp(x - lse)
        cx.accumulate(xi, w.mul(gk, w.unary(K::Exp, w.sub(x(), w.keep_dims(y, in, dims, keep)))));
        break;
    }
    return {};
  }

  Status normalize(ValueId g) {
    const int64_t dim = n.attr_int("dim");
    if (n.op == K::Softmax) {  // y (g - sum(g y))
      const ValueId dot = w.reduce(K::Sum, w.mul(g, y), {dim}, /*keepdim=*/true);
      cx.accumulate(n.operands[0], w.mul(y, w.sub(g, dot)));
    } else {  // log_softmax: g - exp(y) sum(g)
      const ValueId total = w.reduce(K::Sum, g, {dim}, /*keepdim=*/true);
      cx.accumulate(n.operands[0], w.sub(g, w.mul(w.unary(K::Exp, y), total)));
    }
    return {};
  }

  Status pool(ValueId g) {
    const ValueId xi = n.operands[0];
    const Shape& in = cx.fwd.node(xi).type.shape;
    if (n.op == K::GlobalAvgPool) {  // g / (H W) at every element
      cx.accumulate(xi, w.scale(w.expand(g, in), 1.0 / static_cast<double>(in[2] * in[3])));
      return {};
    }
    const bool is_max = n.op == K::MaxPool2d || n.op == K::MaxPool1d;
    AttrMap a = n.attrs;
    ValueId gx = g, xx = -1;
    Shape in4 = in;
    if (n.op == K::MaxPool1d || n.op == K::AvgPool1d) {  // [..., L] as [P, 1, 1, L]
      const int64_t len = in.back(), out_len = w.shape(g).back();
      const int64_t planes = numel(in) / len;
      in4 = {planes, 1, 1, len};
      gx = w.reshape(g, {planes, 1, 1, out_len});
      a = AttrMap{{"kernel_size", std::vector<int64_t>{1, n.attr_int("kernel_size")}},
                  {"stride", std::vector<int64_t>{1, n.attr_int("stride")}},
                  {"padding", std::vector<int64_t>{0, n.attr_int("padding")}},
                  {"ceil_mode", n.attr_bool("ceil_mode")}};
      if (is_max) a["dilation"] = std::vector<int64_t>{1, 1};
      else a["count_include_pad"] = n.attr_bool("count_include_pad");
      if (is_max) xx = w.reshape(x(), in4);
    } else if (is_max) {
      xx = x();
    }
    ValueId d;
    if (is_max) {
      d = w.op(K::MaxPool2dBackward, {xx, gx}, a, in4);
    } else {
      a["input_shape"] = in4;
      d = w.op(K::AvgPool2dBackward, {gx}, a, in4);
    }
    cx.accumulate(xi, w.reshape(d, in));
    return {};
  }

  // The gather ops are linear in the operand they move (x's of max_pool2d_backward only picks the
  // windows' maxima: zero gradient, as PyTorch's zeros_like), so each differentiates into its adjoint
  // (PyTorch's double-backward rules): flip -> flip, avg_pool2d_backward -> avg_pool2d,
  // max_pool2d_backward -> max_pool2d_double_backward (w.r.t. grad), im2col -> im2col_backward (col2im),
  // insert_zeros -> insert_zeros_backward. The adjoints themselves have no derivative yet (false: the caller's error).
  bool gather(ValueId g) {
    const bool max_pool = n.op == K::MaxPool2dBackward;
    const ValueId moved = n.operands[max_pool ? 1 : 0];  // the operand the op moves: grad for the pools
    const Shape& in = cx.fwd.node(moved).type.shape;
    AttrMap a = n.attrs;
    OpKind adjoint = K::Flip;
    std::vector<ValueId> args = {g};
    switch (n.op) {
      case K::Flip: break;
      case K::AvgPool2dBackward: adjoint = K::AvgPool2d, a.erase("input_shape"); break;
      case K::MaxPool2dBackward: adjoint = K::MaxPool2dDoubleBackward, args = {x(0), g}; break;
      case K::Im2col: adjoint = K::Im2colBackward, a["input_shape"] = in; break;
      case K::InsertZeros: adjoint = K::InsertZerosBackward; break;
      default: return false;
    }
    cx.accumulate(moved, w.op(adjoint, std::move(args), std::move(a), in));
    return true;
  }

  Status layout(ValueId g) {
    const ValueId xi = n.operands[0];
    const Shape& in = cx.fwd.node(xi).type.shape;
    if (n.op == K::Expand) cx.accumulate(xi, w.sum_to(g, in));
    else if (n.op == K::Reshape) cx.accumulate(xi, w.reshape(g, in));
    else {
      const auto& d = n.attr_ints("dims");
      cx.accumulate(xi, w.transpose(g, d[0], d[1]));
    }
    return {};
  }
};

}  // namespace

bool differentiable(OpKind op) {
  return op != K::Gt && op != K::Ge && op != K::Lt && op != K::Le && op != K::Eq && op != K::Constant;
}

Status apply_vjp(SweepContext& cx, ValueId v, ValueId grad) {
  const Node& n = cx.fwd.node(v);
  if (!differentiable(n.op)) return {};
  Rules r{cx, cx.w, n, -1};
  const bool needs_y = n.op == K::Sigmoid || n.op == K::Tanh || n.op == K::Exp || n.op == K::Sqrt ||
                       n.op == K::Rsqrt || n.op == K::Pow || n.op == K::Max || n.op == K::Min ||
                       n.op == K::LogSumExp || op_category(n.op) == OpCategory::Normalize;
  if (needs_y) r.y = cx.primal(v);
  if (n.op == K::Cast) {  // the gradient converted back to the operand's dtype (PyTorch's ToCopyBackward)
    const DType from = cx.fwd.node(n.operands[0]).type.dtype;
    cx.accumulate(n.operands[0], cx.w.unary(K::Cast, grad, {{"dtype", std::string(dtype_name(from))}}));
    return {};
  }
  switch (op_category(n.op)) {
    case OpCategory::Unary: {
      const ValueId d = r.unary_derivative();
      if (d < 0) break;
      cx.accumulate(n.operands[0], cx.w.mul(grad, d));
      return {};
    }
    case OpCategory::Binary: return r.binary(grad);
    case OpCategory::Reduction: return r.reduction(grad);
    case OpCategory::Normalize: return r.normalize(grad);
    case OpCategory::Layout: return r.layout(grad);
    case OpCategory::Pool: return r.pool(grad);
    case OpCategory::Norm: return norm_vjp(cx, v, grad);
    case OpCategory::Gather:
      if (r.gather(grad)) return {};
      break;
    default: break;
  }
  return node_error(cx.fwd, v, "has no derivative in fusejit yet (backward supports elementwise ops, reductions, "
                               "softmax, log_softmax, the norms, pooling, layout ops and the backward's gather ops "
                               "after a linear, matmul or conv2d or without one; not their adjoints "
                               "im2col_backward, max_pool2d_double_backward, insert_zeros_backward)");
}

}  // namespace fusejit::ad
