// Simplifications that let rows finish in fewer kernels: a softmax beside a
// logsumexp of the same rows (simplify_logsumexp.cpp) and elementwise ops
// moved before the reshapes that feed them (simplify_sink_reshapes.cpp); each
// checked against the graph as written under the fp64 reference, NaN and
// ±inf included, and by its plan's kernel count.
#include <gtest/gtest.h>

#include "tests/simplify_util.h"

namespace fusejit {
namespace {

using namespace simplify_test;

// ---- softmax beside logsumexp --------------------------------------------------

// linear to [rows, n] plus e (rows of NaN / ±inf), then log_softmax, softmax and logsumexp of t along dim `dim`.
std::string lse_spec(int64_t n, int64_t dim, bool keepdim) {
  return "name: zloss\nprecision: fp32\ninputs:\n  - {name: x, shape: [8, 32]}\n  - {name: w, shape: [" +
         std::to_string(n) + ", 32]}\n  - {name: e, shape: [8, " + std::to_string(n) +
         "]}\nops:\n  - {name: h, op: linear, args: [x, w]}\n  - {name: t, op: add, args: [h, e]}\n"
         "  - {name: lp, op: log_softmax, args: [t], dim: " + std::to_string(dim) + "}\n"
         "  - {name: sm, op: softmax, args: [t], dim: " + std::to_string(dim) + "}\n"
         "  - {name: l, op: logsumexp, args: [t], dims: [" + std::to_string(dim) + "], keepdim: " +
         (keepdim ? "true" : "false") + "}\noutputs: [lp, sm, l]\n";
}

TEST(Simplify, SoftmaxBesideLogsumexpOfWideRowsSharesItsRowReduction) {
  for (bool keepdim : {false, true}) {
    SCOPED_TRACE(keepdim ? "keepdim" : "no keepdim");
    Graph g = spec(lse_spec(300, -1, keepdim));
    std::vector<std::string> notes;
    Graph s = simplified(g, &notes);
    EXPECT_EQ(count(s, OpKind::LogSoftmax) + count(s, OpKind::Softmax), 0) << print_graph(s);
    EXPECT_EQ(count(s, OpKind::LogSumExp), 1) << print_graph(s);
    EXPECT_EQ(count(s, OpKind::Reshape), keepdim ? 0 : 1) << print_graph(s);
    // Rows with one +inf, all -inf, some -inf, a NaN, and finite ones: NaN exactly where PyTorch's softmax is.
    std::vector<HostTensor> in = make_random_inputs(g, 5);
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float>& e = in[2].data;
    e[0 * 300 + 17] = inf;
    for (int j = 0; j < 300; ++j) e[1 * 300 + j] = -inf;
    for (int j = 0; j < 300; j += 3) e[2 * 300 + j] = -inf;
    e[3 * 300 + 5] = std::numeric_limits<float>::quiet_NaN();
    const auto written = eval(g, in), simple = eval(s, in);
    for (const std::string& m : mismatches(written, simple, 1e-12)) ADD_FAILURE() << m;
    ASSERT_EQ(written.size(), 3u);
    EXPECT_TRUE(std::isnan(written[0][0 * 300 + 3]) && std::isnan(written[1][1 * 300]) &&
                std::isnan(written[0][3 * 300 + 7]))
        << "the rows with +inf, all -inf and NaN are NaN in PyTorch's log_softmax / softmax";
    EXPECT_TRUE(std::isfinite(written[0][2 * 300 + 1]) && std::isinf(written[0][2 * 300]))
        << "a row with some -inf: -inf there, finite elsewhere";
    EXPECT_TRUE(std::isinf(written[2][0]) && written[2][0] > 0) << "logsumexp of a row with +inf is +inf";
    expect_same_meaning(g, s, 1e-12);
    const Program before = program(g, "simplify=0"), after = program(g);
    EXPECT_EQ(testing::chain_launches(before), 4u) << before.plan_text;  // anchor, two softmax kernels, the finish
    EXPECT_EQ(testing::chain_launches(after), 2u) << after.plan_text;
    EXPECT_NE(after.plan_text.find("simplify: log_softmax 'lp' -> (x - L) + (L - L)"), std::string::npos)
        << after.plan_text;
  }
}

TEST(Simplify, SoftmaxBesideLogsumexpStaysWhereATileHoldsTheRowOrItIsNotTheAnchorsN) {
  for (const auto& [n, dim] : {std::pair<int64_t, int64_t>{256, -1}, {300, 0}}) {
    Graph g = spec(lse_spec(n, dim, false));
    Graph s = simplified(g);
    EXPECT_EQ(count(s, OpKind::LogSoftmax), 1) << n << " " << dim << "\n" << print_graph(s);
    EXPECT_EQ(count(s, OpKind::Softmax), 1) << print_graph(s);
  }
  // Narrow rows: the softmaxes and the logsumexp stay one epilogue.
  const Program narrow = program(spec(lse_spec(128, -1, false)));
  EXPECT_EQ(testing::chain_launches(narrow), 1u) << narrow.plan_text;
}

TEST(Simplify, ElementwiseOpsOfReshapesBecomeReshapesOfTheOps) {
  // t's row sums flattened, then squared, scaled and compared: the ops run on the sums, one reshape at the end.
  Graph g = spec(size1_spec("  - {name: s, op: sum, args: [t], dims: [0], keepdim: true}\n"
                            "  - {name: f, op: reshape, args: [s], shape: [1]}\n"
                            "  - {name: q, op: mul, args: [f, f]}\n"
                            "  - {name: y, op: mul, args: [q, 0.5]}\n"
                            "  - {name: c, op: gt, args: [f, q]}\n",
                            "y, c, f"));
  std::vector<std::string> notes;
  Graph s = simplified(g, &notes);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("of reshaped values -> the reshape of"), std::string::npos) << notes[0];
  for (const Output& o : s.outputs)
    EXPECT_EQ(s.node(o.value).op, OpKind::Reshape) << o.name << "\n" << print_graph(s);
  for (const Node& n : s.nodes)
    EXPECT_FALSE(is_elementwise(n.op) && n.type.shape == Shape{1}) << "an op left on the reshaped [1]\n" << print_graph(s);
  EXPECT_EQ(count(s, OpKind::Reshape), 3) << print_graph(s);
  expect_same_meaning(g, s);
  // An operand that is not a reshape of a value of the same shape, or a reshape broadcast by the op: kept.
  Graph kept = spec(size1_spec("  - {name: f, op: reshape, args: [t], shape: [64]}\n"
                               "  - {name: v, op: reshape, args: [e], shape: [1, 64]}\n"
                               "  - {name: r, op: sum, args: [x], dims: [1]}\n"
                               "  - {name: y, op: add, args: [f, r]}\n"
                               "  - {name: z, op: mul, args: [v, f]}\n",
                               "y, z"));
  Graph ks = simplified(kept);
  EXPECT_EQ(count(ks, OpKind::Reshape), 2) << print_graph(ks);
  expect_same_meaning(kept, ks);
}

}  // namespace
}  // namespace fusejit
