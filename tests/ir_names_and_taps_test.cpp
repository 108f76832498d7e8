// Regression tests from the sanitizer sweep: names that would break the IR
// text or generated comments are rejected; huge attributes are errors, not
// overflow; a conv whose taps do not fit the packed tap table uses divisions.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "fusejit/spec.h"

namespace fusejit {
namespace {

TEST(Names, ControlCharactersAndQuotesAreRejected) {
  for (std::string bad : {std::string("evil\n#error injected"), std::string("a\"b")}) {
    GraphBuilder g(Precision::FP32, bad);
    auto x = g.input("x", {2, 4});
    g.output("y", g.linear(x, g.input("w", {3, 4})));
    auto r = g.build();
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("graph name"), std::string::npos);
  }
  GraphBuilder g;
  auto x = g.input("x\ty", {2, 4});
  g.output("y", g.linear(x, g.input("w", {3, 4})));
  EXPECT_FALSE(g.build());
  // Ordinary punctuation is fine and round-trips through the IR text.
  GraphBuilder ok(Precision::FP32, "conv.block[1] / relu");
  auto x2 = ok.input("conv.input", {2, 4});
  ok.output("y:out", ok.linear(x2, ok.input("conv.weight", {3, 4})));
  auto graph = ok.build();
  ASSERT_TRUE(graph) << graph.error().str();
  auto back = parse_graph_text(print_graph(*graph));
  ASSERT_TRUE(back) << back.error().str();
  EXPECT_EQ(print_graph(*back), print_graph(*graph));
}

TEST(HugeAttributes, AreErrorsNotOverflow) {
  auto spec = [](const std::string& op) {
    return "inputs:\n  - {name: x, shape: [1, 1, 8, 8]}\n  - {name: w, shape: [1, 1, 3, 3]}\nops:\n  - " + op +
           "\noutputs: [y]\n";
  };
  auto r = parse_spec(spec("{name: y, op: conv2d, args: [x, w], padding: 4611686018427387904, dilation: 4611686018427387904}"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("too large"), std::string::npos) << r.error().str();
  auto big = parse_spec("inputs:\n  - {name: x, shape: [140737488355328, 1]}\n  - {name: w, shape: [140737488355328, 1]}\n"
                        "ops:\n  - {name: y, op: linear, args: [x, w]}\noutputs: [y]\n");
  ASSERT_FALSE(big);
}

TEST(ConvTaps, TableOnlyWhenTheTapsFit) {
  auto source = [](int64_t dilation, int64_t h) {
    GraphBuilder g;
    auto x = g.input("x", {1, 1, h, 3});
    auto c = g.conv2d(x, g.input("w", {1, 1, 2, 1}), std::nullopt, {.dilation = {dilation, 1}});
    g.output("y", c.relu());
    auto graph = g.build();
    EXPECT_TRUE(graph) << graph.error().str();
    auto p = generate_program(*graph, {"sm_90a", "conv_patch=0"});  // the im2col gather (halo patches need no taps)
    EXPECT_TRUE(p) << p.error().str();
    return p ? p->source : std::string();
  };
  EXPECT_NE(source(2, 16).find("kConvTaps"), std::string::npos);
  // (kh*DH << 16) would overflow an int at DH = 40000: divisions instead.
  EXPECT_EQ(source(40000, 40002).find("kConvTaps"), std::string::npos);
}

}  // namespace
}  // namespace fusejit
