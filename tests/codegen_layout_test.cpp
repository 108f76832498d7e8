// Graphs without an anchor (pointwise programs) and the layout ops, erf and
// comparisons in the CUDA codegen (no GPU needed): the plans (what each
// kernel does, what goes to memory), and the generated sources compile to
// CUBINs with NVRTC for sm_80 and sm_90a — the fixed cases of
// tests/layout_cases.h and 60 random pointwise programs.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "compiler/tuning_space.h"
#include "fusejit/builder.h"
#include "fusejit/spec.h"
#include "tests/compile_jobs.h"
#include "tests/layout_cases.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

Graph case_graph(const std::string& name) {
  for (const testing::LayoutCase& c : testing::layout_cases())
    if (c.name == name) {
      auto g = parse_spec(c.spec, c.name + ".yaml");
      EXPECT_TRUE(g) << c.name << ": " << g.error().str();
      return g ? g.take() : Graph{};
    }
  ADD_FAILURE() << "no layout case " << name;
  return {};
}

Program plan(const Graph& g, const std::string& arch = "sm_90a", const std::string& config = "") {
  auto p = generate_program(g, {arch, config});
  EXPECT_TRUE(p) << p.error().str();
  return p ? p.take() : Program{};
}

void add_jobs(std::vector<test_util::CompileJob>& jobs, const std::string& label, const Graph& g) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto p = generate_program(g, {arch, ""});
    if (!p) {
      ADD_FAILURE() << label << " (" << arch << "): " << p.error().str() << "\n" << print_graph(g);
      continue;
    }
    jobs.push_back({label, arch, p->name, p->source});
  }
}

TEST(CodegenLayout, FixedCasesCompileForSm80AndSm90a) {
  std::vector<test_util::CompileJob> jobs;
  for (const testing::LayoutCase& c : testing::layout_cases()) {
    auto g = parse_spec(c.spec, c.name + ".yaml");
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    add_jobs(jobs, c.name, *g);
  }
  for (const std::string& f : test_util::compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenLayout, RandomProgramsCompileForSm80AndSm90a) {
  std::vector<test_util::CompileJob> jobs;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    auto g = testing::random_program(seed);
    ASSERT_TRUE(g) << "program " << seed << ": " << g.error().str();
    add_jobs(jobs, "program " + std::to_string(seed), *g);
  }
  for (const std::string& f : test_util::compile_all(jobs)) ADD_FAILURE() << f;
}

// y = relu(x) * w: one kernel recomputing both ops from the inputs.
TEST(CodegenLayout, PointwiseProgramIsOneKernel) {
  const Program p = plan(case_graph("relu_mul_broadcast"));
  ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
  EXPECT_EQ(p.launches[0].kernel, "fj_write_relu_mul");
  EXPECT_TRUE(p.scratch.empty()) << p.plan_text;
  EXPECT_NE(p.plan_text.find("no anchor op: a pointwise program"), std::string::npos) << p.plan_text;
  EXPECT_NE(p.plan_text.find("(relu %2, mul %3)"), std::string::npos) << p.plan_text;
  EXPECT_EQ(p.source.find("gemm_simt.cuh"), std::string::npos) << "no anchor: no GEMM template";
}

// dz = dy * gt(z, 0) is an output and db = sum(dz) reads it from there.
TEST(CodegenLayout, ReductionReadsTheStoredOutput) {
  const Program p = plan(case_graph("relu_backward"));
  ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
  EXPECT_EQ(p.launches[0].kernel, "fj_write_gt_mul");
  EXPECT_EQ(p.launches[1].kernel, "fj_sum");
  EXPECT_TRUE(p.scratch.empty()) << p.plan_text;
  EXPECT_NE(p.plan_text.find("reads %4 from output 0 'dz'"), std::string::npos) << p.plan_text;
}

