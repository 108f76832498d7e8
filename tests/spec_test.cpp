// The YAML spec front end: what a spec turns into, and what does not matter.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "fusejit/ir.h"
#include "fusejit/spec.h"

namespace fusejit {
namespace {

const std::string kExamples = std::string(FUSEJIT_SOURCE_DIR) + "/examples/";

Graph load(const std::string& file) {
  auto g = load_spec_file(kExamples + file);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  return g.ok() ? g.take() : Graph{};
}

Graph parse_ok(const std::string& text) {
  auto g = parse_spec(text, "test.yaml");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  return g.ok() ? g.take() : Graph{};
}

// The node with that value name (prepared graphs are in canonical order, so
// tests look nodes up by name rather than by position).
const Node& named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no value named " << name;
  static const Node none;
  return none;
}

const Node& operand(const Graph& g, const Node& n, size_t k) { return g.node(n.operands.at(k)); }

TEST(Spec, Seed1ConvReluBias) {
  Graph g = load("seed1_conv_relu_bias.yaml");
  EXPECT_EQ(g.name, "seed1_conv_relu_bias");
  EXPECT_EQ(g.precision, Precision::FP32);
  std::vector<ValueId> inputs = g.inputs();
  ASSERT_EQ(inputs.size(), 4u);
  const char* names[] = {"x", "conv_w", "conv_b", "bias"};
  const Shape shapes[] = {{128, 64, 128, 128}, {128, 64, 3, 3}, {128}, {128, 1, 1}};
  const InitKind inits[] = {InitKind::Uniform01, InitKind::TorchWeight, InitKind::TorchBias, InitKind::Normal};
  for (size_t i = 0; i < 4; ++i) {
    const Node& in = g.node(inputs[i]);
    EXPECT_EQ(in.name, names[i]);
    EXPECT_EQ(in.type, (TensorType{DType::F32, shapes[i]})) << in.name;
    EXPECT_EQ(in.init, inits[i]) << in.name;
  }
  EXPECT_EQ(g.node(inputs[1]).init_fan_in, 64 * 3 * 3);

  const Node& conv = named(g, "conv");
  EXPECT_EQ(conv.op, OpKind::Conv2d);
  ASSERT_EQ(conv.operands.size(), 3u);
  EXPECT_EQ(operand(g, conv, 0).name, "x");
  EXPECT_EQ(operand(g, conv, 1).name, "conv_w");
  EXPECT_EQ(operand(g, conv, 2).name, "conv_b");
  EXPECT_EQ(conv.attr_ints("stride"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv.attr_ints("padding"), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(conv.attr_ints("dilation"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv.attr_int("groups"), 1);
  EXPECT_EQ(conv.type, (TensorType{DType::F32, {128, 128, 126, 126}}));

  const Node& act = named(g, "act");
  EXPECT_EQ(act.op, OpKind::Relu);
  EXPECT_EQ(operand(g, act, 0).name, "conv");
  const Node& y = named(g, "y");
  EXPECT_EQ(y.op, OpKind::Add);
  EXPECT_EQ(operand(g, y, 0).name, "act");
  EXPECT_EQ(operand(g, y, 1).name, "bias");

  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].name, "y");
  EXPECT_EQ(g.node(g.outputs[0].value).type, (TensorType{DType::F32, {128, 128, 126, 126}}));
}

TEST(Spec, Seed2LinearBiasRelu) {
  Graph g = load("seed2_linear_bias_relu.yaml");
  const Node& gemm = named(g, "gemm");
  EXPECT_EQ(gemm.op, OpKind::Linear);
  ASSERT_EQ(gemm.operands.size(), 2u);  // bias=False
  EXPECT_TRUE(gemm.attrs.empty());
  EXPECT_EQ(named(g, "gemm_w").type.shape, (Shape{8192, 8192}));
  EXPECT_EQ(named(g, "bias").type.shape, (Shape{8192}));
  EXPECT_EQ(named(g, "biased").op, OpKind::Add);
  const Node& y = named(g, "y");
  EXPECT_EQ(y.op, OpKind::Relu);
  EXPECT_EQ(y.type, (TensorType{DType::F32, {1024, 8192}}));
}

TEST(Spec, Seed3ConvTanhScaleBiasMaxpool) {
  Graph g = load("seed3_conv_tanh_scale_bias_maxpool.yaml");
  EXPECT_EQ(named(g, "conv").type.shape, (Shape{128, 64, 254, 254}));
  EXPECT_EQ(named(g, "act").op, OpKind::Tanh);
  const Node& scaled = named(g, "scaled");
  EXPECT_EQ(scaled.op, OpKind::Mul);
  const Node& factor = operand(g, scaled, 1);
  EXPECT_EQ(factor.op, OpKind::Constant);
  EXPECT_EQ(factor.constant_value(), 2.0);
  EXPECT_EQ(factor.type.rank(), 0);
  const Node& pool = named(g, "y");
  EXPECT_EQ(pool.op, OpKind::MaxPool2d);
  EXPECT_EQ(pool.attr_ints("kernel_size"), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(pool.attr_ints("stride"), (std::vector<int64_t>{4, 4}));  // derived from kernel_size
  EXPECT_EQ(pool.attr_ints("padding"), (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(pool.attr_bool("ceil_mode"));
  EXPECT_EQ(pool.type.shape, (Shape{128, 64, 63, 63}));
}

const char* kSmall = R"(name: small
inputs:
  - {name: x, shape: [4, 8]}
  - {name: w, shape: [16, 8]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: a, op: mul, args: [h, 3]}
  - {name: b, op: add, args: [a, -1.5e-1]}
  - {name: y, op: maximum, args: [b, .inf]}
outputs: [y]
)";

TEST(Spec, NumbersInArgsBecomeConstants) {
  Graph g = parse_ok(kSmall);
  const Node& three = operand(g, named(g, "a"), 1);
  EXPECT_EQ(three.op, OpKind::Constant);
  EXPECT_TRUE(std::holds_alternative<double>(three.attrs.at("value")));  // ints become floats
  EXPECT_EQ(three.constant_value(), 3.0);
  EXPECT_EQ(three.type, (TensorType{DType::F32, {}}));
  EXPECT_EQ(three.loc.line, 7);
  EXPECT_EQ(three.loc.col, 34);
  EXPECT_EQ(operand(g, named(g, "b"), 1).constant_value(), -0.15);
  EXPECT_EQ(operand(g, named(g, "y"), 1).constant_value(), std::numeric_limits<double>::infinity());
}

TEST(Spec, LocationsPointAtTheMaps) {
  Graph g = parse_ok(kSmall);
  const Node& w = named(g, "w");
  EXPECT_EQ(w.loc.file, "test.yaml");
  EXPECT_EQ(w.loc.line, 4);
  EXPECT_EQ(w.loc.col, 5);
  EXPECT_EQ(named(g, "h").loc.line, 6);
  EXPECT_EQ(named(g, "y").loc.line, 9);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].loc.line, 10);
  EXPECT_EQ(g.outputs[0].loc.col, 11);
}

TEST(Spec, DtypeDefaultsFollowPrecision) {
  Graph g = parse_ok(R"(
precision: bf16
inputs:
  - {name: x, shape: [4, 8]}
  - {name: w, shape: [16, 8]}
  - {name: s, shape: [16], dtype: f32}
  - {name: t, shape: [16], dtype: f16}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: a, op: mul, args: [h, s]}
  - {name: y, op: add, args: [a, t]}
outputs: [y]
)");
  EXPECT_EQ(g.precision, Precision::BF16);
  EXPECT_EQ(named(g, "x").type.dtype, DType::BF16);
  EXPECT_EQ(named(g, "w").type.dtype, DType::BF16);
  EXPECT_EQ(named(g, "s").type.dtype, DType::F32);
  EXPECT_EQ(named(g, "t").type.dtype, DType::F16);
  EXPECT_EQ(named(g, "h").type.dtype, DType::BF16);
}

// cast: the result has the attribute's dtype (aliases stored canonical), the
// shape of its operand; binary ops promote from there.
TEST(Spec, CastSetsTheDtype) {
  Graph g = parse_ok(R"(
precision: bf16
inputs:
  - {name: x, shape: [4, 8]}
  - {name: w, shape: [16, 8]}
  - {name: s, shape: [16], dtype: f32}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: hf, op: cast, args: [h], dtype: float32}
  - {name: y, op: mul, args: [hf, s]}
  - {name: y16, op: cast, args: [y], dtype: f16}
  - {name: z, op: cast, args: [h], dtype: bf16}
outputs: [y16, z]
)");
  EXPECT_EQ(named(g, "hf").type, (TensorType{DType::F32, {4, 16}}));
  EXPECT_EQ(named(g, "hf").attr_string("dtype"), "f32");
  EXPECT_EQ(named(g, "y").type.dtype, DType::F32);
  EXPECT_EQ(named(g, "y16").type, (TensorType{DType::F16, {4, 16}}));
  EXPECT_EQ(named(g, "z").type.dtype, DType::BF16);
  EXPECT_NE(print_graph(g).find("dtype=\"f32\" : f32[4,16]"), std::string::npos) << print_graph(g);
}

