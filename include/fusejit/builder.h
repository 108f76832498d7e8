// fusejit/builder.h — the C++ chain API. A chain reads like the model:
//
//   fusejit::GraphBuilder g(fusejit::Precision::FP32, "conv_relu_bias");
//   auto x    = g.input("x", {128, 64, 128, 128});
//   auto w    = g.input("conv_w", {128, 64, 3, 3});
//   auto b    = g.input("conv_b", {128});
//   auto bias = g.input("bias", {128, 1, 1});
//   auto y    = g.conv2d(x, w, b).relu().add(bias);      // or: (... .relu()) + bias
//   g.output("y", y);
//   fusejit::Expected<fusejit::Graph> graph = g.build();  // checked, canonical
//
// Inputs are the kernel's arguments in the order input() is called: declare
// them in separate statements, as above (C++ leaves the evaluation order of a
// call's arguments unspecified). Values are cheap handles; use one several times to build a DAG
// (`auto s = v.sigmoid(); auto y = v * s;`). `named("act")` names a value for
// printing and error messages. Mistakes (bad shapes, wrong operand counts)
// surface as an Error from build(), never as an exception or abort.
// Input dtypes default to the precision's anchor dtype; input init kinds
// (for random test data) default to their role, see InitKind in ir.h.
#pragma once

#include <array>
#include <optional>

#include "fusejit/ir.h"

namespace fusejit {

class GraphBuilder;

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

struct Pool2dOptions {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // {0, 0}: the kernel size (PyTorch's default)
  std::array<int64_t, 2> padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};

struct Pool1dOptions {
  int64_t kernel = 2;
  int64_t stride = 0;  // 0: the kernel size (PyTorch's default)
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool1d only
};

class Value {
 public:
  Value() = default;
  ValueId id() const { return id_; }
  bool valid() const { return builder_ != nullptr; }
  Value named(const std::string& name) const;

  // Unary ops.
  Value relu() const;
  Value leaky_relu(double negative_slope = 0.01) const;
  Value gelu(bool tanh_approximation = false) const;
  Value sigmoid() const;
  Value tanh() const;
  Value silu() const;
  Value mish() const;
  Value softplus(double beta = 1.0, double threshold = 20.0) const;
  Value hardswish() const;
  Value hardsigmoid() const;
  Value hardtanh(double min_val = -1.0, double max_val = 1.0) const;
  Value elu(double alpha = 1.0) const;
  Value exp() const;
  Value log() const;
  Value abs() const;
  Value neg() const;
  Value sqrt() const;
  Value rsqrt() const;
  Value square() const;
  Value clamp(std::optional<double> min, std::optional<double> max) const;
  Value erf() const;
  // x converted to `dtype` (rounded to nearest even), PyTorch's x.to(dtype).
  Value cast(DType dtype) const;

  // Binary ops; the other operand a value (broadcast by PyTorch rules) or a scalar.
  Value add(Value o) const;
  Value add(double c) const;
  Value sub(Value o) const;
  Value sub(double c) const;
  Value mul(Value o) const;
  Value mul(double c) const;
  Value div(Value o) const;
  Value div(double c) const;
  Value minimum(Value o) const;
  Value minimum(double c) const;
  Value maximum(Value o) const;
  Value maximum(double c) const;
  Value pow(Value o) const;
  Value pow(double c) const;
  // Comparisons: 1 where it holds, else 0 (0 with a NaN operand).
  Value gt(Value o) const;
  Value gt(double c) const;
  Value ge(Value o) const;
  Value ge(double c) const;
  Value lt(Value o) const;
  Value lt(double c) const;
  Value le(Value o) const;
  Value le(double c) const;
  Value eq(Value o) const;
  Value eq(double c) const;

  // Layout: PyTorch's expand (broadcast to `shape`), reshape (same elements,
  // row-major) and transpose (two dims swapped; a contiguous result).
  Value expand(Shape shape) const;
  Value reshape(Shape shape) const;
  Value transpose(int64_t dim0, int64_t dim1) const;

