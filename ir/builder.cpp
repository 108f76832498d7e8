#include "fusejit/builder.h"

#include <limits>

namespace fusejit {
namespace {
std::vector<int64_t> vec(const std::array<int64_t, 2>& a) { return {a[0], a[1]}; }
}  // namespace

GraphBuilder::GraphBuilder(Precision precision, std::string name) {
  g_.precision = precision;
  g_.name = std::move(name);
}

Value GraphBuilder::input(const std::string& name, Shape shape, std::optional<DType> dtype, InitKind init) {
  Node n;
  n.op = OpKind::Input;
  n.name = name;
  n.type = {dtype.value_or(anchor_dtype(g_.precision)), std::move(shape)};
  n.init = init;
  return Value(this, g_.add(std::move(n)));
}

Value GraphBuilder::constant(double value) {
  Node n;
  n.op = OpKind::Constant;
  n.attrs["value"] = value;
  return Value(this, g_.add(std::move(n)));
}

Value GraphBuilder::op(OpKind kind, const std::vector<Value>& operands, AttrMap attrs) {
  Node n;
  n.op = kind;
  n.attrs = std::move(attrs);
  for (const Value& v : operands) {
    if (v.builder_ != this && !misuse_)
      misuse_ = Error(std::string(op_name(kind)) + ": an operand is " +
                      (v.builder_ ? "a value of another GraphBuilder" : "an empty Value"));
    n.operands.push_back(v.id_);
  }
  return Value(this, g_.add(std::move(n)));
}

Value GraphBuilder::linear(Value x, Value weight, std::optional<Value> bias) {
  std::vector<Value> ops{x, weight};
  if (bias) ops.push_back(*bias);
  return op(OpKind::Linear, ops);
}

Value GraphBuilder::matmul(Value a, Value b) { return op(OpKind::Matmul, {a, b}); }

Value GraphBuilder::conv2d(Value x, Value weight, std::optional<Value> bias, const Conv2dOptions& o) {
  std::vector<Value> ops{x, weight};
  if (bias) ops.push_back(*bias);
  return op(OpKind::Conv2d, ops,
            {{"stride", vec(o.stride)}, {"padding", vec(o.padding)}, {"dilation", vec(o.dilation)}, {"groups", o.groups}});
}

Value GraphBuilder::conv2d_weight_grad(Value x, Value grad, std::array<int64_t, 2> kernel_size,
                                       const Conv2dOptions& o) {
  return op(OpKind::Conv2dWeightGrad, {x, grad},
            {{"kernel_size", vec(kernel_size)}, {"stride", vec(o.stride)}, {"padding", vec(o.padding)},
             {"dilation", vec(o.dilation)}, {"groups", o.groups}});
}

void GraphBuilder::output(const std::string& name, Value v) {
  if (v.builder_ != this && !misuse_) misuse_ = Error("output '" + name + "' is not a value of this GraphBuilder");
  g_.outputs.push_back(Output{name, v.id_, {}});
}

Expected<Graph> GraphBuilder::build() const {
  if (misuse_) return *misuse_;
  Graph g = g_;
  if (Status s = prepare_graph(g); !s) return s.error();
  return g;
}

Value Value::named(const std::string& name) const {
  if (builder_) builder_->g_.node(id_).name = name;
  return *this;
}

Value Value::unary(OpKind op, AttrMap attrs) const {
  GraphBuilder* b = builder_;
  if (!b) return {};
  return b->op(op, {*this}, std::move(attrs));
}
Value Value::binary(OpKind op, Value o) const { return builder_ ? builder_->op(op, {*this, o}) : Value(); }
Value Value::binary(OpKind op, double c) const {
  return builder_ ? builder_->op(op, {*this, builder_->constant(c)}) : Value();
}
Value Value::reduce(OpKind op, std::vector<int64_t> dims, bool keepdim) const {
  return unary(op, {{"dims", std::move(dims)}, {"keepdim", keepdim}});
}

Value Value::relu() const { return unary(OpKind::Relu); }
Value Value::leaky_relu(double s) const { return unary(OpKind::LeakyRelu, {{"negative_slope", s}}); }
Value Value::gelu(bool tanh_approx) const {
  return unary(OpKind::Gelu, {{"approximate", std::string(tanh_approx ? "tanh" : "none")}});
}
Value Value::sigmoid() const { return unary(OpKind::Sigmoid); }
Value Value::tanh() const { return unary(OpKind::Tanh); }
Value Value::silu() const { return unary(OpKind::Silu); }
Value Value::mish() const { return unary(OpKind::Mish); }
Value Value::softplus(double beta, double threshold) const {
  return unary(OpKind::Softplus, {{"beta", beta}, {"threshold", threshold}});
}
Value Value::hardswish() const { return unary(OpKind::Hardswish); }
Value Value::hardsigmoid() const { return unary(OpKind::Hardsigmoid); }
Value Value::hardtanh(double lo, double hi) const {
  return unary(OpKind::Hardtanh, {{"min_val", lo}, {"max_val", hi}});
}
Value Value::elu(double alpha) const { return unary(OpKind::Elu, {{"alpha", alpha}}); }
Value Value::exp() const { return unary(OpKind::Exp); }
Value Value::log() const { return unary(OpKind::Log); }
Value Value::abs() const { return unary(OpKind::Abs); }
Value Value::neg() const { return unary(OpKind::Neg); }
Value Value::sqrt() const { return unary(OpKind::Sqrt); }
Value Value::rsqrt() const { return unary(OpKind::Rsqrt); }
Value Value::square() const { return unary(OpKind::Square); }
Value Value::clamp(std::optional<double> lo, std::optional<double> hi) const {
  constexpr double inf = std::numeric_limits<double>::infinity();
  return unary(OpKind::Clamp, {{"min", lo.value_or(-inf)}, {"max", hi.value_or(inf)}});
}

Value Value::erf() const { return unary(OpKind::Erf); }
Value Value::cast(DType dtype) const { return unary(OpKind::Cast, {{"dtype", std::string(dtype_name(dtype))}}); }

Value Value::add(Value o) const { return binary(OpKind::Add, o); }
Value Value::add(double c) const { return binary(OpKind::Add, c); }
Value Value::sub(Value o) const { return binary(OpKind::Sub, o); }
Value Value::sub(double c) const { return binary(OpKind::Sub, c); }
Value Value::mul(Value o) const { return binary(OpKind::Mul, o); }
Value Value::mul(double c) const { return binary(OpKind::Mul, c); }
Value Value::div(Value o) const { return binary(OpKind::Div, o); }
Value Value::div(double c) const { return binary(OpKind::Div, c); }
Value Value::minimum(Value o) const { return binary(OpKind::Minimum, o); }
Value Value::minimum(double c) const { return binary(OpKind::Minimum, c); }
Value Value::maximum(Value o) const { return binary(OpKind::Maximum, o); }
Value Value::maximum(double c) const { return binary(OpKind::Maximum, c); }
Value Value::pow(Value o) const { return binary(OpKind::Pow, o); }
Value Value::pow(double c) const { return binary(OpKind::Pow, c); }
Value Value::gt(Value o) const { return binary(OpKind::Gt, o); }
Value Value::gt(double c) const { return binary(OpKind::Gt, c); }
Value Value::ge(Value o) const { return binary(OpKind::Ge, o); }
Value Value::ge(double c) const { return binary(OpKind::Ge, c); }
Value Value::lt(Value o) const { return binary(OpKind::Lt, o); }
Value Value::lt(double c) const { return binary(OpKind::Lt, c); }
Value Value::le(Value o) const { return binary(OpKind::Le, o); }
Value Value::le(double c) const { return binary(OpKind::Le, c); }
Value Value::eq(Value o) const { return binary(OpKind::Eq, o); }
Value Value::eq(double c) const { return binary(OpKind::Eq, c); }

Value Value::expand(Shape shape) const { return unary(OpKind::Expand, {{"shape", std::move(shape)}}); }
Value Value::reshape(Shape shape) const { return unary(OpKind::Reshape, {{"shape", std::move(shape)}}); }
Value Value::transpose(int64_t d0, int64_t d1) const {
  return unary(OpKind::Transpose, {{"dims", std::vector<int64_t>{d0, d1}}});
}

Value Value::sum(std::vector<int64_t> d, bool k) const { return reduce(OpKind::Sum, std::move(d), k); }
Value Value::mean(std::vector<int64_t> d, bool k) const { return reduce(OpKind::Mean, std::move(d), k); }
Value Value::max(std::vector<int64_t> d, bool k) const { return reduce(OpKind::Max, std::move(d), k); }
Value Value::min(std::vector<int64_t> d, bool k) const { return reduce(OpKind::Min, std::move(d), k); }
Value Value::logsumexp(std::vector<int64_t> d, bool k) const { return reduce(OpKind::LogSumExp, std::move(d), k); }
Value Value::softmax(int64_t dim) const { return unary(OpKind::Softmax, {{"dim", dim}}); }
Value Value::log_softmax(int64_t dim) const { return unary(OpKind::LogSoftmax, {{"dim", dim}}); }

Value Value::max_pool2d(const Pool2dOptions& o) const {
  return unary(OpKind::MaxPool2d, {{"kernel_size", vec(o.kernel)},
                                   {"stride", vec(o.stride[0] ? o.stride : o.kernel)},
                                   {"padding", vec(o.padding)},
                                   {"ceil_mode", o.ceil_mode}});
}
Value Value::avg_pool2d(const Pool2dOptions& o) const {
  return unary(OpKind::AvgPool2d, {{"kernel_size", vec(o.kernel)},
                                   {"stride", vec(o.stride[0] ? o.stride : o.kernel)},
                                   {"padding", vec(o.padding)},
                                   {"ceil_mode", o.ceil_mode},
                                   {"count_include_pad", o.count_include_pad}});
}
Value Value::global_avg_pool() const { return unary(OpKind::GlobalAvgPool); }
Value Value::max_pool1d(const Pool1dOptions& o) const {
  return unary(OpKind::MaxPool1d, {{"kernel_size", o.kernel},
                                   {"stride", o.stride ? o.stride : o.kernel},
                                   {"padding", o.padding},
                                   {"ceil_mode", o.ceil_mode}});
}
Value Value::avg_pool1d(const Pool1dOptions& o) const {
  return unary(OpKind::AvgPool1d, {{"kernel_size", o.kernel},
                                   {"stride", o.stride ? o.stride : o.kernel},
                                   {"padding", o.padding},
                                   {"ceil_mode", o.ceil_mode},
                                   {"count_include_pad", o.count_include_pad}});
}

Value Value::norm(OpKind op, std::vector<Value> operands, std::optional<Value> weight, std::optional<Value> bias,
                  AttrMap attrs) const {
  if (!builder_) return {};
  operands.insert(operands.begin(), *this);
  if (weight) operands.push_back(*weight);
  if (bias) {
    if (!weight) operands.push_back(builder_->constant(1.0));  // rejected by shape inference: needs weight
    operands.push_back(*bias);
  }
  return builder_->op(op, operands, std::move(attrs));
}
Value Value::group_norm(int64_t groups, std::optional<Value> w, std::optional<Value> b, double eps) const {
  return norm(OpKind::GroupNorm, {}, w, b, {{"num_groups", groups}, {"eps", eps}});
}
Value Value::instance_norm(std::optional<Value> w, std::optional<Value> b, double eps) const {
  return norm(OpKind::InstanceNorm, {}, w, b, {{"eps", eps}});
}
Value Value::layer_norm(std::vector<int64_t> shape, std::optional<Value> w, std::optional<Value> b, double eps) const {
  return norm(OpKind::LayerNorm, {}, w, b, {{"normalized_shape", std::move(shape)}, {"eps", eps}});
}
Value Value::batch_norm(Value mean, Value var, std::optional<Value> w, std::optional<Value> b, double eps) const {
  return norm(OpKind::BatchNorm, {mean, var}, w, b, {{"eps", eps}});
}

Value operator+(Value a, Value b) { return a.add(b); }
Value operator-(Value a, Value b) { return a.sub(b); }
Value operator*(Value a, Value b) { return a.mul(b); }
Value operator/(Value a, Value b) { return a.div(b); }
Value operator+(Value a, double c) { return a.add(c); }
Value operator-(Value a, double c) { return a.sub(c); }
Value operator*(Value a, double c) { return a.mul(c); }
Value operator/(Value a, double c) { return a.div(c); }
Value operator*(double c, Value a) { return a.mul(c); }
Value operator+(double c, Value a) { return a.add(c); }

}  // namespace fusejit
