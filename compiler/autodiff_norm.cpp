// The derivatives of the norms as IR, after PyTorch's native_group_norm_backward,
// layer_norm_backward and batch_norm's eval-mode backward. The per-sample norms
// recompute their statistics from x over each normalized set S:
//   x^ = (x - mean_S x) rstd,  rstd = 1 / sqrt(var_S x + eps)   (biased variance)
//   dx = rstd (g w - mean_S(g w) - x^ mean_S(g w x^))
//   dweight = sum g x^,  dbias = sum g   (over every dim but the parameter's)
// batch_norm (inference: running statistics given) is elementwise:
//   dx = g w rstd (rstd of running_var),  dweight = sum g (x - running_mean) rstd,  dbias = sum g;
// the running statistics get no gradient (PyTorch does not differentiate them).
#include "compiler/autodiff.h"

namespace fusejit::ad {
namespace {

using K = OpKind;

// How a norm sees x: `view` (x, or group_norm's [N, G, C/G, inner]), the dims of
// the view normalized together, and the view of weight / bias that broadcasts
// against it.
struct NormView {
  Shape view;
  std::vector<int64_t> dims;
  Shape param;
};

NormView norm_view(const Node& n, const Shape& x) {
  const int64_t rank = static_cast<int64_t>(x.size());
  NormView v;
  if (n.op == K::LayerNorm) {
    const auto& normalized = n.attr_ints("normalized_shape");
    v.view = x;
    v.param = normalized;
    for (int64_t d = rank - static_cast<int64_t>(normalized.size()); d < rank; ++d) v.dims.push_back(d);
    return v;
  }
  const int64_t c = x[1], inner = numel(Shape(x.begin() + 2, x.end()));
  if (n.op == K::GroupNorm) {
    const int64_t groups = n.attr_int("num_groups");
    v.view = {x[0], groups, c / groups, inner};
    v.dims = {2, 3};
    v.param = {groups, c / groups, 1};
    return v;
  }
  v.view = x;  // instance_norm, batch_norm: per channel (dim 1)
  for (int64_t d = 2; d < rank; ++d) v.dims.push_back(d);
  v.param = Shape(static_cast<size_t>(rank - 1), 1);
  v.param[0] = c;
  return v;
}

// batch_norm's rsqrt(running_var + eps), as the parameter view.
ValueId running_rstd(const Node& n, StageWriter& w, ValueId running_var, const Shape& param) {
  return w.unary(K::Rsqrt, w.add(w.reshape(running_var, param), w.constant(n.attr_float("eps"))));
}

struct NormRule {
  SweepContext& cx;
  StageWriter& w;
  const Node& n;

  ValueId operand(size_t k) { return n.operands[k]; }
  bool has(size_t k) const { return n.operands.size() > k; }
  const Shape& fwd_shape(ValueId v) const { return cx.fwd.node(v).type.shape; }
  // A parameter's gradient: `v` summed down to the parameter view, in the parameter's shape.
  void give_param(size_t k, ValueId v, const Shape& param) {
    cx.accumulate(operand(k), w.reshape(w.sum_to(v, param), fwd_shape(operand(k))));
  }

  void per_sample(ValueId g) {
    const Shape& xs = fwd_shape(operand(0));
    const NormView v = norm_view(n, xs);
    const ValueId x = w.reshape(cx.primal(operand(0)), v.view), gv = w.reshape(g, v.view);
    const ValueId centered = w.sub(x, w.reduce(K::Mean, x, v.dims, /*keepdim=*/true));
    const ValueId var = w.reduce(K::Mean, w.unary(K::Square, centered), v.dims, /*keepdim=*/true);
    const ValueId rstd = w.unary(K::Rsqrt, w.add(var, w.constant(n.attr_float("eps"))));
    const ValueId xhat = w.mul(centered, rstd);
    const ValueId gw = has(1) ? w.mul(gv, w.reshape(cx.primal(operand(1)), v.param)) : gv;
    const ValueId mean_gw = w.reduce(K::Mean, gw, v.dims, /*keepdim=*/true);
    const ValueId mean_gwx = w.reduce(K::Mean, w.mul(gw, xhat), v.dims, /*keepdim=*/true);
    const ValueId dx = w.mul(rstd, w.sub(w.sub(gw, mean_gw), w.mul(xhat, mean_gwx)));
    cx.accumulate(operand(0), w.reshape(dx, xs));
    if (has(1)) give_param(1, w.mul(gv, xhat), v.param);
    if (has(2)) give_param(2, gv, v.param);
  }

  void batch_norm(ValueId g) {
    const NormView v = norm_view(n, fwd_shape(operand(0)));
    const ValueId rstd = running_rstd(n, w, cx.primal(operand(2)), v.param);
    const ValueId scale = has(3) ? w.mul(w.reshape(cx.primal(operand(3)), v.param), rstd) : rstd;
    cx.accumulate(operand(0), w.mul(g, scale));
    if (has(3)) {
      const ValueId xhat = w.mul(w.sub(cx.primal(operand(0)), w.reshape(cx.primal(operand(1)), v.param)), rstd);
      give_param(3, w.mul(g, xhat), v.param);
    }
    if (has(4)) give_param(4, g, v.param);
  }
};

}  // namespace

Status norm_vjp(SweepContext& cx, ValueId v, ValueId grad) {
  NormRule r{cx, cx.w, cx.fwd.node(v)};
  if (r.n.op == K::BatchNorm) r.batch_norm(grad);
  else r.per_sample(grad);
  return {};
}

ValueId batch_norm_elementwise(const Node& n, StageWriter& w, const std::vector<ValueId>& operands) {
  const NormView v = norm_view(n, w.shape(operands[0]));
  ValueId scale = running_rstd(n, w, operands[2], v.param);
  if (operands.size() > 3) scale = w.mul(w.reshape(operands[3], v.param), scale);
  ValueId y = w.mul(w.sub(operands[0], w.reshape(operands[1], v.param)), scale);
  if (operands.size() > 4) y = w.add(y, w.reshape(operands[4], v.param));
  return y;
}

}  // namespace fusejit::ad
