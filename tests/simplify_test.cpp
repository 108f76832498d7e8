// Graph simplification before planning (compiler/simplify.h): what each pass
// folds and what it must not, the kernels it saves, and that the simplified
// graph means what the graph as written means under the fp64 reference, on
// inputs with NaN, +inf and -inf (positions bitwise, finite values equal).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "compiler/codegen.h"
#include "compiler/cpu_program.h"
#include "compiler/plan.h"
#include "compiler/simplify.h"
#include "compiler/simplify_passes.h"
#include "fusejit/builder.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "tests/random_chains.h"
#include "tests/program_util.h"
#include "tests/simplify_util.h"

namespace fusejit {
namespace {

using namespace simplify_test;

// ---- size-1 dims ----------------------------------------------------------------

TEST(Simplify, IssueChainSumThenReductionsOverTheSize1Dim) {
  // The issue's chain: linear, a row sum (keepdim), then max / mean /
  // logsumexp / logsumexp over the now size-1 dim.
  Graph g = spec(
      "name: chain\nprecision: fp32\ninputs:\n"
      "  - {name: x, shape: [256, 64]}\n  - {name: w, shape: [128, 64]}\n  - {name: e, shape: [256, 128]}\n"
      "ops:\n  - {name: h, op: linear, args: [x, w]}\n  - {name: t, op: add, args: [h, e]}\n"
      "  - {name: s, op: sum, args: [t], dims: -1, keepdim: true}\n"
      "  - {name: m, op: max, args: [s], dims: -1, keepdim: true}\n"
      "  - {name: a, op: mean, args: [m], dims: -1, keepdim: true}\n"
      "  - {name: l, op: logsumexp, args: [a], dims: -1, keepdim: true}\n"
      "  - {name: y, op: logsumexp, args: [l], dims: -1, keepdim: true}\n"
      "outputs: [y]\n");
  std::vector<std::string> notes;
  Graph s = simplified(g, &notes);
  EXPECT_EQ(count(s, OpKind::Sum), 1);
  EXPECT_EQ(count(s, OpKind::Max) + count(s, OpKind::Mean) + count(s, OpKind::LogSumExp), 0) << print_graph(s);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0].rfind("simplify: ", 0), 0u) << notes[0];
  expect_same_meaning(g, s);

  const Program before = program(g, "simplify=0"), after = program(g);
  EXPECT_GT(testing::chain_launches(before), 3u) << before.plan_text;
  EXPECT_EQ(testing::chain_launches(after), 1u) << after.plan_text;
  EXPECT_GT(scratch_bytes(before), 0) << before.plan_text;
  EXPECT_EQ(scratch_bytes(after), 0) << after.plan_text;
  EXPECT_NE(after.plan_text.find("note: simplify: logsumexp 'y' over [1] of size 1 -> identity"), std::string::npos)
      << after.plan_text;
  EXPECT_EQ(before.plan_text.find("simplify:"), std::string::npos) << before.plan_text;
  if (cpu_backend_available()) {  // the CPU backend plans the same kernels (row reductions fused along N)
    auto cpu0 = generate_cpu_program(g, {{}, "simplify=0"}), cpu1 = generate_cpu_program(g, {});
    ASSERT_TRUE(cpu0.ok() && cpu1.ok());
    EXPECT_EQ(cpu0->launches.size(), testing::chain_launches(before)) << cpu0->plan_text;
    EXPECT_EQ(cpu0->scratch.size(), testing::chain_scratch(before).size()) << cpu0->plan_text;
    EXPECT_EQ(cpu1->launches.size(), 1u) << cpu1->plan_text;
    EXPECT_TRUE(cpu1->scratch.empty()) << cpu1->plan_text;
    EXPECT_NE(cpu1->plan_text.find("note: simplify: "), std::string::npos) << cpu1->plan_text;
  }
  std::cout << "issue chain: " << before.launches.size() << " kernels, " << before.scratch.size()
            << " scratch buffers (simplify=0) -> " << after.launches.size() << " kernels, " << after.scratch.size()
            << " scratch buffers\n";
}

