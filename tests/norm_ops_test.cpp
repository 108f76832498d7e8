// group_norm, instance_norm, layer_norm and batch_norm (inference): shape
// errors with spec locations, the fp64 reference against hand-computed values
// (NaN / Inf included), printer/parser/hash round trips, NVRTC compiles of the
// generated CUDA for sm_80 and sm_90a, and the plan's kernel counts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/norm_chains.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

// ---- shape and attribute errors -------------------------------------------------------

struct ErrorCase {
  const char* label;
  bool linear;       // anchor: linear h [4, 768] (else conv2d c [2, 64, 8, 8])
  const char* p1;    // shapes of the inputs p1, p2
  const char* p2;
  const char* op;    // line 10
  const char* message;
};

const ErrorCase kErrors[] = {
    {"groups_divide", false, "[64]", "[64]", "{name: y, op: group_norm, args: [c, p1, p2], num_groups: 5}",
     "group_norm 'y': num_groups=5 must divide the 64 channels of x [2,64,8,8]"},
    {"weight_shape", false, "[32]", "[64]", "{name: y, op: group_norm, args: [c, p1, p2], num_groups: 4}",
     "operand 'weight' must be [64] (the channels, dim 1 of x), got [32]"},
    {"layer_dims", true, "[512]", "[512]", "{name: y, op: layer_norm, args: [c, p1, p2], normalized_shape: [512]}",
     "normalized_shape [512] does not match the trailing dims of x [4,768]"},
    {"layer_bias", true, "[768]", "[32]", "{name: y, op: layer_norm, args: [c, p1, p2], normalized_shape: [768]}",
     "operand 'bias' must be [768] (normalized_shape), got [32]"},
    {"instance_rank", true, "[768]", "[768]", "{name: y, op: instance_norm, args: [c, p1, p2]}",
     "input 'x' must be at least 3-D"},
    {"batch_args", false, "[64]", "[64]", "{name: y, op: batch_norm, args: [c, p1]}", "expects"},
    {"batch_var", false, "[64]", "[32]", "{name: y, op: batch_norm, args: [c, p1, p2]}",
     "operand 'running_var' must be [64] (the channels, dim 1 of x), got [32]"},
    {"eps_negative", true, "[768]", "[768]",
     "{name: y, op: layer_norm, args: [c, p1, p2], normalized_shape: [768], eps: -1}", "'eps' must be non-negative"},
    {"groups_zero", false, "[64]", "[64]", "{name: y, op: group_norm, args: [c, p1, p2], num_groups: 0}",
     "'num_groups' must be >= 1"},
    {"missing_groups", false, "[64]", "[64]", "{name: y, op: group_norm, args: [c, p1, p2]}",
     "missing required attribute 'num_groups'"},
};

class NormErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(NormErrors, NameTheOpAndLine) {
  const ErrorCase& c = GetParam();
  const std::string spec = std::string("name: bad\n") +                                             // 1
                           "inputs:\n" +                                                         // 2
                           (c.linear ? "  - {name: x, shape: [4, 16]}\n" : "  - {name: x, shape: [2, 3, 8, 8]}\n") +
                           (c.linear ? "  - {name: w, shape: [768, 16]}\n" : "  - {name: w, shape: [64, 3, 1, 1]}\n") +
                           "  - {name: p1, shape: " + c.p1 + "}\n" +                              // 5
                           "  - {name: p2, shape: " + c.p2 + "}\n" +                              // 6
                           "ops:\n" +                                                            // 7
                           (c.linear ? "  - {name: c, op: linear, args: [x, w]}\n"               // 8
                                     : "  - {name: c, op: conv2d, args: [x, w]}\n") +
                           "  # the norm\n"                                                      // 9
                           "  - " + c.op + "\n" +                                                 // 10
                           "outputs: [y]\n";
  auto g = parse_spec(spec, "bad.yaml");
  ASSERT_FALSE(g.ok()) << c.label;
  EXPECT_NE(g.error().message.find(c.message), std::string::npos) << c.label << ": " << g.error().str();
  EXPECT_EQ(g.error().str().rfind("bad.yaml:10:", 0), 0u) << c.label << ": " << g.error().str();
}

