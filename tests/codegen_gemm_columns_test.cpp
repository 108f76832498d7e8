// CPU (no GPU): a reduction over every row of a linear's or matmul's output
// (gemm_column_cases.h) runs as per-row-tile column partials from the GEMM
// epilogue plus one row-finish kernel: two kernels, the [M, N] value not
// stored unless the finish kernel broadcasts the result back over the rows
// (`h - mean(h, 0)`: it reads the stored h), each mainloop (wgmma on sm_90a,
// mma.sync, FFMA, mma.sync split-K) compiling for sm_80 and sm_90a. Outputs
// of the epilogue are stored beside the partials; two reductions over the
// rows, fuse_reductions=0 and logsumexp keep the reduce kernel. GPU:
// gpu_gemm_columns_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/codegen.h"
#include "compiler/plan.h"
#include "tests/compile_jobs.h"
#include "tests/gemm_column_cases.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::CompileJob;

TEST(CodegenGemmColumns, PartialsFromTheGemmEpilogue) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::GemmColumnCase& c : testing::gemm_column_cases())
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "mainloop=mma,split_k=3"}) {
          if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;
          const std::string label = c.label + " " + std::string(precision_name(p)) + " " + arch + " '" + config + "'";
          auto g = testing::gemm_column_chain(p, c);
          ASSERT_TRUE(g) << label << ": " << g.error().str();
          auto prog = generate_program(*g, {arch, config});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          // (3xTF32 on wgmma adds a launch that splits the operands: not a kernel of the plan)
          ASSERT_NE(prog->plan_text.find("): 2 kernel(s)"), std::string::npos) << label << "\n" << prog->plan_text;
          EXPECT_NE(prog->plan_text.find("partly fused: each tile (rows) stores a partial per column"),
                    std::string::npos)
              << label << "\n" << prog->plan_text;
          EXPECT_NE(prog->plan_text.find("[row-finish]"), std::string::npos) << label << "\n" << prog->plan_text;
          EXPECT_NE(prog->source.find("fj::tile_col_partials<"), std::string::npos) << label;
          // No scratch as large as the anchor's output (the partials are a row tile's fraction of it), but where
          // the finish kernel broadcasts the result over the rows: it reads the stored h.
          const bool columns = prog->plan_text.find("then, as columns, at ") != std::string::npos;
          EXPECT_EQ(columns, c.outputs != "[out]" || c.label.find("scale") != std::string::npos ||
                                 c.label.find("center") != std::string::npos)
              << label << "\n" << prog->plan_text;
          const int64_t out_bytes = g->node(*g->anchor()).type.numel() * 4;
          int64_t largest = 0;
          for (const auto& s : prog->scratch)
            if (s.what.find("split-K") == std::string::npos && s.what.find("residual") == std::string::npos)
              largest = std::max(largest, s.bytes);
          if (columns) EXPECT_GE(largest, out_bytes / 2) << label << "\n" << prog->plan_text;  // h (16-bit: half)
          else EXPECT_LT(largest, out_bytes / 4) << label << "\n" << prog->plan_text;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenGemmColumns, ColumnBroadcastShapes) {
  using cg::column_broadcast_rows;
  EXPECT_EQ(column_broadcast_rows({512}, {128, 512}), 128);
  EXPECT_EQ(column_broadcast_rows({1, 512}, {128, 512}), 128);
  EXPECT_EQ(column_broadcast_rows({1, 1, 80}, {3, 70, 80}), 210);
  EXPECT_EQ(column_broadcast_rows({128, 1}, {128, 512}), 0);  // a row broadcast (row_broadcast_len)
  EXPECT_EQ(column_broadcast_rows({512}, {512}), 0);          // the same shape
  EXPECT_EQ(column_broadcast_rows({2, 80}, {3, 2, 80}), 0);   // more than a column's worth
  EXPECT_EQ(column_broadcast_rows({1}, {7, 1}), 0);           // one column: a row broadcast
  EXPECT_EQ(column_broadcast_rows({}, {7, 3}), 0);
}

TEST(CodegenGemmColumns, OtherConsumers) {
  const testing::GemmColumnCase c = testing::gemm_column_cases()[0];  // sum(gelu(h), 0)
  auto plan = [&](const std::string& ops, const std::string& outputs, const std::string& config = "") {
    const std::string spec =
        "name: t\nprecision: fp32\ninputs:\n" + c.inputs + "ops:\n" + c.anchor + ops + "outputs: " + outputs + "\n";
    auto g = parse_spec(spec, "t");
    EXPECT_TRUE(g) << g.error().str();
    auto prog = generate_program(*g, {"sm_90a", config});
    EXPECT_TRUE(prog.ok()) << prog.error().str();
    return prog.ok() ? prog->plan_text : std::string();
  };
  // gelu(h) an output too: the epilogue stores it beside the partials (2 kernels, no reduce kernel).
  std::string text = plan(c.ops, "[g, out]");
  EXPECT_NE(text.find("partly fused: each tile (rows) stores a partial per column"), std::string::npos) << text;
  EXPECT_NE(text.find("stores %4 -> output 0 'g'"), std::string::npos) << text;
  EXPECT_NE(text.find("): 2 kernel(s)"), std::string::npos) << text;
  // Two reductions over the rows: h stored, one reduce pass for both.
  text = plan("  - {name: s, op: mean, args: [h], dims: [0]}\n  - {name: m, op: max, args: [h], dims: [0]}\n"
              "  - {name: out, op: add, args: [s, m]}\n",
              "[out]");
  EXPECT_NE(text.find("not fused into the epilogue: other consumers need the full [M, N] result"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("partly fused"), std::string::npos) << text;
  // fuse_reductions=0: the reduce kernel.
  text = plan(c.ops, "[out]", "fuse_reductions=0");
  EXPECT_NE(text.find("[reduce]"), std::string::npos) << text;
  EXPECT_NE(text.find("disabled by the codegen config (fuse_reductions=0)"), std::string::npos) << text;
  // A logsumexp over the rows is not a column partial: the stored value and a reduce kernel.
  text = plan("  - {name: out, op: logsumexp, args: [h], dims: [0]}\n", "[out]");
  EXPECT_EQ(text.find("partly fused"), std::string::npos) << text;
  EXPECT_NE(text.find("[reduce]"), std::string::npos) << text;
}

}  // namespace
}  // namespace fusejit