TEST(Simplify, ReductionsOverSize1DimsAreTheIdentity) {
  for (const char* op : {"sum", "mean", "max", "min", "logsumexp"}) {
    SCOPED_TRACE(op);
    Graph g = spec(size1_spec(std::string("  - {name: r, op: ") + op + ", args: [t], dims: -1, keepdim: true}\n"
                              "  - {name: y, op: mul, args: [r, 3]}\n",
                              "y"));
    Graph s = simplified(g);
    EXPECT_EQ(s.nodes.size() + 1, g.nodes.size()) << print_graph(s);
    expect_same_meaning(g, s);
    EXPECT_LE(program(g).launches.size(), program(g, "simplify=0").launches.size());  // fused along N=1 either way
  }
}

TEST(Simplify, ReductionsWithoutKeepdimStay) {
  // [64, 1] -> [64]: the dim goes away and there is no reshape op.
  Graph g = spec(size1_spec("  - {name: r, op: max, args: [t], dims: -1}\n", "r"));
  EXPECT_EQ(print_graph(simplified(g)), print_graph(g));
}

TEST(Simplify, ReductionWithoutKeepdimOfAKeepdimReductionDropsItsDims) {
  // l = logsumexp(a, dims 1) over a's kept size-1 dim -> sum(t, dims 1): the
  // keepdim chain s -> max -> mean folds to s, then the pair (s, l) to one sum.
  for (const char* inner : {"sum", "max", "logsumexp"}) {
    SCOPED_TRACE(inner);
    Graph g = spec(
        "name: lse\nprecision: fp32\ninputs:\n"
        "  - {name: x, shape: [64, 32]}\n  - {name: w, shape: [16, 32]}\n  - {name: e, shape: [64, 16]}\n"
        "ops:\n  - {name: h, op: linear, args: [x, w]}\n  - {name: t, op: add, args: [h, e]}\n"
        "  - {name: s, op: " + std::string(inner) + ", args: [t], dims: [1], keepdim: true}\n"
        "  - {name: m, op: max, args: [s], dims: [1], keepdim: true}\n"
        "  - {name: a, op: mean, args: [m], dims: [1], keepdim: true}\n"
        "  - {name: l, op: logsumexp, args: [a], dims: [1]}\n"
        "outputs: [l]\n");
    std::vector<std::string> notes;
    Graph s = simplified(g, &notes);
    int reductions = 0;
    for (const Node& n : s.nodes) {
      if (op_category(n.op) != OpCategory::Reduction) continue;
      ++reductions;
      EXPECT_EQ(op_name(n.op), inner);
      EXPECT_FALSE(n.attr_bool("keepdim"));
      EXPECT_EQ(n.type.shape, (Shape{64}));
    }
    EXPECT_EQ(reductions, 1) << print_graph(s);
    bool noted = false;
    for (const std::string& n : notes) noted = noted || n.find("without keepdim") != std::string::npos;
    EXPECT_TRUE(noted);
    expect_same_meaning(g, s);
    EXPECT_EQ(testing::chain_launches(program(g)), 1u) << program(g).plan_text;
  }
  // Other dims than the inner reduction kept, or the inner one without keepdim: unchanged.
  Graph other = spec(
      "name: other\nprecision: fp32\ninputs:\n"
      "  - {name: x, shape: [4, 1, 8]}\n  - {name: w, shape: [16, 8]}\n"
      "ops:\n  - {name: h, op: linear, args: [x, w]}\n"
      "  - {name: s, op: sum, args: [h], dims: [2], keepdim: true}\n"
      "  - {name: r, op: max, args: [s], dims: [1]}\n"
      "outputs: [r]\n");
  Graph so = simplified(other);
  EXPECT_EQ(count(so, OpKind::Sum), 1);
  EXPECT_EQ(count(so, OpKind::Max), 1) << print_graph(so);
  expect_same_meaning(other, so);
}