// Reductions of the same rows share one pass (a row pass); the leaf
// expression dz, a graph output, is stored by it instead of a kernel of its own.
TEST(CodegenLayout, RowPassReducesTheSameRowsOnceAndStoresDz) {
  const Program p = plan(case_graph("conv_bias_backward_row_pass"));
  ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
  EXPECT_TRUE(p.scratch.empty()) << p.plan_text;
  EXPECT_NE(p.plan_text.find("stores %5 (a graph output) as the pass computes it"), std::string::npos) << p.plan_text;
  for (const char* r : {"sum %6", "max %7", "mean %10"})
    EXPECT_NE(p.plan_text.find(std::string(r) + " reduces the same rows in the same pass"), std::string::npos)
        << r << "\n" << p.plan_text;
  EXPECT_NE(p.source.find("fj::reduce_rows_multi<"), std::string::npos);
  EXPECT_NE(p.source.find("fj::SumOp, fj::SumOp, fj::MaxOp, fj::SumOp>"), std::string::npos) << p.source;
  // row_pass=0: the previous plan (a pointwise kernel writes dz; four reductions).
  const Program q = plan(case_graph("conv_bias_backward_row_pass"), "sm_90a", "row_pass=0");
  EXPECT_EQ(q.launches.size(), 5u) << q.plan_text;
  // Short rows (groups of threads a row, inactive groups in the last block); r = s - u reads both results.
  const Program s = plan(case_graph("short_rows_row_pass"));
  ASSERT_EQ(s.launches.size(), 2u) << s.plan_text;
  EXPECT_NE(s.plan_text.find("stores %3 (a graph output) as the pass computes it"), std::string::npos) << s.plan_text;
  // Rows that are not contiguous runs (sum over dims [0]) and too few columns for reduce_columns: dz keeps
  // its own (coalesced) kernel.
  const Program c = plan(case_graph("relu_backward"));
  EXPECT_EQ(c.launches.size(), 2u) << c.plan_text;
  // A reduction by columns (fj::reduce_columns) reads dz back from the kernel that writes it, and so does the
  // transpose (no pass storing dz: see row_pass_root).
  const Program d = plan(case_graph("linear_bias_backward_column_pass"));
  ASSERT_EQ(d.launches.size(), 3u) << d.plan_text;
  EXPECT_EQ(d.launches[1].kernel, "fj_sum");
  EXPECT_NE(d.plan_text.find("sum %7 f32[1000], reads %6 from output 1 'dz'"), std::string::npos) << d.plan_text;
  EXPECT_NE(d.source.find("fj::reduce_columns<"), std::string::npos) << d.source;
  EXPECT_NE(d.plan_text.find("reading %6 at swapped coordinates from the buffer"), std::string::npos) << d.plan_text;
}

// A transpose of the epilogue's value is stored by the epilogue at swapped
// coordinates (pass_epilogue_transpose.cpp); epilogue_transpose=0 and the
// CPU target keep the transposing kernel over a scratch copy.
TEST(CodegenLayout, TransposeOfTheEpilogueIsStoredByIt) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const Program p = plan(case_graph("linear_relu_transpose"), arch);
    // (sm_90a's fp32 wgmma: the 3xTF32 operand staging launch first, residuals in scratch)
    EXPECT_NE(p.plan_text.find("): 1 kernel(s)"), std::string::npos) << arch << "\n" << p.plan_text;
    EXPECT_EQ(p.plan_text.find("relu 'r' (f32"), std::string::npos) << "no scratch copy\n" << p.plan_text;
    EXPECT_NE(p.plan_text.find("stores %4 -> output 0 't' (transpose of %3: at swapped coordinates)"),
              std::string::npos) << p.plan_text;
    EXPECT_NE(p.source.find("fj::store_from_float(p, i1 * 32 + i0, v);"), std::string::npos) << p.source;
  }
  const Program p = plan(case_graph("linear_relu_transpose"), "sm_80", "epilogue_transpose=0");
  ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
  EXPECT_EQ(p.launches[1].kernel, "fj_pointwise_transpose");
  EXPECT_NE(p.plan_text.find("transpose %4 reads %3 [32,24] with dims 0 and 1 swapped"), std::string::npos)
      << p.plan_text;
  EXPECT_NE(p.source.find("__shared__ float tile[32][33]"), std::string::npos) << "a plain copy: a tiled transpose";
  {  // square: the output is [128, 128] like the tile, but at swapped coordinates: not by TMA
    const Program q = plan(case_graph("matmul_square_transposed_bf16"), "sm_90a", "mainloop=wgmma");
    ASSERT_EQ(q.launches.size(), 1u) << q.plan_text;
    EXPECT_NE(q.plan_text.find("transpose %6 of %5: stored by the epilogue"), std::string::npos) << q.plan_text;
    EXPECT_EQ(q.plan_text.find("TMA bulk"), std::string::npos) << q.plan_text;
    EXPECT_NE(q.source.find("fj::tile_pointwise_staged<"), std::string::npos) << q.source;
    EXPECT_NE(q.source.find(", true>(frag"), std::string::npos) << "rows first\n" << q.source;
    const Program t = plan(case_graph("matmul_square_transposed_bf16"), "sm_90a", "mainloop=wgmma,tma_store=1");
    EXPECT_NE(t.plan_text.find("not TMA bulk stores: a transpose is stored at swapped coordinates"),
              std::string::npos) << t.plan_text;
  }
  {  // the output kept too: the tile goes out row-major, and the transposing kernel reads it back
    const Program q = plan(case_graph("linear_output_and_transpose"), "sm_80");
    ASSERT_EQ(q.launches.size(), 2u) << q.plan_text;
    EXPECT_EQ(q.launches[1].kernel, "fj_pointwise_transpose");
    EXPECT_EQ(q.plan_text.find("at swapped coordinates)"), std::string::npos) << q.plan_text;
  }
  {  // read back by the row kernel after it
    const Program q = plan(case_graph("linear_transpose_then_row_sum"), "sm_80");
    EXPECT_NE(q.plan_text.find("stores %4 -> scratch 0 (transpose of %3: at swapped coordinates)"), std::string::npos)
        << q.plan_text;
    EXPECT_EQ(q.launches[0].kernel.rfind("fj_linear", 0), 0u) << q.plan_text;
  }
  {  // batched, dims 0 and 2 swapped: [3, 20, 17] -> [17, 20, 3]
    const Program q = plan(case_graph("batched_matmul_transpose_batch"));
    ASSERT_EQ(q.launches.size(), 1u) << q.plan_text;
    EXPECT_NE(q.source.find("fj::store_from_float(p, i2 * 60 + i1 * 3 + i0, v);"), std::string::npos) << q.source;
  }
  // Ops on transposed operands: loads at swapped coordinates.
  const Program q = plan(case_graph("transpose_mul"), "sm_80");
  EXPECT_NE(q.source.find("_at_1_0("), std::string::npos) << q.source;
  EXPECT_EQ(q.source.find("tile[32][33]"), std::string::npos);
}

