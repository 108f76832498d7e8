// fusejit/ir.h — the central IR: at most one anchor op (linear, matmul,
// conv2d) and the DAG of elementwise, layout, reduction and pooling ops that
// follows it (a graph without an anchor is a pointwise program of its inputs).
//
// A Graph is a list of SSA nodes in topological order (operands always refer
// to earlier nodes). Inputs are nodes too (op `input`); scalar operands are
// `constant` nodes of rank 0. After `prepare_graph()` every node has its
// inferred TensorType, every attribute is explicit (defaults filled in) and
// the nodes are in canonical order, so printing and hashing are stable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fusejit/error.h"

namespace fusejit {

// ---- element types and precision modes -------------------------------------

enum class DType : uint8_t { F32, F16, BF16 };
std::string_view dtype_name(DType);  // "f32", "f16", "bf16"
std::optional<DType> parse_dtype(std::string_view);
int dtype_size(DType);
// PyTorch's promotion among floating types: equal -> same, else f32.
DType promote(DType a, DType b);

// How the anchor's mainloop multiplies. Epilogues always compute in fp32.
//   fp32: accurate (FFMA or 3xTF32), tf32: opt-in TF32 tensor cores,
//   bf16 / f16: 16-bit operands with fp32 accumulation.
enum class Precision : uint8_t { FP32, TF32, BF16, F16 };
std::string_view precision_name(Precision);  // "fp32", "tf32", "bf16", "f16"
std::optional<Precision> parse_precision(std::string_view);
// The operand dtype a precision mode requires of the anchor's inputs.
DType anchor_dtype(Precision);

using Shape = std::vector<int64_t>;
int64_t numel(const Shape&);
std::string shape_str(const Shape&);  // "[128,64,3,3]"
// PyTorch broadcasting (align right; a dim of 1 stretches). nullopt if the
// shapes are incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  int64_t numel() const { return fusejit::numel(shape); }
  int rank() const { return static_cast<int>(shape.size()); }
  std::string str() const;  // "f32[128,64,3,3]"
  bool operator==(const TensorType&) const = default;
};

// ---- ops ---------------------------------------------------------------------

// X(enum, spec name, category)
#define FUSEJIT_OPS(X)                                \
  X(Input, "input", Leaf)                             \
  X(Constant, "constant", Leaf)                       \
  X(Linear, "linear", Anchor)                         \
  X(Matmul, "matmul", Anchor)                         \
  X(Conv2d, "conv2d", Anchor)                         \
  X(Conv2dWeightGrad, "conv2d_weight_grad", Anchor)   \
  X(Relu, "relu", Unary)                              \
  X(LeakyRelu, "leaky_relu", Unary)                   \
  X(Gelu, "gelu", Unary)                              \
  X(Sigmoid, "sigmoid", Unary)                        \
  X(Tanh, "tanh", Unary)                              \
  X(Silu, "silu", Unary)                              \
  X(Mish, "mish", Unary)                              \
  X(Softplus, "softplus", Unary)                      \
  X(Hardswish, "hardswish", Unary)                    \
  X(Hardsigmoid, "hardsigmoid", Unary)                \
  X(Hardtanh, "hardtanh", Unary)                      \
  X(Elu, "elu", Unary)                                \
  X(Exp, "exp", Unary)                                \
  X(Log, "log", Unary)                                \
  X(Abs, "abs", Unary)                                \
  X(Neg, "neg", Unary)                                \
  X(Sqrt, "sqrt", Unary)                              \
  X(Rsqrt, "rsqrt", Unary)                            \
  X(Square, "square", Unary)                          \
  X(Clamp, "clamp", Unary)                            \
  X(Erf, "erf", Unary)                                \
  X(Cast, "cast", Unary)                              \
  X(Add, "add", Binary)                               \
  X(Sub, "sub", Binary)                               \
  X(Mul, "mul", Binary)                               \
  X(Div, "div", Binary)                               \
  X(Minimum, "minimum", Binary)                       \
  X(Maximum, "maximum", Binary)                       \
  X(Pow, "pow", Binary)                               \
  X(Gt, "gt", Binary)                                 \
  X(Ge, "ge", Binary)                                 \
  X(Lt, "lt", Binary)                                 \
  X(Le, "le", Binary)                                 \
  X(Eq, "eq", Binary)                                 \
  X(Sum, "sum", Reduction)                            \
  X(Mean, "mean", Reduction)                          \
  X(Max, "max", Reduction)                            \
  X(Min, "min", Reduction)                            \
  X(LogSumExp, "logsumexp", Reduction)                \
  X(Softmax, "softmax", Normalize)                    \
  X(LogSoftmax, "log_softmax", Normalize)             \
  X(GroupNorm, "group_norm", Norm)                    \
  X(InstanceNorm, "instance_norm", Norm)              \
  X(LayerNorm, "layer_norm", Norm)                    \
  X(BatchNorm, "batch_norm", Norm)                    \
  X(MaxPool2d, "max_pool2d", Pool)                    \
  X(AvgPool2d, "avg_pool2d", Pool)                    \
  X(GlobalAvgPool, "global_avg_pool", Pool)           \
  X(MaxPool1d, "max_pool1d", Pool)                    \
  X(AvgPool1d, "avg_pool1d", Pool)                    \
  X(Expand, "expand", Layout)                         \
  X(Reshape, "reshape", Layout)                       \
  X(Transpose, "transpose", Layout)                   \
  X(Flip, "flip", Gather)                             \
  X(Im2col, "im2col", Gather)                         \
  X(MaxPool2dBackward, "max_pool2d_backward", Gather) \
  X(AvgPool2dBackward, "avg_pool2d_backward", Gather) \
  X(InsertZeros, "insert_zeros", Gather)              \
  X(Im2colBackward, "im2col_backward", Gather)        \
  X(MaxPool2dDoubleBackward, "max_pool2d_double_backward", Gather) \
  X(InsertZerosBackward, "insert_zeros_backward", Gather)