TEST(Simplify, ReductionDropsItsSize1Dims) {
  Graph g = spec(
      "name: part\nprecision: fp32\ninputs:\n"
      "  - {name: x, shape: [4, 1, 8]}\n  - {name: w, shape: [16, 8]}\n"
      "ops:\n  - {name: h, op: linear, args: [x, w]}\n"
      "  - {name: r, op: logsumexp, args: [h], dims: [1, 2], keepdim: true}\n"
      "outputs: [r]\n");
  Graph s = simplified(g);
  ASSERT_EQ(count(s, OpKind::LogSumExp), 1);
  for (const Node& n : s.nodes)
    if (n.op == OpKind::LogSumExp) EXPECT_EQ(n.attr_ints("dims"), (std::vector<int64_t>{2}));
  expect_same_meaning(g, s);
}

TEST(Simplify, SoftmaxOverSize1IsOneOnlyForFiniteValues) {
  Graph g = spec(size1_spec("  - {name: p, op: softmax, args: [t], dim: -1}\n", "p"));
  Graph s = simplified(g);
  EXPECT_EQ(count(s, OpKind::Softmax), 0) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Sub), 1) << "(x - x) + 1, never the constant 1\n" << print_graph(s);
  expect_same_meaning(g, s);
  // The fp64 reference agrees: NaN where t is ±inf or NaN, else 1.
  const auto in = special_inputs(g, 3);
  const auto ref = eval(g, in);
  bool saw_nan = false, saw_one = false;
  for (double v : ref.at(0)) saw_nan |= std::isnan(v), saw_one |= v == 1.0;
  EXPECT_TRUE(saw_nan && saw_one);
}

TEST(Simplify, LogSoftmaxAndCenteringOverSize1StayXMinusX) {
  Graph g = spec(size1_spec("  - {name: ls, op: log_softmax, args: [t], dim: -1}\n"
                            "  - {name: mu, op: mean, args: [t], dims: -1, keepdim: true}\n"
                            "  - {name: c, op: sub, args: [t, mu]}\n",
                            "ls, c"));
  Graph s = simplified(g);
  EXPECT_EQ(count(s, OpKind::LogSoftmax) + count(s, OpKind::Mean), 0) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Constant), 0) << "x - x is not 0 for ±inf / NaN\n" << print_graph(s);
  expect_same_meaning(g, s);
  EXPECT_EQ(testing::chain_launches(program(g)), 1u) << program(g).plan_text;
}

TEST(Simplify, AWrongFoldFailsTheSemanticsCheck) {
  // The check must be able to fail: h + (e - e) -> h + 0 is wrong where e is
  // ±inf or NaN. The pass keeps e - e.
  Graph g = spec(
      "name: w\nprecision: fp32\ninputs:\n  - {name: x, shape: [64, 32]}\n  - {name: w, shape: [1, 32]}\n"
      "  - {name: e, shape: [64, 1]}\nops:\n  - {name: h, op: linear, args: [x, w]}\n"
      "  - {name: d, op: sub, args: [e, e]}\n  - {name: y, op: add, args: [h, d]}\noutputs: [y]\n");
  Graph wrong = spec(
      "name: w\nprecision: fp32\ninputs:\n  - {name: x, shape: [64, 32]}\n  - {name: w, shape: [1, 32]}\n"
      "ops:\n  - {name: h, op: linear, args: [x, w]}\n  - {name: y, op: add, args: [h, 0]}\noutputs: [y]\n");
  auto in = special_inputs(g, 1);
  const auto ref = eval(g, in);
  in.pop_back();  // `wrong` has no e
  EXPECT_FALSE(mismatches(ref, eval(wrong, in)).empty());
  EXPECT_EQ(print_graph(simplified(g)), print_graph(g)) << "x - x must stay";
}