INSTANTIATE_TEST_SUITE_P(Table, NormErrors, ::testing::ValuesIn(kErrors),
                         [](const auto& info) { return std::string(info.param.label); });

// ---- reference against hand-computed values ---------------------------------------------

// out = op(x) through an identity anchor: a 1x1 conv (or linear) with identity weights.
std::vector<double> run_reference(const Graph& g, std::vector<std::vector<float>> data) {
  std::vector<HostTensor> inputs;
  const auto ids = g.inputs();
  for (size_t j = 0; j < ids.size(); ++j) inputs.push_back({g.node(ids[j]).type, data[j]});
  auto out = evaluate_reference(g, inputs);
  EXPECT_TRUE(out.ok()) << out.error().str();
  if (!out.ok()) return {};
  // The sampled reference agrees with the dense one.
  std::vector<int64_t> all((*out)[0].size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  auto sampled = evaluate_reference_at(g, inputs, 0, all);
  EXPECT_TRUE(sampled.ok());
  for (size_t i = 0; sampled.ok() && i < all.size(); ++i) {
    const double a = (*out)[0][i], b = (*sampled)[i];
    EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << i << ": " << a << " vs " << b;
  }
  return (*out)[0];
}

std::vector<float> identity(int64_t c) {
  std::vector<float> w(static_cast<size_t>(c * c), 0.f);
  for (int64_t i = 0; i < c; ++i) w[static_cast<size_t>(i * c + i)] = 1.f;
  return w;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i << ": " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    }
  }
}

TEST(NormReference, LayerNormHand) {
  GraphBuilder b;
  auto x = b.input("x", {2, 4});
  auto w = b.input("w", {4, 4});
  auto lw = b.input("lw", {4});
  auto lb = b.input("lb", {4});
  b.output("y", b.linear(x, w).layer_norm({4}, lw, lb, 0.0));
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  // Row [1, 2, 3, 4]: mean 2.5, var 1.25. Row [2, 2, 2, 6]: mean 3, var 3.
  const double s1 = std::sqrt(1.25), s2 = std::sqrt(3.0);
  auto y = run_reference(*g, {{1, 2, 3, 4, 2, 2, 2, 6}, identity(4), {1, 2, 1, -1}, {0, 0, 0.5, 0}});
  expect_near_all(y, {-1.5 / s1, -0.5 / s1 * 2, 0.5 / s1 + 0.5, -1.5 / s1,  //
                      -1 / s2, -1 / s2 * 2, -1 / s2 + 0.5, -3 / s2});
}

TEST(NormReference, GroupNormHandWithNaNAndInf) {
  GraphBuilder b;
  auto x = b.input("x", {2, 4, 1, 2});
  auto w = b.input("w", {4, 4, 1, 1});
  auto gw = b.input("gw", {4});
  auto gb = b.input("gb", {4});
  b.output("y", b.conv2d(x, w).group_norm(2, gw, gb, 0.0));
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // Sample 0, group 0 = channels 0, 1: [1, 3, 5, 7], mean 4, var 5; group 1: [0, 0, 0, 4], mean 1, var 3.
  // Sample 1: group 0 holds a NaN, group 1 an Inf: both groups are NaN.
  const double s5 = std::sqrt(5.0), s3 = std::sqrt(3.0);
  auto y = run_reference(*g, {{1, 3, 5, 7, 0, 0, 0, 4, 1, static_cast<float>(nan), 2, 2, 1, static_cast<float>(inf), 0, 0},
                              identity(4),
                              {1, 2, 3, 4},
                              {0, 0, 1, 1}});
  expect_near_all(y, {-3 / s5, -1 / s5, 2 / s5, 6 / s5, 3 * (-1 / s3) + 1, 3 * (-1 / s3) + 1, 4 * (-1 / s3) + 1,
                      4 * (3 / s3) + 1, nan, nan, nan, nan, nan, nan, nan, nan});
}

TEST(NormReference, InstanceNormHand) {
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 2, 1});
  auto w = b.input("w", {2, 2, 1, 1});
  b.output("y", b.conv2d(x, w).instance_norm(std::nullopt, std::nullopt, 1e-5));
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  // Channel 0: [1, 3] -> mean 2, var 1; channel 1: [2, 2] -> 0 (var 0 + eps).
  const double s = std::sqrt(1.0 + 1e-5);
  expect_near_all(run_reference(*g, {{1, 3, 2, 2}, identity(2)}), {-1 / s, 1 / s, 0, 0});
}

