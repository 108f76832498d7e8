// build_backward (fusejit/backward.h): every gradient of a chain, computed by
// the program's stages on the fp64 reference, against central finite
// differences of L = sum_o <grad_o, y_o> (also fp64, written independently of
// the derivative rules). Plus the program's structure and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "fusejit/spec.h"
#include "tests/gradient_check.h"
#include "tests/random_chains.h"

namespace fusejit {
namespace {

struct Case {
  std::string name;
  std::string inputs;  // YAML list items
  std::string ops;
  std::string outputs;
  std::string precision = "fp32";
};

Graph parse(const Case& c) {
  std::string text = "name: " + c.name + "\nprecision: " + c.precision + "\ninputs:\n" + c.inputs + "ops:\n" + c.ops +
                     "outputs: " + c.outputs + "\n";
  auto g = parse_spec(text, c.name + ".yaml");
  EXPECT_TRUE(static_cast<bool>(g)) << (g ? "" : g.error().message) << "\n" << text;
  return g ? *g : Graph{};
}

using testing::check_graph_gradients;
using testing::GradCheck;

// Every input's gradient against finite differences (tests/gradient_check.h): relative L2 <= 1e-5 and
// each element within 1e-4 of the gradient's RMS.
void check_gradients(const Case& c, const BackwardOptions& opt = {}) {
  SCOPED_TRACE(c.name);
  Graph g = parse(c);
  if (g.nodes.empty()) return;
  check_graph_gradients(g, opt);
}

const std::string kLinearInputs =
    "  - {name: x, shape: [3, 4], init: normal}\n  - {name: w, shape: [5, 4], init: normal}\n";

TEST(Autodiff, LinearBiasReluMatchesFiniteDifferences) {
  check_gradients({"linear_bias_relu", kLinearInputs + "  - {name: b, shape: [5]}\n  - {name: p, shape: [5]}\n",
                   "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: s, op: add, args: [z, p]}\n"
                   "  - {name: y, op: relu, args: [s]}\n",
                   "[y]"});
}

TEST(Autodiff, EveryUnaryOp) {
  const std::vector<std::string> ops = {
      "relu", "leaky_relu, negative_slope: 0.2", "gelu", "gelu, approximate: tanh", "sigmoid", "tanh", "silu",
      "mish", "softplus, beta: 2.0, threshold: 1.5", "hardswish", "hardsigmoid", "hardtanh, min_val: -0.5, max_val: 0.7",
      "elu, alpha: 0.7", "exp", "abs", "neg", "square", "clamp, min: -0.3, max: 0.4", "erf"};
  for (const std::string& op : ops)
    check_gradients({"unary_" + op.substr(0, op.find(',')), kLinearInputs,
                     "  - {name: z, op: linear, args: [x, w]}\n  - {name: y, op: " + op + ", args: [z]}\n", "[y]"});
  // log, sqrt, rsqrt need positive arguments: exp(z) first.
  for (const std::string op : {"log", "sqrt", "rsqrt"})
    check_gradients({"unary_" + op, kLinearInputs,
                     "  - {name: z, op: linear, args: [x, w]}\n  - {name: e, op: exp, args: [z]}\n"
                     "  - {name: y, op: " + op + ", args: [e]}\n",
                     "[y]"});
}

TEST(Autodiff, BinaryOpsWithBroadcastParameters) {
  const std::string in = kLinearInputs + "  - {name: p, shape: [5]}\n  - {name: q, shape: [3, 1]}\n";
  for (const std::string op : {"add", "sub", "mul", "div", "minimum", "maximum"})
    check_gradients({"binary_" + op, in,
                     "  - {name: z, op: linear, args: [x, w]}\n  - {name: u, op: " + op + ", args: [z, p]}\n"
                     "  - {name: y, op: " + op + ", args: [q, u]}\n",
                     "[y]"});
  check_gradients({"binary_pow", in,
                   "  - {name: z, op: linear, args: [x, w]}\n  - {name: e, op: exp, args: [z]}\n"
                   "  - {name: y, op: pow, args: [e, p]}\n  - {name: y2, op: pow, args: [q, 2.0]}\n"
                   "  - {name: y3, op: mul, args: [y, y2]}\n",
                   "[y3]"});
}

TEST(Autodiff, ReductionsSoftmaxAndSeveralOutputs) {
  const std::string in = kLinearInputs + "  - {name: p, shape: [5]}\n";
  for (const std::string r : {"sum", "mean", "max", "min", "logsumexp"})
    for (const std::string keep : {"true", "false"})
      check_gradients({"reduce_" + r + "_" + keep, in,
                       "  - {name: z, op: linear, args: [x, w]}\n  - {name: u, op: mul, args: [z, p]}\n"
                       "  - {name: r, op: " + r + ", args: [u], dims: [1], keepdim: " + keep + "}\n"
                       "  - {name: y, op: tanh, args: [r]}\n",
                       "[y]"});
  check_gradients({"softmax_two_outputs", in,
                   "  - {name: z, op: linear, args: [x, w]}\n  - {name: s, op: softmax, args: [z], dim: 1}\n"
                   "  - {name: l, op: log_softmax, args: [z], dim: -1}\n  - {name: y, op: mul, args: [s, p]}\n",
                   "[y, l, z]"});
  check_gradients({"mean_all_then_scale", kLinearInputs,
                   "  - {name: z, op: linear, args: [x, w]}\n  - {name: m, op: mean, args: [z], dims: [0, 1]}\n"
                   "  - {name: y, op: mul, args: [z, m]}\n",
                   "[y]"});
}

TEST(Autodiff, ResidualUseOfTheAnchorInput) {
  check_gradients({"residual", "  - {name: x, shape: [3, 4], init: normal}\n  - {name: w, shape: [4, 4], init: normal}\n",
                   "  - {name: z, op: linear, args: [x, w]}\n  - {name: g, op: gelu, args: [z]}\n"
                   "  - {name: y, op: add, args: [g, x]}\n",
                   "[y]"});
}

TEST(Autodiff, LinearOverThreeDimsAndMatmul) {
  check_gradients({"linear_3d", "  - {name: x, shape: [2, 3, 4], init: normal}\n  - {name: w, shape: [5, 4], init: normal}\n"
                   "  - {name: b, shape: [5]}\n",
                   "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: y, op: log_softmax, args: [z], dim: 2}\n",
                   "[y]"});
  check_gradients({"matmul_2d", "  - {name: a, shape: [3, 4], init: normal}\n  - {name: b, shape: [4, 5], init: normal}\n",
                   "  - {name: z, op: matmul, args: [a, b]}\n  - {name: y, op: softmax, args: [z], dim: 1}\n", "[y]"});
  check_gradients({"matmul_batched_a", "  - {name: a, shape: [2, 3, 4], init: normal}\n"
                   "  - {name: b, shape: [4, 5], init: normal}\n",
                   "  - {name: z, op: matmul, args: [a, b]}\n  - {name: y, op: sigmoid, args: [z]}\n", "[y]"});
  check_gradients({"matmul_broadcast", "  - {name: a, shape: [1, 3, 4], init: normal}\n"
                   "  - {name: b, shape: [2, 4, 5], init: normal}\n",
                   "  - {name: z, op: matmul, args: [a, b]}\n  - {name: y, op: tanh, args: [z]}\n", "[y]"});
  check_gradients({"matmul_plain", "  - {name: a, shape: [3, 4], init: normal}\n  - {name: b, shape: [4, 5], init: normal}\n",
                   "  - {name: y, op: matmul, args: [a, b]}\n", "[y]"});
}

// Finite differences take two fp64 evaluations of the graph per input element. Under ASan + UBSan (CI's
// hardening job, about 10x slower) the 100 chains come from the smaller graphs, so the test stays well inside
// its timeout: about 9x less work (the inputs' squared sizes summed).
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kMaxChainElements = 1000;
#else
constexpr int64_t kMaxChainElements = 3000;
#endif

// 100 random chains (tests/random_chains.h) whose ops all have derivatives: linear, matmul and conv2d anchors
// (grouped, strided, dilated) with random elementwise DAGs, broadcast operands, reductions, softmax and pooling;
// chains build_backward refuses (an op without a derivative) are skipped, as are the few whose
// inputs are too large for finite differences. Where an f32 operand makes a 16-bit anchor's dZ f32, the
// program casts dZ to the anchor's dtype for its GEMMs (rounded there, in the reference as on a device): those
// chains are checked at the 16-bit precision's reference tolerance.
TEST(Autodiff, RandomDifferentiableChains) {
  int checked = 0, unsupported = 0, conv = 0, pooled = 0, cast = 0;
  for (uint64_t seed = 1; checked < 100 && seed < 1000; ++seed) {
    auto g = testing::random_chain(seed);
    ASSERT_TRUE(g) << g.error().str();
    auto p = build_backward(*g);
    if (!p) {
      ++unsupported;
      continue;
    }
    int64_t elements = 0;
    for (ValueId i : g->inputs()) elements += g->node(i).type.numel();
    if (elements > kMaxChainElements) continue;
    bool rounds_dz = false;
    for (const auto& st : p->stages)
      for (const Node& n : st.graph.nodes) rounds_dz |= n.op == OpKind::Cast;
    SCOPED_TRACE("random chain " + std::to_string(seed) + "\n" + print_graph(*g));
    const Tolerance t16 = tolerance_for(g->precision);
    check_graph_gradients(*g, {}, rounds_dz ? GradCheck{t16.rel_l2, t16.max_elem} : GradCheck{1e-4, 1e-3});
    cast += rounds_dz;
    ++checked;
    for (const Node& n : g->nodes) {
      conv += n.op == OpKind::Conv2d;
      pooled += op_category(n.op) == OpCategory::Pool;
    }
  }
  EXPECT_EQ(checked, 100) << unsupported << " chains had an op without a derivative";
  EXPECT_GT(cast, 0) << "no chain's dZ was cast to its 16-bit anchor dtype";
  std::printf("random chains checked: %d (conv2d nodes %d, pool nodes %d, dZ cast in %d), %d without a backward\n",
              checked, conv, pooled, cast, unsupported);
}

TEST(Autodiff, NoGradInputsAreLeftOut) {
  Case c{"no_grad", kLinearInputs + "  - {name: b, shape: [5]}\n",
         "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: y, op: relu, args: [z]}\n", "[y]"};
  check_gradients(c, BackwardOptions{{"x"}});
  check_gradients(c, BackwardOptions{{"w", "b"}});
  Graph g = parse(c);
  auto p = build_backward(g, BackwardOptions{{"x"}});
  ASSERT_TRUE(static_cast<bool>(p));
  for (const auto& st : p->stages) EXPECT_EQ(st.what.find("dX"), std::string::npos) << "a dX stage for a no_grad x";
  auto bad = build_backward(g, BackwardOptions{{"nope"}});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(bad.error().message.find("'nope'"), std::string::npos) << bad.error().message;
}

TEST(Autodiff, ProgramShape) {
  Graph g = parse({"shape", kLinearInputs + "  - {name: b, shape: [5]}\n",
                   "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: y, op: relu, args: [z]}\n", "[y]"});
  auto p = build_backward(g);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().message;
  // The forward saves Z; stages: epilogue (no anchor), dX, dW; every stage graph names only known buffers.
  EXPECT_EQ(p->forward.outputs.size(), 2u);
  ASSERT_EQ(p->stages.size(), 3u) << print_backward(*p);
  EXPECT_FALSE(p->stages[0].graph.anchor().has_value());
  EXPECT_TRUE(p->stages[1].graph.anchor().has_value());
  EXPECT_TRUE(p->stages[2].graph.anchor().has_value());
  for (const auto& st : p->stages) {
    for (ValueId i : st.graph.inputs()) EXPECT_NE(p->buffer(st.graph.node(i).name), nullptr) << st.graph.node(i).name;
    for (const Output& o : st.graph.outputs) EXPECT_NE(p->buffer(o.name), nullptr) << o.name;
  }
  for (const std::string in : {"x", "w", "b"}) {
    ASSERT_TRUE(p->input_grads.count(in)) << in;
    const BackwardBuffer* buf = p->buffer(p->input_grads.at(in));
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(buf->type.shape, g.node(g.inputs()[in == "x" ? 0 : in == "w" ? 1 : 2]).type.shape) << in;
  }
  const std::string text = print_backward(*p);
  EXPECT_NE(text.find("dW = dZ^T X"), std::string::npos) << text;
}

const std::string kConvXW =
    "  - {name: x, shape: [2, 3, 7, 8], init: normal}\n  - {name: w, shape: [4, 3, 3, 3], init: normal}\n";
const std::string kConvInputs = kConvXW + "  - {name: b, shape: [4]}\n  - {name: p, shape: [4, 1, 1]}\n";

TEST(Autodiff, ConvAndPoolingMatchFiniteDifferences) {
  check_gradients({"seed1_like", kConvInputs,
                   "  - {name: z, op: conv2d, args: [x, w, b]}\n  - {name: r, op: relu, args: [z]}\n"
                   "  - {name: y, op: add, args: [r, p]}\n",
                   "[y]"});
  check_gradients({"seed3_like", kConvInputs,
                   "  - {name: z, op: conv2d, args: [x, w, b]}\n  - {name: t, op: tanh, args: [z]}\n"
                   "  - {name: s, op: mul, args: [t, 2.0]}\n  - {name: u, op: add, args: [s, p]}\n"
                   "  - {name: y, op: max_pool2d, args: [u], kernel_size: 2}\n",
                   "[y]"});
  check_gradients({"padded_dilated_avgpool", kConvXW,
                   "  - {name: z, op: conv2d, args: [x, w], padding: [1, 2], dilation: [2, 1]}\n"
                   "  - {name: a, op: avg_pool2d, args: [z], kernel_size: 3, stride: 2, padding: 1,"
                   " count_include_pad: false, ceil_mode: true}\n"
                   "  - {name: y, op: sigmoid, args: [a]}\n",
                   "[y]"});
  check_gradients({"overlapping_maxpool_and_global_pool", kConvInputs,
                   "  - {name: z, op: conv2d, args: [x, w, b], padding: 1}\n"
                   "  - {name: m, op: max_pool2d, args: [z], kernel_size: 3, stride: 2, padding: 1}\n"
                   "  - {name: a, op: avg_pool2d, args: [z], kernel_size: [2, 3]}\n"
                   "  - {name: g, op: global_avg_pool, args: [z]}\n  - {name: y, op: mul, args: [g, p]}\n",
                   "[m, a, y]"});
  check_gradients({"strided_conv", kConvXW + "  - {name: b, shape: [4]}\n",  // W: a column the windows skip
                   "  - {name: z, op: conv2d, args: [x, w, b], stride: 2, padding: 1}\n"
                   "  - {name: y, op: gelu, args: [z]}\n",
                   "[y]"});
  check_gradients({"strided_dilated_conv", kConvXW,
                   "  - {name: z, op: conv2d, args: [x, w], stride: [3, 2], dilation: [1, 2], padding: [0, 2]}\n"
                   "  - {name: y, op: tanh, args: [z]}\n",
                   "[y]"});
  check_gradients({"grouped_conv",  // dW: a batched matmul per group
                   "  - {name: x, shape: [2, 4, 6, 6], init: normal}\n  - {name: w, shape: [6, 2, 3, 2], init: normal}\n",
                   "  - {name: z, op: conv2d, args: [x, w], groups: 2, padding: [1, 0]}\n"
                   "  - {name: y, op: silu, args: [z]}\n",
                   "[y]"});
  check_gradients({"grouped_strided_dilated_conv_with_bias",
                   "  - {name: x, shape: [2, 6, 9, 8], init: normal}\n  - {name: w, shape: [9, 2, 2, 3], init: normal}\n"
                   "  - {name: b, shape: [9], init: normal}\n",
                   "  - {name: z, op: conv2d, args: [x, w, b], groups: 3, stride: [2, 1], dilation: [2, 1], padding: 1}\n"
                   "  - {name: y, op: tanh, args: [z]}\n",
                   "[y]"});
  check_gradients({"pool1d_and_flip", kLinearInputs + "  - {name: q, shape: [3, 2]}\n",
                   "  - {name: z, op: linear, args: [x, w]}\n"
                   "  - {name: m, op: max_pool1d, args: [z], kernel_size: 2}\n"
                   "  - {name: a, op: avg_pool1d, args: [z], kernel_size: 4, stride: 2, padding: 1}\n"
                   "  - {name: f, op: flip, args: [a], dims: [1]}\n  - {name: y, op: mul, args: [f, m]}\n"
                   "  - {name: v, op: add, args: [y, q]}\n",
                   "[v]"});
}

// Padding beyond dilation * (k - 1): dX's conv would pad by a negative amount, so insert_zeros crops dZ
// (spread first where the conv is strided) and dX pads 0.
TEST(Autodiff, OverPaddedConvMatchesFiniteDifferences) {
  const Case one_by_one{"padded_1x1",
                        "  - {name: x, shape: [2, 3, 5, 6], init: normal}\n  - {name: w, shape: [4, 3, 1, 1], init: normal}\n",
                        "  - {name: z, op: conv2d, args: [x, w], padding: 1}\n  - {name: y, op: tanh, args: [z]}\n", "[y]"};
  check_gradients(one_by_one);
  check_gradients({"padded_3x3_by_3", kConvXW,
                   "  - {name: z, op: conv2d, args: [x, w], padding: 3}\n  - {name: y, op: sigmoid, args: [z]}\n", "[y]"});
  check_gradients({"strided_padded_k3_s2_p3", kConvXW + "  - {name: b, shape: [4], init: normal}\n",  // extra [0, 1]
                   "  - {name: z, op: conv2d, args: [x, w, b], stride: 2, padding: 3}\n"
                   "  - {name: y, op: gelu, args: [z]}\n",
                   "[y]"});
  check_gradients({"mixed_dilated_grouped",  // rows: dilation 2 pads 5 (crop 1); columns: stride 3, pad 1 (no crop)
                   "  - {name: x, shape: [2, 4, 6, 8], init: normal}\n  - {name: w, shape: [6, 2, 3, 2], init: normal}\n",
                   "  - {name: z, op: conv2d, args: [x, w], groups: 2, stride: [1, 3], dilation: [2, 1], padding: [5, 1]}\n"
                   "  - {name: y, op: tanh, args: [z]}\n",
                   "[y]"});
  // The program: dZ cropped by 1 at each side (no spread for stride 1), then dX pads 0.
  auto p = build_backward(parse(one_by_one));
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().message;
  const BackwardBuffer* cropped = p->buffer("tmp_dz_cropped");
  ASSERT_NE(cropped, nullptr) << print_backward(*p);
  EXPECT_EQ(cropped->type.shape, (Shape{2, 4, 5, 6}));  // dZ [2, 4, 7, 8] less 1 at each side
  bool crop_attr = false;
  for (const auto& st : p->stages)
    for (const Node& n : st.graph.nodes) {
      if (n.op == OpKind::InsertZeros) crop_attr |= n.attr_ints("crop") == std::vector<int64_t>{1, 1};
      if (n.op == OpKind::Conv2d) {  // dX reads the cropped dZ
        EXPECT_EQ(n.attr_ints("padding"), (std::vector<int64_t>{0, 0}));
        EXPECT_EQ(st.graph.node(n.operands[0]).name, "tmp_dz_cropped") << print_backward(*p);
      }
      if (n.op == OpKind::Conv2dWeightGrad)  // dW reads dZ as it is
        EXPECT_EQ(st.graph.node(n.operands[1]).name, "tmp_dz") << print_backward(*p);
    }
  EXPECT_TRUE(crop_attr) << print_backward(*p);
}

// The norms (autodiff_norm.cpp): with and without affine parameters, odd sizes, directly after a conv or
// linear or further down the chain, followed by more ops and reductions. batch_norm's running statistics get
// no gradient (as in PyTorch), so the finite-difference checks leave them out.
TEST(Autodiff, NormsMatchFiniteDifferences) {
  const std::string conv6 = "  - {name: x, shape: [2, 3, 7, 8], init: normal}\n"
                            "  - {name: w, shape: [6, 3, 3, 3], init: normal}\n";
  const std::string conv6b = conv6 + "  - {name: b, shape: [6]}\n";
  const std::string affine =
      "  - {name: gamma, shape: [6], init: normal}\n  - {name: beta, shape: [6], init: normal}\n";
  check_gradients({"group_norm_affine_gelu_sum", conv6b + affine,
                   "  - {name: z, op: conv2d, args: [x, w, b]}\n"
                   "  - {name: n, op: group_norm, args: [z, gamma, beta], num_groups: 3}\n"
                   "  - {name: g, op: gelu, args: [n]}\n  - {name: y, op: sum, args: [g], dims: [2, 3]}\n",
                   "[y]"});
  check_gradients({"group_norm_plain", conv6b,
                   "  - {name: z, op: conv2d, args: [x, w, b], padding: 1}\n"
                   "  - {name: y, op: group_norm, args: [z], num_groups: 2, eps: 1e-3}\n",
                   "[y]"});
  check_gradients({"group_norm_per_channel_weight_only", conv6 + "  - {name: gamma, shape: [6], init: normal}\n",
                   "  - {name: z, op: conv2d, args: [x, w]}\n"
                   "  - {name: n, op: group_norm, args: [z, gamma], num_groups: 6}\n"
                   "  - {name: y, op: silu, args: [n]}\n",
                   "[y]"});
  check_gradients({"instance_norm_affine_tanh_mean", conv6 + affine,  // (a conv bias here: a zero gradient)
                   "  - {name: z, op: conv2d, args: [x, w], stride: 2}\n"
                   "  - {name: n, op: instance_norm, args: [z, gamma, beta], eps: 1e-3}\n"
                   "  - {name: t, op: tanh, args: [n]}\n  - {name: y, op: mean, args: [t], dims: [1]}\n",
                   "[y, n]"});
  check_gradients({"instance_norm_plain_scaled", conv6 + "  - {name: p, shape: [6, 1, 1]}\n",
                   "  - {name: z, op: conv2d, args: [x, w]}\n  - {name: n, op: instance_norm, args: [z]}\n"
                   "  - {name: y, op: mul, args: [n, p]}\n",
                   "[y]"});
  check_gradients({"layer_norm_affine_gelu_mean",
                   kLinearInputs + "  - {name: b, shape: [5]}\n  - {name: lw, shape: [5]}\n"
                                   "  - {name: lb, shape: [5]}\n",
                   "  - {name: z, op: linear, args: [x, w, b]}\n"
                   "  - {name: n, op: layer_norm, args: [z, lw, lb], normalized_shape: [5]}\n"
                   "  - {name: g, op: gelu, args: [n]}\n  - {name: y, op: mean, args: [g], dims: [1]}\n",
                   "[y]"});
  check_gradients({"layer_norm_two_dims_weight_only",
                   "  - {name: x, shape: [2, 3, 4], init: normal}\n  - {name: w, shape: [5, 4], init: normal}\n"
                   "  - {name: lw, shape: [3, 5]}\n",
                   "  - {name: z, op: linear, args: [x, w]}\n"
                   "  - {name: n, op: layer_norm, args: [z, lw], normalized_shape: [3, 5], eps: 1e-2}\n"
                   "  - {name: y, op: softmax, args: [n], dim: 2}\n",
                   "[y]"});
  check_gradients({"layer_norm_later_in_the_chain_residual", kLinearInputs + "  - {name: p, shape: [5]}\n",
                   "  - {name: z, op: linear, args: [x, w]}\n  - {name: s, op: mul, args: [z, p]}\n"
                   "  - {name: n, op: layer_norm, args: [s], normalized_shape: [5]}\n"
                   "  - {name: y, op: add, args: [n, z]}\n",
                   "[y]"});
  const std::string stats = "  - {name: rm, shape: [6], init: normal}\n  - {name: rv, shape: [6], init: uniform01}\n";
  const Case bn_chain{"batch_norm_relu_instance_norm", conv6 + stats + affine,
                      "  - {name: z, op: conv2d, args: [x, w]}\n"
                      "  - {name: bn, op: batch_norm, args: [z, rm, rv, gamma, beta]}\n"
                      "  - {name: r, op: relu, args: [bn]}\n  - {name: y, op: instance_norm, args: [r], eps: 1e-3}\n",
                      "[y]"};
  check_gradients(bn_chain, BackwardOptions{{"rm", "rv"}});
  check_gradients({"batch_norm_weight_only_gelu", conv6b + stats + "  - {name: gamma, shape: [6], init: normal}\n",
                   "  - {name: z, op: conv2d, args: [x, w, b], padding: 1}\n"
                   "  - {name: bn, op: batch_norm, args: [z, rm, rv, gamma], eps: 1e-2}\n"
                   "  - {name: y, op: gelu, args: [bn]}\n",
                   "[y]"},
                  BackwardOptions{{"rm", "rv"}});
  check_gradients({"batch_norm_2d_statistics_only",
                   kLinearInputs + "  - {name: rm, shape: [5]}\n  - {name: rv, shape: [5], init: uniform01}\n",
                   "  - {name: z, op: linear, args: [x, w]}\n  - {name: bn, op: batch_norm, args: [z, rm, rv]}\n"
                   "  - {name: y, op: tanh, args: [bn]}\n",
                   "[y]"},
                  BackwardOptions{{"rm", "rv"}});
  // Without no_grad the running statistics get no buffer, and a note says why.
  auto p = build_backward(parse(bn_chain));
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().message;
  EXPECT_EQ(p->input_grads.count("rm") + p->input_grads.count("rv"), 0u);
  EXPECT_EQ(p->input_grads.count("gamma") + p->input_grads.count("beta") + p->input_grads.count("x"), 3u);
  const std::string text = print_backward(*p);
  EXPECT_NE(text.find("'rv' has no gradient (a batch_norm's running statistic"), std::string::npos) << text;
}

TEST(Autodiff, MaxPoolTiesGoToTheFirstMaximum) {
  // relu makes whole windows 0: PyTorch gives each window's gradient to its first element.
  Graph g = parse({"ties", kConvXW,
                   "  - {name: z, op: conv2d, args: [x, w]}\n  - {name: r, op: relu, args: [z]}\n"
                   "  - {name: y, op: max_pool2d, args: [r], kernel_size: 2}\n",
                   "[y]"});
  auto p = build_backward(g);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().message;
  ASSERT_EQ(p->stages.size(), 3u) << print_backward(*p);  // epilogue, dX, dW
  Graph op = parse({"pool_backward", "  - {name: u, shape: [1, 1, 2, 4]}\n  - {name: d, shape: [1, 1, 1, 2]}\n",
                    "  - {name: g, op: max_pool2d_backward, args: [u, d], kernel_size: 2}\n", "[g]"});
  HostTensor u{op.node(op.inputs()[0]).type, {0, 0, 3, 5, 0, 0, 5, 1}};
  HostTensor d{op.node(op.inputs()[1]).type, {2, 7}};
  auto out = evaluate_reference(op, {u, d});
  ASSERT_TRUE(static_cast<bool>(out)) << out.error().message;
  EXPECT_EQ(out->at(0), (std::vector<double>{2, 0, 0, 7, 0, 0, 0, 0}));  // ties (0, 0 / 5, 5): the first
}

TEST(Autodiff, UnsupportedOpsAreClearErrors) {
  // The adjoints of the gather ops (im2col_backward, insert_zeros_backward,
  // max_pool2d_double_backward) have no derivative.
  Graph gather = parse({"gather", "  - {name: x, shape: [18, 9]}\n",
                        "  - {name: y, op: im2col_backward, args: [x], input_shape: [1, 2, 5, 5], kernel_size: 3}\n",
                        "[y]"});
  auto r = build_backward(gather);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(r.error().message.find("im2col_backward 'y': has no derivative in fusejit yet"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().str().find("gather.yaml:"), std::string::npos) << r.error().str();
  // Off every path to a wanted input it is no error: w's gradient through the product with col2im(x).
  const Case beside{"gather_beside", "  - {name: x, shape: [18, 4]}\n  - {name: w, shape: [1, 2, 4, 4]}\n",
                    "  - {name: c, op: im2col_backward, args: [x], input_shape: [1, 2, 4, 4], kernel_size: 3}\n"
                    "  - {name: y, op: mul, args: [c, w]}\n",
                    "[y]"};
  ASSERT_FALSE(static_cast<bool>(build_backward(parse(beside))));
  check_gradients(beside, BackwardOptions{{"x"}});
}

}  // namespace
}  // namespace fusejit