TEST(Simplify, PoolsWithOneElementWindowsAreTheIdentity) {
  Graph g = spec(
      "name: pools\nprecision: fp32\ninputs:\n"
      "  - {name: x, shape: [2, 3, 8, 8]}\n  - {name: w, shape: [4, 3, 3, 3]}\n  - {name: e, shape: [4, 1, 1]}\n"
      "ops:\n  - {name: c, op: conv2d, args: [x, w]}\n  - {name: t, op: add, args: [c, e]}\n"
      "  - {name: p, op: max_pool2d, args: [t], kernel_size: 1}\n"
      "  - {name: q, op: avg_pool2d, args: [p], kernel_size: 1, stride: 1}\n"
      "  - {name: r, op: max_pool1d, args: [q], kernel_size: 1}\n"
      "  - {name: k, op: avg_pool2d, args: [r], kernel_size: 1, stride: 2}\n"
      "outputs: [k]\n");
  Graph s = simplified(g);
  EXPECT_EQ(count(s, OpKind::MaxPool2d) + count(s, OpKind::MaxPool1d), 0) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::AvgPool2d), 1) << "stride 2 subsamples: not the identity\n" << print_graph(s);
  expect_same_meaning(g, s);

  Graph gap = spec(
      "name: gap\nprecision: fp32\ninputs:\n"
      "  - {name: x, shape: [2, 3, 3, 3]}\n  - {name: w, shape: [4, 3, 3, 3]}\n"
      "ops:\n  - {name: c, op: conv2d, args: [x, w]}\n  - {name: r, op: relu, args: [c]}\n"
      "  - {name: p, op: global_avg_pool, args: [r]}\noutputs: [p]\n");
  Graph s2 = simplified(gap);
  EXPECT_EQ(count(s2, OpKind::GlobalAvgPool), 0) << print_graph(s2);
  expect_same_meaning(gap, s2);
}

// sum over H, W of a pool's backward -> the sum of its gradient (a bias's
// gradient after a pool, in the backward); not where the divisor counts padding.
TEST(Simplify, SpatialSumsOfPoolBackwardsSumTheGradient) {
  const std::string head = "name: pb\nprecision: fp32\ninputs:\n  - {name: x, shape: [2, 3, 9, 8]}\n"
                           "  - {name: g, shape: [2, 3, 5, 4]}\nops:\n";
  Graph g = spec(head +
                 "  - {name: m, op: max_pool2d_backward, args: [x, g], kernel_size: 3, stride: 2, padding: 1}\n"
                 "  - {name: a, op: avg_pool2d_backward, args: [g], input_shape: [2, 3, 9, 8], kernel_size: 3, "
                 "stride: 2, padding: 1, count_include_pad: false}\n"
                 "  - {name: sm, op: sum, args: [m], dims: [0, 2, 3], keepdim: true}\n"
                 "  - {name: sa, op: sum, args: [a], dims: [3, 2]}\n"
                 "  - {name: y, op: relu, args: [x]}\noutputs: [sm, sa, y]\n");  // x stays used
  std::vector<std::string> notes;
  Graph s = simplified(g, &notes);
  EXPECT_EQ(count(s, OpKind::MaxPool2dBackward) + count(s, OpKind::AvgPool2dBackward), 0) << print_graph(s);
  EXPECT_EQ(std::count_if(notes.begin(), notes.end(), [](const std::string& n) {
              return n.find("-> the same sum of its gradient") != std::string::npos;
            }), 2);
  expect_same_meaning(g, s, 1e-12);
  // Stay: the divisor counts padding; the sum leaves W; a mean.
  Graph stays = spec(head +
                     "  - {name: a, op: avg_pool2d_backward, args: [g], input_shape: [2, 3, 9, 8], kernel_size: 3, "
                     "stride: 2, padding: 1}\n"
                     "  - {name: m, op: max_pool2d_backward, args: [x, g], kernel_size: 3, stride: 2, padding: 1}\n"
                     "  - {name: sa, op: sum, args: [a], dims: [2, 3]}\n  - {name: sm, op: sum, args: [m], dims: [2]}\n"
                     "  - {name: mm, op: mean, args: [m], dims: [2, 3]}\noutputs: [sa, sm, mm]\n");
  EXPECT_EQ(print_graph(simplified(stays)), print_graph(stays));
}

TEST(Simplify, AnOutputThatWouldAliasAnotherBecomesTimesOne) {
  // t is an output already; sum(t) over its size-1 dim cannot be the same
  // value (each output has its own buffer): it becomes t * 1.
  Graph g = spec(size1_spec("  - {name: r, op: sum, args: [t], dims: -1, keepdim: true}\n"
                            "  - {name: q, op: max, args: [t], dims: -1, keepdim: true}\n",
                            "t, r, q"));
  Graph s = simplified(g);
  EXPECT_EQ(count(s, OpKind::Sum) + count(s, OpKind::Max), 0) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Mul), 2) << print_graph(s);
  expect_same_meaning(g, s);
  EXPECT_EQ(testing::chain_launches(program(g)), 1u) << program(g).plan_text;
}