// A transposed input is a leaf expression: loaded at swapped coordinates in the epilogue.
TEST(CodegenLayout, TransposedInputFusesIntoTheEpilogue) {
  const Program p = plan(case_graph("linear_plus_transposed_input"), "sm_80");
  EXPECT_EQ(p.launches.size(), 1u) << p.plan_text;
}

TEST(CodegenLayout, ViewsAndExpands) {
  {
    const Program p = plan(case_graph("reshape_sum_mul"));
    ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
    EXPECT_NE(p.plan_text.find("reshape %2 [40,1] is a view of %1 [40] (scratch 0"), std::string::npos)
        << p.plan_text;
  }
  {
    const Program p = plan(case_graph("expand_sum_mul"));
    ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
    EXPECT_NE(p.plan_text.find("expand %2 broadcasts %1 [40,1] to [40,24]"), std::string::npos) << p.plan_text;
  }
  {  // an output that is a view of another output: the sum's kernel stores both (no copy kernel)
    const Program p = plan(case_graph("reshape_as_output"));
    ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
    EXPECT_NE(p.plan_text.find("stores %1 -> output 1 's' output 0 'r'"), std::string::npos) << p.plan_text;
    EXPECT_NE(p.plan_text.find("the kernel that stores %1 writes its output buffer too"), std::string::npos)
        << p.plan_text;
  }
  {  // views of a computed value, outputs: its kernel stores them (no copy kernel), in the value's own order
    const Program p = plan(case_graph("reshape_of_leaf_as_output"));
    ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
    EXPECT_NE(p.plan_text.find("stores %1 -> output 0 'v2' output 1 'v'"), std::string::npos) << p.plan_text;
    EXPECT_TRUE(p.scratch.empty()) << p.plan_text;
  }
  {  // a view of an input, an output: only a copy puts it there
    const Program p = plan(case_graph("reshape_input_as_output"));
    ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
    EXPECT_NE(p.plan_text.find("stores %1 -> output 0 'v'"), std::string::npos) << p.plan_text;
    EXPECT_NE(p.plan_text.find("written out because it is a graph output"), std::string::npos) << p.plan_text;
  }
  for (const char* name : {"linear_sum_flattened", "conv_pool_flattened"}) {  // flattened results of an anchor chain
    const Program p = plan(case_graph(name));
    EXPECT_EQ(testing::chain_launches(p), 2u) << name << "\n" << p.plan_text;
    EXPECT_EQ(p.plan_text.find("copied out"), std::string::npos) << name << "\n" << p.plan_text;
  }
  {  // a reduction reads a view of its input directly
    const Program p = plan(case_graph("reshape_input_then_reduce"));
    ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
    EXPECT_NE(p.plan_text.find("reads %1 from input 0"), std::string::npos) << p.plan_text;
  }
  {  // a reshape of a computed value that only moves size-1 dims is recomputed, never stored
    const Program p = plan(case_graph("squeeze_reshape_of_leaf"));
    ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
    EXPECT_TRUE(p.scratch.empty()) << p.plan_text;
  }
}

