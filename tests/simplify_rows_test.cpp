// Simplifications that let rows finish in fewer kernels: a softmax beside a
// logsumexp of the same rows (simplify_logsumexp.cpp) and elementwise ops
// moved before the reshapes that feed them (simplify_sink_reshapes.cpp); each
// checked against the graph as written under the fp64 reference, NaN and
// ±inf included, and by its plan's kernel count.
#include <gtest/gtest.h>

#include <tuple>

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

// ---- reductions over the rows and more, split at the rows -----------------------

// linear to [rows, 300] plus e, then `op` of t over `dims` (or of a value beside the linear's, which scales t).
std::string total_spec(const std::string& op, const std::string& dims, bool keepdim, const std::string& of = "t",
                       int rows = 64) {
  const std::string m = std::to_string(rows);
  return "name: total\nprecision: fp32\ninputs:\n  - {name: x, shape: [" + m + ", 32]}\n"
         "  - {name: w, shape: [300, 32]}\n  - {name: e, shape: [" + m + ", 300]}\nops:\n"
         "  - {name: h, op: linear, args: [x, w]}\n  - {name: t, op: add, args: [h, e]}\n"
         "  - {name: r, op: " + op + ", args: [" + of + "], dims: " + dims + ", keepdim: " +
         (keepdim ? "true" : "false") + "}\n" +
         (of == "t" ? "outputs: [r]\n" : "  - {name: y, op: mul, args: [t, r]}\noutputs: [y]\n");
}

// A batched matmul [3, 40, 200], squared, summed over `dims`.
std::string batch_total_spec(const std::string& dims) {
  return "name: bt\nprecision: fp32\ninputs:\n  - {name: a, shape: [3, 40, 24]}\n"
         "  - {name: b, shape: [3, 24, 200]}\nops:\n  - {name: h, op: matmul, args: [a, b]}\n"
         "  - {name: q, op: mul, args: [h, h]}\n"
         "  - {name: r, op: sum, args: [q], dims: " + dims + ", keepdim: true}\noutputs: [r]\n";
}