// ---- algebra, constants, CSE, DCE ----------------------------------------------------

TEST(Simplify, XPlusXIsTwoX) {
  Graph g = spec(size1_spec("  - {name: y, op: add, args: [t, t]}\n", "y"));
  Graph s = simplified(g);
  EXPECT_EQ(count(s, OpKind::Add), 1) << print_graph(s);  // t = h + e
  EXPECT_EQ(count(s, OpKind::Mul), 1) << print_graph(s);
  expect_same_meaning(g, s);
  EXPECT_EQ(program(g).launches.size(), program(g, "simplify=0").launches.size());
}

TEST(Simplify, XMinusXAndXTimesZeroStay) {
  Graph g = spec(size1_spec("  - {name: d, op: sub, args: [t, t]}\n  - {name: z, op: mul, args: [t, 0]}\n"
                            "  - {name: p, op: add, args: [t, 0]}\n",
                            "d, z, p"));
  EXPECT_EQ(print_graph(simplified(g)), print_graph(g));
}

TEST(Simplify, ScalarChainsFold) {
  Graph g = spec(size1_spec("  - {name: a, op: mul, args: [t, 2]}\n  - {name: b, op: mul, args: [3, a]}\n"
                            "  - {name: c, op: div, args: [b, 0.25]}\n"
                            "  - {name: d, op: add, args: [c, 1]}\n  - {name: f, op: sub, args: [d, -2]}\n"
                            "  - {name: y, op: add, args: [0.5, f]}\n",
                            "y"));
  std::vector<std::string> notes;
  Graph s = simplified(g, &notes);
  EXPECT_EQ(count(s, OpKind::Mul) + count(s, OpKind::Div), 1) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Add) + count(s, OpKind::Sub), 2) << print_graph(s);  // t = h + e, then + 3.5
  bool has24 = false, has35 = false;
  for (const Node& n : s.nodes)
    if (n.op == OpKind::Constant) has24 |= n.constant_value() == 24.0, has35 |= n.constant_value() == 3.5;
  EXPECT_TRUE(has24 && has35) << print_graph(s);
  expect_same_meaning(g, s, 1e-15);
}

TEST(Simplify, ScalarChainsThatCouldOverflowOrCancelStay) {
  // Up then down (x * 1e30 overflows in f32 where x * 1 would not), and
  // offsets of both signs (x + 1e20 - 1e20 is 0 for small x, not x).
  Graph g = spec(size1_spec("  - {name: a, op: mul, args: [t, 1.0e30]}\n  - {name: b, op: div, args: [a, 1.0e30]}\n"
                            "  - {name: c, op: add, args: [b, 1.0e20]}\n  - {name: y, op: sub, args: [c, 1.0e20]}\n",
                            "y"));
  EXPECT_EQ(print_graph(simplified(g)), print_graph(g));
}

TEST(Simplify, ExactIdentitiesGo) {
  GraphBuilder b(Precision::FP32, "ids");
  auto x = b.input("x", {16, 8});
  auto w = b.input("w", {4, 8});
  auto h = b.linear(x, w);
  auto y = ((h * 1.0) / 1.0 - 0.0).pow(1.0).neg().neg() + b.constant(-0.0);
  b.output("y", y.relu());
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.error().str();
  Graph s = simplified(*g);
  EXPECT_EQ(s.nodes.size(), 4u) << print_graph(s);  // x, w, linear, relu
  expect_same_meaning(*g, s);
}