// The backward's dZ^T: dZ is written out first, so the transpose reads it
// (one strided load) rather than recomputing dZ from strided loads of its inputs.
TEST(CodegenLayout, TransposeReadsAWrittenLeafExpression) {
  const Program p = plan(case_graph("relu_backward_bf16"));
  ASSERT_EQ(p.launches.size(), 3u) << p.plan_text;
  EXPECT_EQ(p.launches[2].kernel, "fj_write_transpose") << p.plan_text;
  EXPECT_NE(p.plan_text.find("reading %4 at swapped coordinates"), std::string::npos) << p.plan_text;
  EXPECT_NE(p.plan_text.find("a tiled transpose: 32x32 tiles through shared memory"), std::string::npos) << p.plan_text;
  EXPECT_NE(p.source.find("__shared__ float tile[32][33]"), std::string::npos);
}

TEST(CodegenLayout, SoftmaxOfATransposedInputMaterializesIt) {
  const Program p = plan(case_graph("log_softmax_of_transpose"));
  ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
  EXPECT_EQ(p.launches[0].kernel, "fj_write_transpose");
  EXPECT_EQ(p.launches[1].kernel, "fj_log_softmax");
}

// Reductions whose outputs are consecutive elements (the backward's bias
// gradient sums columns) read a warp's 32 outputs per load.
TEST(CodegenLayout, ColumnReductionsReadAlongTheKeptDims) {
  const Program p = plan(case_graph("column_reductions"));
  ASSERT_EQ(p.launches.size(), 6u) << p.plan_text;
  int columns = 0;
  for (const LaunchSpec& l : p.launches) columns += l.block[0] == 512;
  EXPECT_EQ(columns, 4) << "sum, max, min, and the bias gradient: columns; mean over [0, 1] (3 blocks) and "
                           "logsumexp: rows";
  EXPECT_NE(p.source.find("fj::reduce_columns<16, fj::SumOp>"), std::string::npos);
}

TEST(CodegenLayout, NothingToTuneWithoutAnAnchor) {
  const Graph g = case_graph("relu_backward");
  EXPECT_EQ(tuning_candidates(g, "sm_90a"), std::vector<std::string>{""});
  EXPECT_EQ(tuning_candidates(g, "sm_80"), std::vector<std::string>{""});
}

TEST(CodegenLayout, ErfAndComparisonsUseTheOpLibrary) {
  const Program p = plan(case_graph("comparisons"));
  for (const char* f : {"fj::op::ge(", "fj::op::lt(", "fj::op::le(", "fj::op::eq("})
    EXPECT_NE(p.source.find(f), std::string::npos) << f;
  EXPECT_NE(plan(case_graph("gelu_backward_erf")).source.find("fj::op::erf_("), std::string::npos);
}

TEST(CodegenLayout, StructureRules) {
  {  // anchor-less graphs are valid
    GraphBuilder b;
    auto x = b.input("x", {4, 8});
    b.output("y", x.transpose(0, 1).relu());
    auto g = b.build();
    ASSERT_TRUE(g) << g.error().str();
    EXPECT_EQ(g->inputs().size(), 1u);
    EXPECT_EQ(g->node(g->inputs()[0]).init, InitKind::Normal) << "inputs of an anchor-less graph: normal";
  }
  {  // ... but must compute their outputs
    GraphBuilder b;
    auto x = b.input("x", {4, 8});
    b.output("y", x.relu());
    b.output("c", b.constant(2.0));
    auto g = b.build();
    ASSERT_FALSE(g);
    EXPECT_NE(g.error().message.find("output 'c' is constant"), std::string::npos) << g.error().str();
    EXPECT_NE(g.error().message.find("(an op, not a constant)"), std::string::npos) << g.error().str();
  }
  {  // with an anchor, every output still depends on it
    GraphBuilder b;
    auto x = b.input("x", {4, 8});
    auto w = b.input("w", {8, 8});
    b.output("h", b.linear(x, w));
    b.output("r", x.relu());
    auto g = b.build();
    ASSERT_FALSE(g);
    EXPECT_NE(g.error().message.find("does not depend on the anchor"), std::string::npos) << g.error().str();
  }
}

}  // namespace
}  // namespace fusejit