enum class OpKind : uint8_t {
#define FUSEJIT_ENUM(e, n, c) e,
  FUSEJIT_OPS(FUSEJIT_ENUM)
#undef FUSEJIT_ENUM
};

// Leaf: inputs and constants. Anchor: the GEMM/conv. Unary/Binary:
// elementwise. Reduction: over chosen dims (keepdim). Normalize: softmax-like
// along one dim, same shape out. Pool: windows over spatial or feature dims.
// Norm: group/instance/layer norm (statistics over a contiguous run of each
// sample, then an optional per-channel affine) and batch_norm in inference
// form (per-channel running statistics; codegen lowers it to elementwise ops).
// Layout: expand (broadcast to a shape), reshape (same elements, new shape)
// and transpose (two dims swapped); the backward program uses them.
// Gather: each result element reads its operands at computed positions (flip,
// im2col, the pools' backward, insert_zeros); the backward program of conv2d
// and pooling. Their adjoints (im2col_backward = col2im,
// max_pool2d_double_backward, insert_zeros_backward) differentiate a backward
// program once more.
enum class OpCategory : uint8_t { Leaf, Anchor, Unary, Binary, Reduction, Normalize, Pool, Norm, Layout, Gather };

// Attribute values. `Ints` holds lists (dims, 2-D kernel/stride/padding).
using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;
using AttrMap = std::map<std::string, AttrValue>;  // ordered: canonical
std::string attr_str(const AttrValue&);             // canonical text form

// Kinds of attribute, as a spec writes them. `Pair` accepts an int or a list
// of two ints and is stored as two ints; `Ints` is a list of any length.
enum class AttrKind : uint8_t { Int, Float, Bool, String, Ints, Pair };
std::string attr_kind_phrase(AttrKind kind);  // "an int or a list of two ints", for messages

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
  std::optional<AttrValue> default_value;  // absent & not required & no default:
                                           // derived (pool stride = kernel)
  std::string doc;
};

struct OpInfo {
  OpKind op;
  std::string name;
  OpCategory category;
  int min_operands;
  int max_operands;
  std::vector<std::string> operand_names;  // e.g. {"x", "weight", "bias"}
  std::vector<AttrSpec> attrs;
  std::string summary;
  const AttrSpec* find_attr(std::string_view name) const;
};