TEST(Simplify, ConstantsFoldButNotIntoAnotherDtype) {
  GraphBuilder b(Precision::FP32, "consts");
  auto x = b.input("x", {16, 8});
  auto w = b.input("w", {4, 8});
  auto h = b.linear(x, w);
  b.output("y", h * (b.constant(2.0).exp() + 1.0) - b.constant(-1.0).sqrt().abs().neg() * 0.0);
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.error().str();
  Graph s = simplified(*g);
  EXPECT_EQ(count(s, OpKind::Exp), 0) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Sqrt), 1) << "sqrt(-1) is NaN: not folded\n" << print_graph(s);
  expect_same_meaning(*g, s);

  // f16 h times an f32 scalar expression is f32; times a constant it would be f16.
  GraphBuilder b16(Precision::F16, "consts16");
  auto x16 = b16.input("x", {16, 8});
  auto w16 = b16.input("w", {4, 8});
  b16.output("y", b16.linear(x16, w16) * b16.constant(2.0).exp());
  auto g16 = b16.build();
  ASSERT_TRUE(g16.ok()) << g16.error().str();
  ASSERT_EQ(g16->node(g16->outputs[0].value).type.dtype, DType::F32);
  Graph s16 = simplified(*g16);
  EXPECT_EQ(count(s16, OpKind::Exp), 1) << print_graph(s16);
  EXPECT_EQ(s16.node(s16.outputs[0].value).type.dtype, DType::F32);
}

TEST(Simplify, CommonSubexpressionsMerge) {
  Graph g = spec(size1_spec("  - {name: s1, op: sigmoid, args: [t]}\n  - {name: s2, op: sigmoid, args: [t]}\n"
                            "  - {name: p1, op: mul, args: [s1, e]}\n  - {name: p2, op: mul, args: [e, s2]}\n"
                            "  - {name: y, op: add, args: [p1, p2]}\n"
                            "  - {name: o1, op: tanh, args: [t]}\n  - {name: o2, op: tanh, args: [t]}\n",
                            "y, o1, o2"));
  std::vector<std::string> notes;
  Graph s = simplified(g, &notes);
  EXPECT_EQ(count(s, OpKind::Sigmoid), 1) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Tanh), 2) << "two outputs keep two values\n" << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Mul), 2) << "p1 + p1 -> p1 * 2\n" << print_graph(s);
  expect_same_meaning(g, s);
}

TEST(Simplify, DeadValuesGoInputsStay) {
  Graph g = spec(size1_spec("  - {name: y, op: relu, args: [t]}\n", "y"));
  Graph dirty = g;
  Node dead;
  dead.op = OpKind::Exp;
  dead.operands = {dirty.outputs[0].value};
  dirty.add(dead);
  EXPECT_EQ(simplify::remove_dead_values(dirty), 1);
  EXPECT_EQ(print_graph(dirty), print_graph(g));
}

// ---- the config key, the hash, the backends -----------------------------------------

TEST(Simplify, ConfigKeyAndHash) {
  auto on = cg::parse_heuristics("");
  auto off = cg::parse_heuristics("simplify=0");
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_TRUE(on->simplify);
  EXPECT_FALSE(off->simplify);
  EXPECT_FALSE(cg::parse_heuristics("simplify=2").ok());
  EXPECT_FALSE(generate_program(Graph{}, {"sm_90a", ""}).ok());

  Graph g = spec(size1_spec("  - {name: r, op: logsumexp, args: [t], dims: -1, keepdim: true}\n", "r"));
  const uint64_t h = structural_hash(g);
  const Program p = program(g);
  EXPECT_EQ(structural_hash(g), h) << "codegen plans a copy; the graph as written keeps its hash";
  EXPECT_NE(structural_hash(simplified(g)), h);
  auto sg = simplify_for_codegen(g, "fuse_pool=1 simplify=0");
  ASSERT_TRUE(sg.ok());
  EXPECT_EQ(print_graph(sg->graph), print_graph(g));
  EXPECT_TRUE(sg->notes.empty());
}

TEST(Simplify, LayoutOpsThatDoNothingGo) {
  GraphBuilder b(Precision::FP32, "layout");
  auto x = b.input("x", {6, 8});
  auto y = x.relu().expand({6, 8}).reshape({6, 8}).transpose(0, 1).transpose(0, 1).transpose(1, 1);
  auto z = x.sigmoid().reshape({48}).reshape({2, 24}).expand({3, 2, 24}).expand({4, 3, 2, 24});
  b.output("y", y);
  b.output("z", z);
  b.output("t", x.transpose(0, 1));  // kept: it does something
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.error().str();
  std::vector<std::string> notes;
  Graph s = simplified(*g, &notes);
  EXPECT_EQ(count(s, OpKind::Transpose), 1) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Reshape), 1) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Expand), 1) << print_graph(s);
  EXPECT_EQ(s.node(s.outputs[0].value).op, OpKind::Relu) << print_graph(s);
  expect_same_meaning(*g, s);
}