TEST(Spec, AttributeForms) {
  Graph g = parse_ok(R"(
inputs:
  - {name: x, shape: [2, 4, 16, 16]}
  - {name: w, shape: [8, 2, 3, 3]}
ops:
  - {name: c, op: conv2d, args: [x, w], stride: 2, padding: [1, 0], groups: 2}
  - {name: s, op: softplus, args: [c], beta: 2}
  - {name: m, op: mean, args: [s], dims: -1, keepdim: True}
  - {name: l, op: clamp, args: [m], min: -.inf, max: 4}
  - {name: y, op: gelu, args: [l], approximate: tanh}
outputs: [y]
)");
  const Node& c = named(g, "c");
  EXPECT_EQ(c.attr_ints("stride"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.attr_ints("padding"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(c.attr_int("groups"), 2);
  EXPECT_EQ(c.type.shape, (Shape{2, 8, 8, 7}));
  EXPECT_EQ(named(g, "s").attr_float("beta"), 2.0);
  EXPECT_EQ(named(g, "m").attr_ints("dims"), (std::vector<int64_t>{3}));
  EXPECT_TRUE(named(g, "m").attr_bool("keepdim"));
  EXPECT_EQ(named(g, "l").attr_float("min"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(named(g, "l").attr_float("max"), 4.0);
  EXPECT_EQ(named(g, "y").attr_string("approximate"), "tanh");
}

// ---- what must not change the graph --------------------------------------------

const char* kFlow = R"(name: layout
precision: tf32
inputs:
  - {name: x, shape: [64, 32]}
  - {name: w, shape: [48, 32]}
  - {name: b, shape: [48], init: normal}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: s, op: add, args: [h, b]}
  - {name: m, op: max, args: [s], dims: [1], keepdim: true}
  - {name: y, op: leaky_relu, args: [s], negative_slope: 0.2}
  - {name: z, op: sub, args: [y, m]}
outputs: [z, m]
)";

// The same graph: block style, shuffled keys (top level and inside maps),
// comments and blank lines.
const char* kBlock = R"(# a comment
outputs:
  - z
  - m
ops:
  - args: [x, w]     # the anchor
    op: linear
    name: h

  - op: add
    name: s
    args:
      - h
      - b
  - keepdim: true
    dims: [1]
    args: [s]
    op: max
    name: m
  - negative_slope: 0.2
    name: y
    op: leaky_relu
    args: [s]
  - {args: [y, m], op: sub, name: z}
precision: tf32
inputs:
  - shape: [64, 32]
    name: x
  - name: w
    shape:
      - 48
      - 32
  - {init: normal, shape: [48], name: b}
name: layout
)";

// kFlow with intermediate values renamed and independent ops reordered.
const char* kRenamed = R"(name: other
precision: tf32
inputs:
  - {name: x, shape: [64, 32]}
  - {name: w, shape: [48, 32]}
  - {name: b, shape: [48], init: normal}
ops:
  - {name: gemm, op: linear, args: [x, w]}
  - {name: biased, op: add, args: [gemm, b]}
  - {name: act, op: leaky_relu, args: [biased], negative_slope: 0.2}
  - {name: row_max, op: max, args: [biased], dims: [1], keepdim: true}
  - {name: z, op: sub, args: [act, row_max]}
outputs: [z, row_max]
)";

TEST(Spec, LayoutDoesNotMatter) {
  Graph flow = parse_ok(kFlow);
  Graph block = parse_ok(kBlock);
  EXPECT_EQ(print_graph(flow), print_graph(block));
  EXPECT_EQ(structural_hash(flow), structural_hash(block));
}

TEST(Spec, ValueNamesAndOpOrderDoNotChangeTheHash) {
  Graph flow = parse_ok(kFlow);
  Graph renamed = parse_ok(kRenamed);
  EXPECT_NE(print_graph(flow), print_graph(renamed));  // the names are printed
  EXPECT_EQ(structural_hash(flow), structural_hash(renamed));
}

TEST(Spec, MeaningChangesTheHash) {
  const uint64_t base = structural_hash(parse_ok(kFlow));
  auto variant = [&](const std::string& from, const std::string& to) {
    std::string text = kFlow;
    size_t pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    text.replace(pos, from.size(), to);
    return structural_hash(parse_ok(text));
  };
  EXPECT_NE(base, variant("negative_slope: 0.2", "negative_slope: 0.3"));
  EXPECT_NE(base, variant("dims: [1]", "dims: [0, 1]"));
  EXPECT_NE(base, variant("precision: tf32", "precision: fp32"));
  EXPECT_NE(base, variant("[64, 32]", "[65, 32]"));
  EXPECT_NE(base, variant("op: sub", "op: add"));
  EXPECT_NE(base, variant("outputs: [z, m]", "outputs: [m, z]"));
  EXPECT_NE(base, variant("shape: [48], init", "shape: [48], dtype: f16, init"));
}

// ---- files and robustness ------------------------------------------------------

TEST(Spec, MissingFileIsAnError) {
  auto g = load_spec_file(kExamples + "no_such_spec.yaml");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message, "cannot read '" + kExamples + "no_such_spec.yaml': No such file or directory");
}