const OpInfo& op_info(OpKind);
const std::vector<OpInfo>& all_ops();
std::optional<OpKind> op_from_name(std::string_view);
std::string_view op_name(OpKind);
OpCategory op_category(OpKind);
inline bool is_anchor(OpKind k) { return op_category(k) == OpCategory::Anchor; }
inline bool is_elementwise(OpKind k) {
  auto c = op_category(k);
  return c == OpCategory::Unary || c == OpCategory::Binary;
}

// How test harnesses and the CLI fill an input with seeded random data.
//   uniform01: U[0,1) (activations); normal: N(0,1) (extra parameters);
//   torch_weight / torch_bias: PyTorch's default Linear/Conv2d init,
//   U(-1/sqrt(fan_in), 1/sqrt(fan_in)). `auto` is resolved by prepare_graph:
//   the anchor's x (and matmul's B) -> uniform01, its weight -> torch_weight,
//   its bias -> torch_bias, anything else -> normal.
enum class InitKind : uint8_t { Auto, Uniform01, Normal, TorchWeight, TorchBias };
std::string_view init_name(InitKind);
std::optional<InitKind> parse_init(std::string_view);

// ---- graph ------------------------------------------------------------------

using ValueId = int32_t;

struct Node {
  OpKind op = OpKind::Input;
  std::vector<ValueId> operands;
  AttrMap attrs;       // after prepare_graph: every attribute explicit
  TensorType type;     // inputs: declared; others: inferred by prepare_graph
  std::string name;    // input name, or the value's name in a spec (may be empty)
  SourceLoc loc;       // where it was written, for error messages
  InitKind init = InitKind::Auto;  // inputs only
  int64_t init_fan_in = 0;         // inputs with torch_* init (set by prepare_graph)

  double constant_value() const;   // Constant nodes: attrs["value"]
  int64_t attr_int(const std::string& key) const;
  double attr_float(const std::string& key) const;
  bool attr_bool(const std::string& key) const;
  const std::string& attr_string(const std::string& key) const;
  const std::vector<int64_t>& attr_ints(const std::string& key) const;
};

struct Output {
  std::string name;
  ValueId value = -1;
  SourceLoc loc;
};

struct Graph {
  std::string name;                       // optional; not part of the hash
  Precision precision = Precision::FP32;
  std::vector<Node> nodes;                // topological (SSA) order
  std::vector<Output> outputs;

  ValueId add(Node n);
  const Node& node(ValueId id) const { return nodes.at(static_cast<size_t>(id)); }
  Node& node(ValueId id) { return nodes.at(static_cast<size_t>(id)); }
  std::vector<ValueId> inputs() const;     // Input nodes in declaration order
  std::optional<ValueId> anchor() const;   // the single anchor node
  std::vector<std::vector<ValueId>> users() const;  // users[v] = nodes using v
  // A short label for messages: "conv2d 'y' (line 12)" / "relu %3".
  std::string describe(ValueId id) const;
};

// ---- passes over the IR (ir/) --------------------------------------------------

// Fills attribute defaults, resolves input init kinds, infers every type, checks
// the structure (at most one anchor, whose operands are inputs; SSA order; every
// value used; outputs present and computed) and puts the nodes into canonical order. Errors
// name the op and, when known, the spec location.
Status prepare_graph(Graph& g);

// Checks an already prepared graph without changing it (types consistent with
// a fresh inference, canonical order). For debugging passes.
Status verify_graph(const Graph& g);

// Canonical text form. Values are numbered %0, %1, ... in canonical order;
// input and output names are kept as attributes of the text.
std::string print_graph(const Graph& g);

// Parses print_graph's text back into a prepared Graph (round trip).
Expected<Graph> parse_graph_text(std::string_view text, const std::string& filename = "<ir>");

// Structural hash: the same for graphs equal up to value names, spec layout,
// key order and op order; different for any change of meaning (ops, attributes,
// shapes, dtypes, precision, input order, which values are outputs).
uint64_t structural_hash(const Graph& g);
std::string hash_hex(uint64_t h);  // 16 lowercase hex digits

}  // namespace fusejit
