// Canonical printing, the IR text round trip, and hash stability/sensitivity.
#include <gtest/gtest.h>

#include <set>

#include "fusejit/builder.h"

namespace fusejit {
namespace {

// Seed 2 with knobs for what should and should not change the hash.
struct Knobs {
  std::string x = "x", w = "w", bias = "bias", act = "act";
  bool add_before_naming = false;
  double scale = 1.0;  // != 1: multiply before relu
  int64_t n = 8192;
  Precision precision = Precision::FP32;
  bool swap_inputs = false;
};

Graph seed2(const Knobs& k) {
  GraphBuilder g(k.precision);
  Value x, w, b;
  if (k.swap_inputs) {
    w = g.input(k.w, {k.n, 8192});
    x = g.input(k.x, {1024, 8192});
  } else {
    x = g.input(k.x, {1024, 8192});
    w = g.input(k.w, {k.n, 8192});
  }
  b = g.input(k.bias, {k.n});
  Value v = g.linear(x, w).add(b);
  if (k.scale != 1.0) v = v * k.scale;
  g.output("y", v.relu().named(k.act));
  auto r = g.build();
  EXPECT_TRUE(r) << r.error().str();
  return r.take();
}

TEST(Hash, IgnoresNames) {
  EXPECT_EQ(structural_hash(seed2({})), structural_hash(seed2({.x = "input", .w = "W", .bias = "b", .act = "r"})));
}

TEST(Hash, ChangesWithMeaning) {
  std::set<uint64_t> hashes = {
      structural_hash(seed2({})),
      structural_hash(seed2({.scale = 2.0})),
      structural_hash(seed2({.scale = 2.0000001})),
      structural_hash(seed2({.n = 4096})),
      structural_hash(seed2({.precision = Precision::TF32})),
      structural_hash(seed2({.swap_inputs = true})),
  };
  EXPECT_EQ(hashes.size(), 6u);
}

TEST(Hash, IndependentOfOpOrder) {
  // y = relu(a) + sigmoid(a): the two branches listed in either order.
  auto build = [](bool relu_first) {
    GraphBuilder g;
    auto a = g.linear(g.input("x", {4, 8}), g.input("w", {8, 8}));
    Value r, s;
    if (relu_first) {
      r = a.relu();
      s = a.sigmoid();
    } else {
      s = a.sigmoid();
      r = a.relu();
    }
    g.output("y", r + s);
    return g.build().take();
  };
  EXPECT_EQ(print_graph(build(true)), print_graph(build(false)));
  EXPECT_EQ(structural_hash(build(true)), structural_hash(build(false)));
}

TEST(Hash, OperandOrderAndAttributesMatter) {
  auto build = [](bool swap, int64_t dim) {
    GraphBuilder g;
    auto a = g.linear(g.input("x", {4, 8}), g.input("w", {8, 8}));
    auto s = a.softmax(dim);
    g.output("y", swap ? s - a : a - s);
    return structural_hash(g.build().take());
  };
  EXPECT_NE(build(false, 1), build(true, 1));
  EXPECT_NE(build(false, 1), build(false, 0));
  EXPECT_EQ(build(false, 1), build(false, -1));  // -1 normalizes to 1
}

TEST(Printer, DefaultsAreExplicitAndConstantsShared) {
  GraphBuilder g;
  auto x = g.input("x", {1, 3, 8, 8});
  auto c = g.conv2d(x, g.input("w", {4, 3, 3, 3}));
  g.output("y", (c * 2.0 + 2.0).max_pool2d({.kernel = {2, 2}}));
  std::string text = print_graph(g.build().take());
  EXPECT_NE(text.find("max_pool2d(%5) ceil_mode=false dilation=[1,1] kernel_size=[2,2] padding=[0,0] stride=[2,2]"),
            std::string::npos)
      << text;
  // The two 2.0 scalars are one constant node.
  EXPECT_EQ(text.find("constant"), text.rfind("constant")) << text;
}

TEST(Printer, RoundTrip) {
  GraphBuilder g(Precision::F16, "rt");
  auto x = g.input("x", {2, 8, 10, 10});
  auto a = g.conv2d(x, g.input("w", {6, 4, 3, 3}), g.input("b", {6}), {.padding = {1, 1}, .groups = 2}).named("conv");
  auto s = a.sigmoid();
  auto y = (a * s).clamp(-0.5, std::nullopt).gelu(true).avg_pool2d({.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1},
                                                                    .count_include_pad = false});
  g.output("y", y.named("out_val"));
  g.output("m", a.logsumexp({1, 2}, true).hardtanh(-2, 2.5));
  Graph graph = g.build().take();
  std::string text = print_graph(graph);
  auto back = parse_graph_text(text, "rt.ir");
  ASSERT_TRUE(back) << back.error().str() << "\n" << text;
  EXPECT_EQ(print_graph(*back), text);
  EXPECT_EQ(structural_hash(*back), structural_hash(graph));
  EXPECT_TRUE(verify_graph(*back));
}

TEST(Printer, TextErrorsHaveLocations) {
  auto r = parse_graph_text(
      "fusejit.graph precision=fp32 {\n"
      "  %0 = input \"x\" : f32[2,4]\n"
      "  %1 = input \"w\" : f32[4,4]\n"
      "  %2 = linear(%0, %1) : f32[2,5]\n"
      "  output \"y\" = %2\n"
      "}\n",
      "t.ir");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().loc.line, 4);
  EXPECT_NE(r.error().message.find("differs from the inferred f32[2,4]"), std::string::npos) << r.error().str();

  auto u = parse_graph_text("fusejit.graph precision=fp32 {\n  %0 = relu(%7) : f32[1]\n}\n", "u.ir");
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().str(), "u.ir:2:13: error: %7 is not defined before it is used");
}

TEST(VerifyGraph, CatchesATamperedType) {
  GraphBuilder g;
  g.output("y", g.linear(g.input("x", {2, 4}), g.input("w", {3, 4})).relu());
  Graph graph = g.build().take();
  EXPECT_TRUE(verify_graph(graph));
  graph.nodes.back().type.shape = {2, 4};
  Status s = verify_graph(graph);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("differs from the inferred f32[2,3]"), std::string::npos);
}

}  // namespace
}  // namespace fusejit