TEST(NormReference, BatchNormHand) {
  GraphBuilder b;
  auto x = b.input("x", {1, 2, 1, 2});
  auto w = b.input("w", {2, 2, 1, 1});
  auto m = b.input("m", {2});
  auto v = b.input("v", {2});
  auto gw = b.input("gw", {2});
  auto gb = b.input("gb", {2});
  b.output("y", b.conv2d(x, w).batch_norm(m, v, gw, gb, 0.0));
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  // (x - m[c]) / sqrt(v[c]) * gw[c] + gb[c] per element: a NaN stays in its
  // pixel (both channels of pixel 1: the 1x1 conv's NaN * 0 is NaN).
  auto y = run_reference(*g, {{3, std::nanf(""), 5, -1}, identity(2), {1, 1}, {4, 0.25f}, {2, 1}, {0.5f, 0}});
  expect_near_all(y, {2.5, std::nan(""), 8, std::nan("")});
}

// ---- printer / parser / hash ------------------------------------------------------------

Expected<Graph> all_four(int64_t groups) {
  GraphBuilder b(Precision::FP32, "norms");
  auto x = b.input("x", {2, 8, 5, 5});
  auto w = b.input("w", {8, 8, 3, 3});
  auto c = b.conv2d(x, w);
  auto gw = b.input("gw", {8}, DType::F32, InitKind::Normal);
  auto gn = c.group_norm(groups, gw, b.input("gb", {8}), 1e-4);
  auto in = gn.instance_norm();
  auto ln = in.layer_norm({3, 3}, b.input("lw", {3, 3}));
  auto bn = ln.batch_norm(b.input("m", {8}), b.input("v", {8}), gw);
  b.output("y", bn);
  return b.build();
}

TEST(NormIr, PrintParseHashRoundTrip) {
  auto g = all_four(4);
  ASSERT_TRUE(g) << g.error().str();
  const std::string text = print_graph(*g);
  EXPECT_NE(text.find("group_norm"), std::string::npos) << text;
  EXPECT_NE(text.find("normalized_shape=[3,3]"), std::string::npos) << text;
  auto back = parse_graph_text(text);
  ASSERT_TRUE(back) << back.error().str() << "\n" << text;
  EXPECT_EQ(print_graph(*back), text);
  EXPECT_EQ(structural_hash(*back), structural_hash(*g));
  auto other = all_four(2);
  ASSERT_TRUE(other);
  EXPECT_NE(structural_hash(*other), structural_hash(*g));
  // Defaults are explicit after prepare_graph.
  auto spec = parse_spec(
      "inputs:\n  - {name: x, shape: [4, 16]}\n  - {name: w, shape: [8, 16]}\n"
      "ops:\n  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: layer_norm, args: [h], normalized_shape: 8}\n"
      "outputs: [y]\n");
  ASSERT_TRUE(spec) << spec.error().str();
  EXPECT_NE(print_graph(*spec).find("eps=1e-05"), std::string::npos) << print_graph(*spec);
}

// ---- codegen ----------------------------------------------------------------------------

int launches(const Graph& g, const std::string& arch = "sm_90a") {
  auto p = generate_program(g, {arch, ""});
  EXPECT_TRUE(p) << p.error().str();
  return p ? static_cast<int>(testing::chain_launches(*p)) : -1;
}