TEST(Simplify, ReductionsOverTheRowsAndMoreSplitAtTheRows) {
  for (const char* op : {"sum", "mean", "max", "min"})
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(std::string(op) + (keepdim ? " keepdim" : ""));
      Graph g = spec(total_spec(op, "[0, 1]", keepdim));
      std::vector<std::string> notes;
      Graph s = simplified(g, &notes);
      ASSERT_FALSE(notes.empty());
      EXPECT_NE(notes[0].find(std::string(op) + " 'r' over dims [0,1] -> " + op +
                              " along the rows (dim 1), then over dims " + (keepdim ? "[0]" : "[0,1]")),
                std::string::npos) << notes[0];
      const Node& out = s.node(s.outputs[0].value);
      ASSERT_EQ(out.op, g.node(g.outputs[0].value).op) << print_graph(s);
      const std::vector<int64_t> total_dims = keepdim ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 1};
      EXPECT_EQ(out.attr_ints("dims"), total_dims) << print_graph(s);
      const Node& rows = s.node(out.operands[0]);
      EXPECT_EQ(rows.attr_ints("dims"), std::vector<int64_t>{1}) << print_graph(s);
      EXPECT_EQ(rows.type.shape, Shape({64, 1})) << print_graph(s);
      // Finite inputs: equal but for the order of the sums. NaN and ±inf (special_inputs): NaN where it was.
      const auto in = make_random_inputs(g, 3);
      for (const std::string& m : mismatches(eval(g, in), eval(s, in), 1e-12)) ADD_FAILURE() << m;
      expect_same_meaning(g, s, 1e-12);
      std::vector<HostTensor> inf = make_random_inputs(g, 4);
      const double big = std::numeric_limits<float>::infinity();
      inf[2].data[5 * 300 + 7] = static_cast<float>(big);  // +inf alone: +inf for sum / mean / max
      const auto w1 = eval(g, inf), s1 = eval(s, inf);
      for (const std::string& m : mismatches(w1, s1, 1e-12)) ADD_FAILURE() << m;
      inf[2].data[9 * 300 + 3] = static_cast<float>(-big);  // and -inf: NaN for sum / mean
      for (const std::string& m : mismatches(eval(g, inf), eval(s, inf), 1e-12)) ADD_FAILURE() << m;
      // The value goes to the epilogue's row partials and the finish: no [64, 300] scratch, two kernels.
      const Program before = program(g, "simplify=0"), after = program(g);
      EXPECT_GE(scratch_bytes(before), 64 * 300 * 4) << before.plan_text;
      EXPECT_LT(scratch_bytes(after), 64 * 300 * 4) << after.plan_text;
      EXPECT_EQ(testing::chain_launches(after), 2u) << after.plan_text;
    }
  // More rows than one block folds (kAcrossRowsMaxRows): the row-finish kernel's blocks fold their rows and the
  // last to finish combines the folds; the CPU backend reduces the rows' values in a kernel of their own.
  for (int rows : {1024, 1100, 5000}) {
    SCOPED_TRACE(rows);
    Graph g = spec(total_spec("mean", "[0, 1]", false, "t", rows));
    EXPECT_EQ(count(simplified(g), OpKind::Mean), 2);
    const Program p = program(g);
    EXPECT_EQ(testing::chain_launches(p), 2u) << p.plan_text;
    EXPECT_LT(scratch_bytes(p), int64_t{rows} * 300 * 4) << p.plan_text;
    const unsigned blocks = static_cast<unsigned>((rows + 1023) / 1024);
    EXPECT_EQ(p.launches.back().grid[0], blocks) << p.plan_text;
    EXPECT_EQ(p.source.find("fj::last_block_of_grid") != std::string::npos, blocks > 1) << p.source;
  }
  // A total of values a later kernel computes ((h - mean(h))^2 in the row-finish kernel, a log_softmax's in its
  // kernel): as written, or the rows' values would take a reduce kernel of their own.
  for (const char* value : {"  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}\n"
                            "  - {name: c, op: sub, args: [h, mu]}\n  - {name: q, op: mul, args: [c, c]}\n",
                            "  - {name: c, op: log_softmax, args: [h], dim: 1}\n  - {name: q, op: mul, args: [c, c]}\n"}) {
    Graph later = spec("name: vt\nprecision: fp32\ninputs:\n  - {name: x, shape: [64, 32]}\n"
                       "  - {name: w, shape: [300, 32]}\nops:\n  - {name: h, op: linear, args: [x, w]}\n" +
                       std::string(value) + "  - {name: t, op: sum, args: [q], dims: [0, 1]}\noutputs: [t]\n");
    EXPECT_EQ(count(simplified(later), OpKind::Sum), 1) << value;
  }
  // A batched matmul's total: along the rows, then over dims [0, 1].
  Graph bm = spec(batch_total_spec("[0, 1, 2]"));
  Graph bs = simplified(bm);
  EXPECT_EQ(count(bs, OpKind::Sum), 2) << print_graph(bs);
  expect_same_meaning(bm, bs, 1e-12);
  EXPECT_EQ(testing::chain_launches(program(bm)), 2u);
}

TEST(Simplify, ReductionsThatKeepTheRowsOrAreNotTheAnchorsStay) {
  for (const auto& [op, dims, of] : {std::tuple<const char*, const char*, const char*>{"sum", "[0]", "t"},  // columns
                                     {"max", "[1]", "t"},                                                  // rows only
                                     {"sum", "[0, 1]", "e"},       // an input's total
                                     {"logsumexp", "[0, 1]", "t"}}) {
    SCOPED_TRACE(std::string(op) + " " + dims + " of " + of);
    Graph g = spec(total_spec(op, dims, false, of));
    Graph s = simplified(g);
    EXPECT_EQ(s.nodes.size(), g.nodes.size()) << print_graph(s);
  }
  // Totals per batch: the rows' values would take a third kernel.
  EXPECT_EQ(count(simplified(spec(batch_total_spec("[1, 2]"))), OpKind::Sum), 1);
  // A conv's total: the conv epilogue reduces pixels its own way (pass_fuse_spatial.cpp).
  Graph conv = spec("name: ct\nprecision: fp32\ninputs:\n  - {name: x, shape: [2, 4, 10, 10]}\n"
                    "  - {name: w, shape: [8, 4, 3, 3]}\nops:\n  - {name: c, op: conv2d, args: [x, w]}\n"
                    "  - {name: r, op: sum, args: [c], dims: [1, 2, 3]}\noutputs: [r]\n");
  EXPECT_EQ(count(simplified(conv), OpKind::Sum), 1);
}

}  // namespace
}  // namespace fusejit
