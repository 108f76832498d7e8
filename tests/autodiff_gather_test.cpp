// The derivatives of the gather ops (compiler/autodiff_rules.cpp, PyTorch's
// double-backward rules): im2col -> im2col_backward (col2im), insert_zeros ->
// insert_zeros_backward, max_pool2d_backward -> max_pool2d_double_backward
// (w.r.t. grad; x gets none), avg_pool2d_backward -> avg_pool2d. Every
// gradient of small graphs, run stage by stage on the fp64 reference, against
// central finite differences (tests/gradient_check.h); a conv's own backward
// stages differentiated again; the adjoints' missing derivatives as errors.
#include <gtest/gtest.h>

#include <string>

#include "fusejit/spec.h"
#include "tests/gradient_check.h"

namespace fusejit {
namespace {

using testing::check_graph_gradients;
using testing::GradCheck;

Graph parse(const std::string& name, const std::string& inputs, const std::string& ops, const std::string& outputs) {
  const std::string text =
      "name: " + name + "\nprecision: fp32\ninputs:\n" + inputs + "ops:\n" + ops + "outputs: " + outputs + "\n";
  auto g = parse_spec(text, name + ".yaml");
  EXPECT_TRUE(static_cast<bool>(g)) << (g ? "" : g.error().str()) << "\n" << text;
  return g ? *g : Graph{};
}

struct Case {
  std::string name, inputs, ops, outputs;
};

// Every input has a non-zero gradient (every_input) unless listed in `zero` (then it must have none).
void check(const Case& c, bool every_input = true) {
  SCOPED_TRACE(c.name);
  Graph g = parse(c.name, c.inputs, c.ops, c.outputs);
  if (g.nodes.empty()) return;
  GradCheck check;
  check.every_input = every_input;
  check_graph_gradients(g, {}, check);
}

TEST(AutodiffGather, Im2colMatchesFiniteDifferences) {
  const std::string x = "  - {name: x, shape: [2, 3, 7, 8]}\n";
  // strided and padded; dilated with uneven padding; stride beyond the kernel (taps skip pixels: zero there)
  check({"im2col_k3_s2_p1", x + "  - {name: w, shape: [27, 32]}\n",
         "  - {name: c, op: im2col, args: [x], kernel_size: 3, stride: 2, padding: 1}\n"
         "  - {name: y, op: mul, args: [c, w]}\n",
         "[y]"});
  check({"im2col_dilated", x + "  - {name: w, shape: [18, 100]}\n",
         "  - {name: c, op: im2col, args: [x], kernel_size: [2, 3], dilation: [2, 1], padding: [0, 2]}\n"
         "  - {name: t, op: tanh, args: [c]}\n  - {name: y, op: mul, args: [t, w]}\n",
         "[y]"});
  check({"im2col_stride_beyond_kernel", x, "  - {name: c, op: im2col, args: [x], kernel_size: 1, stride: 3}\n"
                                           "  - {name: y, op: square, args: [c]}\n",
         "[y]"},
        /*every_input=*/true);
}

TEST(AutodiffGather, InsertZerosMatchesFiniteDifferences) {
  const std::string x = "  - {name: x, shape: [2, 3, 4, 5]}\n";
  check({"insert_zeros_extra", x,
         "  - {name: s, op: insert_zeros, args: [x], stride: [2, 3], extra: [1, 0]}\n"
         "  - {name: y, op: sigmoid, args: [s]}\n",
         "[y]"});
  // the crop removes x's first and last rows (and columns): they get no gradient, the rest do
  check({"insert_zeros_crop", x + "  - {name: w, shape: [2, 3, 4, 11]}\n",
         "  - {name: s, op: insert_zeros, args: [x], stride: [2, 3], extra: [1, 0], crop: [2, 1]}\n"
         "  - {name: y, op: mul, args: [s, w]}\n",
         "[y]"});
  check({"insert_zeros_crop_only", x, "  - {name: s, op: insert_zeros, args: [x], stride: 1, crop: [1, 2]}\n"
                                      "  - {name: y, op: exp, args: [s]}\n",
         "[y]"});
}

TEST(AutodiffGather, PoolBackwardsMatchFiniteDifferences) {
  // avg: avg_pool2d of the gradient (padding, count_include_pad off, ceil mode)
  check({"avg_pool2d_backward",
         "  - {name: dy, shape: [2, 3, 5, 5]}\n  - {name: dz, shape: [2, 3, 3, 3]}\n"
         "  - {name: w, shape: [2, 3, 7, 8]}\n",
         "  - {name: g, op: avg_pool2d_backward, args: [dy], input_shape: [2, 3, 10, 9], kernel_size: 3, stride: 2,"
         " padding: 1, count_include_pad: false}\n"
         "  - {name: gt, op: tanh, args: [g]}\n"
         "  - {name: h, op: avg_pool2d_backward, args: [dz], input_shape: [2, 3, 7, 8], kernel_size: 3, stride: 3,"
         " padding: 1, ceil_mode: true}\n"
         "  - {name: hw, op: mul, args: [h, w]}\n",
         "[gt, hw]"});
  // max: grad's gradient at each window's first maximum of x (overlapping, dilated, ceil-mode windows); x's
  // gradient is zero (random x has no ties: finite differences see no argmax move)
  check({"max_pool2d_backward",
         "  - {name: x, shape: [2, 3, 10, 9]}\n  - {name: dy, shape: [2, 3, 5, 5]}\n"
         "  - {name: dz, shape: [2, 3, 5, 4]}\n",
         "  - {name: g, op: max_pool2d_backward, args: [x, dy], kernel_size: 3, stride: 2, padding: 1}\n"
         "  - {name: gs, op: sigmoid, args: [g]}\n"
         "  - {name: h, op: max_pool2d_backward, args: [x, dz], kernel_size: [2, 3], stride: [2, 2], dilation: [2, 1],"
         " ceil_mode: true}\n",
         "[gs, h]"},
        /*every_input=*/false);
  Graph g = parse("max_pool2d_backward_x", "  - {name: x, shape: [1, 2, 6, 6]}\n  - {name: dy, shape: [1, 2, 3, 3]}\n",
                  "  - {name: g, op: max_pool2d_backward, args: [x, dy], kernel_size: 2}\n", "[g]");
  auto p = build_backward(g);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
  EXPECT_FALSE(p->input_grads.count("x")) << "x of max_pool2d_backward gets no gradient\n" << print_backward(*p);
  EXPECT_TRUE(p->input_grads.count("dy")) << print_backward(*p);
}

// The example of every gather op (examples/pointwise_conv_backward_ops.yaml), smaller: every input.
TEST(AutodiffGather, ConvBackwardOpsExampleMatchesFiniteDifferences) {
  check({"conv_backward_ops",
         "  - {name: x, shape: [2, 3, 10, 10]}\n  - {name: w, shape: [4, 3, 3, 3]}\n"
         "  - {name: dz, shape: [2, 4, 4, 4]}\n  - {name: dpool, shape: [2, 3, 5, 5]}\n",
         "  - {name: wt, op: transpose, args: [w], dims: [0, 1]}\n"
         "  - {name: w_flipped, op: flip, args: [wt], dims: [2, 3]}\n"
         "  - {name: cols, op: im2col, args: [x], kernel_size: 3, stride: 2}\n"
         "  - {name: dz_spread, op: insert_zeros, args: [dz], stride: 2, extra: [1, 1]}\n"
         "  - {name: dmax, op: max_pool2d_backward, args: [x, dpool], kernel_size: 2}\n"
         "  - {name: davg, op: avg_pool2d_backward, args: [dpool], input_shape: [2, 3, 10, 10], kernel_size: 2}\n"
         "  - {name: dx, op: add, args: [dmax, davg]}\n",
         "[w_flipped, cols, dz_spread, dx]"});
}

// A conv chain's backward program is made of these ops: each of its stages differentiates again.
TEST(AutodiffGather, ConvBackwardStagesDifferentiateAgain) {
  Graph g = parse("conv_pool", "  - {name: x, shape: [2, 3, 9, 9]}\n  - {name: w, shape: [4, 3, 3, 3]}\n",
                  "  - {name: z, op: conv2d, args: [x, w], stride: 2, padding: 1}\n"
                  "  - {name: t, op: tanh, args: [z]}\n"
                  "  - {name: y, op: max_pool2d, args: [t], kernel_size: 2, ceil_mode: true}\n"
                  "  - {name: a, op: avg_pool2d, args: [t], kernel_size: 3, stride: 2, padding: 1}\n",
                  "[y, a]");
  auto p = build_backward(g);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
  int gathers = 0;
  for (const auto& st : p->stages) {
    SCOPED_TRACE(st.graph.name);
    for (const Node& n : st.graph.nodes) gathers += op_category(n.op) == OpCategory::Gather;
    check_graph_gradients(st.graph);
  }
  EXPECT_GE(gathers, 4) << print_backward(*p);  // flip, im2col, insert_zeros, the pools' backward
}

// examples/pointwise_double_backward_ops.yaml: with the adjoints' operands left out, w's gradient (a scale after
// them: the stage recomputes the adjoints' results) against finite differences; asking for the rest is the error.
TEST(AutodiffGather, AdjointsExampleGivesTheOtherGradients) {
  auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/pointwise_double_backward_ops.yaml");
  ASSERT_TRUE(static_cast<bool>(g)) << g.error().str();
  GradCheck every;
  every.every_input = true;
  check_graph_gradients(*g, BackwardOptions{{"dcols", "x", "ddx", "dspread"}}, every);
  auto all = build_backward(*g);
  ASSERT_FALSE(static_cast<bool>(all));
  EXPECT_NE(all.error().message.find("has no derivative in fusejit yet"), std::string::npos) << all.error().message;
}

TEST(AutodiffGather, AdjointsHaveNoDerivativeYet) {
  const std::string g2 = "  - {name: g, shape: [18, 4]}\n", g4 = "  - {name: g, shape: [2, 3, 7, 7]}\n";
  const Case cases[] = {
      {"col2im", g2, "  - {name: d, op: im2col_backward, args: [g], input_shape: [1, 2, 4, 4], kernel_size: 3}\n", "[d]"},
      {"izb", g4, "  - {name: d, op: insert_zeros_backward, args: [g], stride: 2}\n", "[d]"},
      {"mpdb", g4 + "  - {name: x, shape: [2, 3, 7, 7]}\n",
       "  - {name: d, op: max_pool2d_double_backward, args: [x, g], kernel_size: 2}\n", "[d]"},
  };
  const char* const names[] = {"im2col_backward", "insert_zeros_backward", "max_pool2d_double_backward"};
  for (size_t i = 0; i < 3; ++i) {
    Graph g = parse(cases[i].name, cases[i].inputs, cases[i].ops, cases[i].outputs);
    auto p = build_backward(g);
    ASSERT_FALSE(static_cast<bool>(p)) << names[i];
    EXPECT_NE(p.error().str().find(cases[i].name + ".yaml:"), std::string::npos) << p.error().str();
    EXPECT_NE(p.error().message.find(std::string(names[i]) + " 'd': has no derivative in fusejit yet"),
              std::string::npos)
        << p.error().message;
  }
}

}  // namespace
}  // namespace fusejit