// Without an anchor, an output may become any computed value, never an input.
TEST(Simplify, PointwiseProgramOutputsStayComputed) {
  GraphBuilder b(Precision::FP32, "pointwise");
  auto x = b.input("x", {6, 8});
  b.output("y", x * 1.0);                           // would be the input: x * 1 stays
  b.output("z", x.relu().reshape({6, 8}) * 1.0);  // relu: an op, so it may be the output
  b.output("c", x.gt(b.constant(1.0).erf() - 2.0));  // erf(1) - 2 folds to a constant
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.error().str();
  Graph s = simplified(*g);
  EXPECT_EQ(s.node(s.outputs[0].value).op, OpKind::Mul) << print_graph(s);
  EXPECT_EQ(s.node(s.outputs[1].value).op, OpKind::Relu) << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Erf), 0) << print_graph(s);
  expect_same_meaning(*g, s);
  program(s);
}

// Casts stay, even to the operand's own dtype: values compute unrounded (in
// fp32 on a device, fp64 in the reference) and the cast rounds them.
TEST(Simplify, CastsAreKept) {
  GraphBuilder b(Precision::BF16, "casts");
  auto x = b.input("x", {6, 8});
  auto w = b.input("w", {8, 8});
  auto h = b.linear(x, w);                                            // bf16
  b.output("y", h.cast(DType::BF16).relu().cast(DType::F32).cast(DType::F32).cast(DType::F16));
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.error().str();
  Graph s = simplified(*g);
  EXPECT_EQ(count(s, OpKind::Cast), 4) << print_graph(s);
  EXPECT_EQ(s.node(s.outputs[0].value).type.dtype, DType::F16);
  expect_same_meaning(*g, s);
  program(s);
}

TEST(Simplify, EveryExampleStillGeneratesAndMeansTheSame) {
  namespace fs = std::filesystem;
  int changed = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(FUSEJIT_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().filename().string());
    auto g = load_spec_file(entry.path().string());
    ASSERT_TRUE(g.ok()) << g.error().str();
    program(*g);
    Graph s = simplified(*g);
    if (print_graph(s) == print_graph(*g)) continue;
    ++changed;
    // Examples are large: compare sampled outputs.
    const auto in = make_random_inputs(*g, 5);
    for (int o = 0; o < static_cast<int>(g->outputs.size()); ++o) {
      const auto idx = pick_samples(g->node(g->outputs[static_cast<size_t>(o)].value).type.numel(), 64, 9);
      auto a = evaluate_reference_at(*g, in, o, idx), b = evaluate_reference_at(s, in, o, idx);
      ASSERT_TRUE(a.ok() && b.ok());
      for (const std::string& m : mismatches({*a}, {*b}, 1e-12)) ADD_FAILURE() << m;
    }
  }
  std::cout << changed << " example(s) simplified\n";
}

TEST(Simplify, TwoHundredRandomChainsGenerateAndMeanTheSame) {
  int changed = 0, fewer_kernels = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto g = testing::random_chain(seed);
    ASSERT_TRUE(g.ok()) << g.error().str();
    const Program p = program(*g), p0 = program(*g, "simplify=0");
    ASSERT_FALSE(p.launches.empty());
    EXPECT_LE(p.launches.size(), p0.launches.size()) << p.plan_text << p0.plan_text;
    fewer_kernels += p.launches.size() < p0.launches.size();
    Graph s = simplified(*g);
    if (print_graph(s) == print_graph(*g)) continue;
    ++changed;
    const auto in = make_random_inputs(*g, seed);
    for (const std::string& m : mismatches(eval(*g, in), eval(s, in), 1e-9))
      ADD_FAILURE() << m << "\n" << print_graph(*g) << print_graph(s);
    expect_same_meaning(*g, s, 1e-9);
  }
  std::cout << changed << " of 200 random chains simplified, " << fewer_kernels << " with fewer kernels\n";
  EXPECT_GT(changed, 10);
}

}  // namespace
}  // namespace fusejit