TEST(Spec, DirectoryIsAnError) {
  auto g = load_spec_file(kExamples);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("cannot read"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("directory"), std::string::npos) << g.error().message;
}

TEST(Spec, FileNameAppearsInErrors) {
  auto g = parse_spec("inputs: [\n", "my/spec.yaml");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().loc.file, "my/spec.yaml");
  EXPECT_EQ(g.error().str().rfind("my/spec.yaml:", 0), 0u) << g.error().str();
}

// Damaged variants of a valid spec (characters deleted, duplicated or
// replaced at random) must come back as values or errors, never as
// exceptions or crashes, and every error must say something.
TEST(Spec, DamagedSpecsNeverThrow) {
  const std::string good = kBlock;
  const std::string alphabet = "{}[]:-,#&*!|>'\"% \n\tab0.9";
  std::mt19937 rng(1234);
  int errors = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    std::string text = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0: text.erase(pos, 1 + rng() % 3); break;
        case 1: text.insert(pos, text.substr(pos, 1 + rng() % 8)); break;
        default: text[pos] = alphabet[rng() % alphabet.size()]; break;
      }
    }
    Expected<Graph> g = Error("not run");
    ASSERT_NO_THROW(g = parse_spec(text, "fuzz.yaml")) << text;
    if (!g.ok()) {
      ++errors;
      EXPECT_FALSE(g.error().message.empty()) << text;
    }
  }
  EXPECT_GT(errors, 100);  // the damage really produced bad specs
}

}  // namespace
}  // namespace fusejit
