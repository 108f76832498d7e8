// compiler/autodiff.h — building blocks of build_backward (fusejit/backward.h):
// a writer that appends typed nodes to a stage graph, and the derivative of
// each op (autodiff_rules.cpp), applied in a reverse sweep.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fusejit/backward.h"
#include "fusejit/ir.h"

namespace fusejit::ad {

// Appends nodes to a graph, tracking each value's shape as it goes (the stage
// graphs are prepared afterwards, which infers and checks every type again).
class StageWriter {
 public:
  explicit StageWriter(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }
  const Shape& shape(ValueId v) const { return shapes_.at(static_cast<size_t>(v)); }

  ValueId input(const std::string& name, const TensorType& type);
  ValueId constant(double value);
  ValueId unary(OpKind op, ValueId x, AttrMap attrs = {});
  ValueId binary(OpKind op, ValueId a, ValueId b);
  ValueId add(ValueId a, ValueId b) { return binary(OpKind::Add, a, b); }
  ValueId sub(ValueId a, ValueId b) { return binary(OpKind::Sub, a, b); }
  ValueId mul(ValueId a, ValueId b) { return binary(OpKind::Mul, a, b); }
  ValueId div(ValueId a, ValueId b) { return binary(OpKind::Div, a, b); }
  ValueId scale(ValueId a, double c) { return mul(a, constant(c)); }
  ValueId reduce(OpKind op, ValueId x, std::vector<int64_t> dims, bool keepdim);
  ValueId expand(ValueId x, const Shape& shape);
  ValueId reshape(ValueId x, const Shape& shape);  // no node when the shape is already `shape`
  ValueId transpose(ValueId x, int64_t d0, int64_t d1);
  ValueId matmul(ValueId a, ValueId b);
  ValueId linear(ValueId x, ValueId w);
  // Any op, its result's shape given (the stage is prepared later, which checks it).
  ValueId op(OpKind op, std::vector<ValueId> operands, AttrMap attrs, const Shape& shape);
  // Copies forward node `n` with new operands (its attributes and name kept).
  ValueId copy(const Node& n, std::vector<ValueId> operands, const Shape& shape);
  void output(const std::string& name, ValueId v);

  // Sums `v` (of a broadcast result's shape) down to `target`, the shape of
  // the operand that was broadcast: over the leading dims it lacks and the
  // dims where it has 1 (PyTorch's sum_to_size).
  ValueId sum_to(ValueId v, const Shape& target);
  // `v`, the result of a reduction over `dims` of an `in`-shaped tensor, with
  // the reduced dims as 1 (a reshape when the reduction dropped them).
  ValueId keep_dims(ValueId v, const Shape& in, const std::vector<int64_t>& dims, bool keepdim);

 private:
  ValueId push(Node n, Shape shape);
  Graph& g_;
  std::vector<Shape> shapes_;
};

// The values of the forward graph as the stage sees them (recomputed or
// loaded on first use), and the gradient contributions found so far.
struct SweepContext {
  const Graph& fwd;
  StageWriter& w;
  std::function<ValueId(ValueId)> primal;            // forward value -> stage value
  std::function<void(ValueId, ValueId)> accumulate;  // forward value, gradient contribution
};

// Writes `value` as a stage output buffer named after `base` (or returns the
// buffer it already is); returns the buffer's name.
using EmitFn = std::function<std::string(ValueId value, const std::string& base, BufferRole role, const std::string& what)>;

// autodiff_conv.cpp: what conv2d's dX and dW stages read, written by the
// epilogue stage: dZ and W with each group transposed and its taps reversed
// (dX, a stride-1 conv2d of dZ), dZ^T [Cout, N*Ho*Wo] and im2col(x)
// [Cin*kh*kw, N*Ho*Wo] (dW, a linear over K = N*Ho*Wo). Empty names where
// not wanted; an error for the geometries not supported yet.
// With ConvWgrad::Implicit, dW reads dZ itself (dz_w) and x: no dz_t, cols.
struct ConvOperands {
  std::string dz, w_flipped, dz_t, cols, dz_w;
};
Expected<ConvOperands> conv_backward_operands(const Graph& fwd, ValueId conv, ValueId dz, bool want_x, bool want_w,
                                              ConvWgrad wgrad, StageWriter& w,
                                              const std::function<ValueId(ValueId)>& primal, const EmitFn& emit);
// conv2d_weight_grad(x, G)'s operands, from U = the gradient of its output: for dX, G spread / cropped (dz) and
// U flipped (w_flipped), as conv2d's dX reads dZ and W; for dG, U itself (dz_w).
Expected<ConvOperands> wgrad_backward_operands(const Graph& fwd, ValueId wgrad, ValueId dw_grad, ValueId grad,
                                               bool want_x, bool want_grad, StageWriter& w, const EmitFn& emit);
// conv2d(x, weight) with `conv`'s stride, padding, dilation and groups: dG of conv2d_weight_grad.
ValueId conv_forward(const Node& conv, StageWriter& w, ValueId x, ValueId weight, const Shape& z_shape);
// dX of conv2d `conv`: the conv of dZ with the flipped weight, shaped `x_shape`.
ValueId conv_dgrad(const Node& conv, StageWriter& w, ValueId dz, ValueId w_flipped, const Shape& x_shape);
// dW of conv2d from the buffers dZ^T [Cout, N, Ho, Wo] and im2col(x) [Cin*kh*kw, N*Ho*Wo]: a linear over
// K = N*Ho*Wo; grouped, im2col(x) per group transposed [g, N*Ho*Wo, Cin/g*kh*kw] and a batched matmul
// (W's layout [Cout, Cin/g, kh, kw] either way).
ValueId conv_wgrad(const Node& conv, StageWriter& w, const std::string& dz_t, const TensorType& dz_t_type,
                   const std::string& cols, const TensorType& cols_type);
// dW of conv2d from x and dZ where they are: one conv2d_weight_grad (an implicit GEMM over N*Ho*Wo).
ValueId conv_wgrad_implicit(const Node& conv, StageWriter& w, ValueId x, ValueId dz, const Shape& w_shape);

// Adds the contributions of d(loss)/d(value v) = `grad` to v's operands.
// Errors for ops without a derivative yet.
Status apply_vjp(SweepContext& cx, ValueId v, ValueId grad);
// autodiff_norm.cpp: the same for group_norm, instance_norm, layer_norm and
// batch_norm (whose running statistics get none).
Status norm_vjp(SweepContext& cx, ValueId v, ValueId grad);
// batch_norm `n` recomputed in a stage as elementwise ops of `operands`, its
// per-channel operands reshaped to broadcast along dim 1 (a batch_norm node
// there would need them read by batch_norms only; its derivative reads them too).
ValueId batch_norm_elementwise(const Node& n, StageWriter& w, const std::vector<ValueId>& operands);

// Whether forward value `v` can carry a gradient (not a constant; not only
// comparisons of it).
bool differentiable(OpKind op);

}  // namespace fusejit::ad