  // Reductions (dims may be negative), softmax-like ops, pooling.
  Value sum(std::vector<int64_t> dims, bool keepdim = false) const;
  Value mean(std::vector<int64_t> dims, bool keepdim = false) const;
  Value max(std::vector<int64_t> dims, bool keepdim = false) const;
  Value min(std::vector<int64_t> dims, bool keepdim = false) const;
  Value logsumexp(std::vector<int64_t> dims, bool keepdim = false) const;
  Value softmax(int64_t dim) const;
  Value log_softmax(int64_t dim) const;
  Value max_pool2d(const Pool2dOptions& o) const;
  Value avg_pool2d(const Pool2dOptions& o) const;
  Value global_avg_pool() const;
  Value max_pool1d(const Pool1dOptions& o) const;
  Value avg_pool1d(const Pool1dOptions& o) const;

  // Per-sample norms (PyTorch's F.group_norm, F.instance_norm, F.layer_norm)
  // and batch_norm in inference form; weight / bias are optional (a bias
  // needs a weight: operands are positional).
  Value group_norm(int64_t num_groups, std::optional<Value> weight = std::nullopt,
                   std::optional<Value> bias = std::nullopt, double eps = 1e-5) const;
  Value instance_norm(std::optional<Value> weight = std::nullopt, std::optional<Value> bias = std::nullopt,
                      double eps = 1e-5) const;
  Value layer_norm(std::vector<int64_t> normalized_shape, std::optional<Value> weight = std::nullopt,
                   std::optional<Value> bias = std::nullopt, double eps = 1e-5) const;
  Value batch_norm(Value running_mean, Value running_var, std::optional<Value> weight = std::nullopt,
                   std::optional<Value> bias = std::nullopt, double eps = 1e-5) const;

 private:
  friend class GraphBuilder;
  Value(GraphBuilder* b, ValueId id) : builder_(b), id_(id) {}
  Value unary(OpKind op, AttrMap attrs = {}) const;
  Value binary(OpKind op, Value o) const;
  Value binary(OpKind op, double c) const;
  Value reduce(OpKind op, std::vector<int64_t> dims, bool keepdim) const;
  Value norm(OpKind op, std::vector<Value> operands, std::optional<Value> weight, std::optional<Value> bias,
             AttrMap attrs) const;

  GraphBuilder* builder_ = nullptr;
  ValueId id_ = -1;
};

Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator+(Value a, double c);
Value operator-(Value a, double c);
Value operator*(Value a, double c);
Value operator/(Value a, double c);
Value operator*(double c, Value a);
Value operator+(double c, Value a);

class GraphBuilder {
 public:
  explicit GraphBuilder(Precision precision = Precision::FP32, std::string name = "");
  GraphBuilder(const GraphBuilder&) = delete;  // values point at their builder
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  Value input(const std::string& name, Shape shape, std::optional<DType> dtype = std::nullopt,
              InitKind init = InitKind::Auto);
  Value linear(Value x, Value weight, std::optional<Value> bias = std::nullopt);
  Value matmul(Value a, Value b);
  Value conv2d(Value x, Value weight, std::optional<Value> bias = std::nullopt, const Conv2dOptions& opts = {});
  // The gradient of conv2d's weight (torch.nn.grad.conv2d_weight): x the conv's input, grad the gradient of
  // its output; `opts` the conv's -> [Cout, Cin/groups, kernel_size].
  Value conv2d_weight_grad(Value x, Value grad, std::array<int64_t, 2> kernel_size, const Conv2dOptions& opts = {});
  Value constant(double value);
  // Any op of the table by kind, with attributes by name (as in a spec).
  Value op(OpKind kind, const std::vector<Value>& operands, AttrMap attrs = {});
  void output(const std::string& name, Value v);

  // Checks and canonicalizes a copy of the graph (prepare_graph).
  Expected<Graph> build() const;

 private:
  friend class Value;
  Graph g_;
  std::optional<Error> misuse_;  // first misuse (a value of another builder, ...)
};

}  // namespace fusejit