TEST(NormCodegen, KernelCounts) {
  auto gn = testing_norm::conv_chain(Precision::FP32, "group_norm_swish");
  auto ln = testing_norm::linear_chain(Precision::FP32, "layer_norm_relu");
  auto bn = testing_norm::conv_chain(Precision::FP32, "batch_norm_relu");
  auto bl = testing_norm::linear_chain(Precision::BF16, "batch_norm_tanh");
  ASSERT_TRUE(gn && ln && bn && bl);
  EXPECT_EQ(launches(*gn), 2);  // conv, then the norm kernel with the swish fused
  EXPECT_EQ(launches(*ln), 2);
  EXPECT_EQ(launches(*bn), 1);  // batch_norm and relu in the conv epilogue
  EXPECT_EQ(launches(*bl), 1);
  auto p = generate_program(*gn, {"sm_80", ""});
  ASSERT_TRUE(p);
  EXPECT_NE(p->source.find("fj::norm_rows_held<"), std::string::npos);  // rows of 4 x 99
  EXPECT_NE(p->plan_text.find("norm"), std::string::npos) << p->plan_text;
  // simplify=0 still lowers batch_norm.
  auto q = generate_program(*bn, {"sm_80", "simplify=0"});
  ASSERT_TRUE(q) << q.error().str();
  EXPECT_EQ(q->launches.size(), 1u);
}

// A norm kernel holds a row in registers where it is at most 16 elements a thread and nothing is pooled or
// reduced after the norm (fj::norm_rows_held), copies a longer row to shared memory (norm_rows' kCached), and
// with norm_cache=0 reads the row from memory in each pass; every form compiles without spills.
TEST(NormCodegen, RowsHeldInRegistersCopiedOrReread) {
  struct Case {
    const char* kind;
    bool conv;
    std::string config, expect;
  };
  const std::vector<Case> cases = {
      {"layer_norm_relu", false, "", "fj::norm_rows_held<"},  // rows of 100
      {"group_norm_swish", true, "", "fj::norm_rows_held<"},  // rows of 4 x 99
      {"group_norm_wide", true, "", "fj::norm_rows<256, 256, true>"},  // rows of 16 x 576
      {"group_norm_swish_avgpool", true, "", "fj::norm_rows<32, 256, true>"},  // pooled by the norm kernel
      {"layer_norm_relu", false, "norm_cache=0", ", false>"},
      {"group_norm_wide", true, "norm_cache=0", "fj::norm_rows<256, 256, false>"},
  };
  for (const Case& c : cases) {
    auto g = c.conv ? testing_norm::conv_chain(Precision::BF16, c.kind) : testing_norm::linear_chain(Precision::BF16, c.kind);
    ASSERT_TRUE(g) << g.error().str();
    auto p = generate_program(*g, {"sm_90a", c.config});
    ASSERT_TRUE(p) << c.kind << ": " << p.error().str();
    EXPECT_NE(p->source.find(c.expect), std::string::npos) << c.kind << " [" << c.config << "]\n" << p->source;
    const bool held = c.expect == "fj::norm_rows_held<";
    EXPECT_EQ(p->source.find("each row held in registers") != std::string::npos, held) << c.kind;
    if (held) EXPECT_EQ(p->launches.back().shared_bytes, 0u) << c.kind;
    auto cubin = compile_to_cubin(p->source, p->name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.kind << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.kind << "\n" << cubin->log;
  }
}

TEST(NormCodegen, BatchNormParamsMustBeViewable) {
  GraphBuilder b;
  auto x = b.input("x", {2, 4, 3, 3});
  auto w = b.input("w", {4, 4, 1, 1});
  auto m = b.input("m", {4});
  auto v = b.input("v", {4});
  auto c = b.conv2d(x, w);
  b.output("y", c.batch_norm(m, v));
  b.output("m_too", c.sum({0, 2, 3}) + m);  // m also read as a [4] value
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  auto p = generate_program(*g, {"sm_80", ""});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("must be a graph input read only by batch_norms"), std::string::npos)
      << p.error().str();
}

TEST(NormCodegen, EveryChainCompilesWithNvrtc) {
  const auto chains = testing_norm::norm_chains({Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16});
  for (const auto& c : chains) {
    ASSERT_TRUE(c.graph) << c.label << ": " << c.graph.error().str();
    for (const char* arch : {"sm_80", "sm_90a"}) {
      auto p = generate_program(*c.graph, {arch, ""});
      ASSERT_TRUE(p) << c.label << " " << arch << ": " << p.error().str();
      auto cubin = compile_to_cubin(p->source, p->name, {arch, false, {}});
      EXPECT_TRUE(cubin) << c.label << " " << arch << ": " << (cubin ? "" : cubin.error().str().substr(0, 4000));
    }
  }
}

}  // namespace
}  // namespace fusejit
