// CPU (no GPU): a reduction over every row of a linear's or matmul's output
// (gemm_column_cases.h) runs as per-row-tile column partials from the GEMM
// epilogue plus one row-finish kernel: two kernels, the [M, N] value never
// stored, each mainloop (wgmma on sm_90a, mma.sync, FFMA, mma.sync split-K)
// compiling for sm_80 and sm_90a. A reduced value the graph outputs keeps it
// stored, and fuse_reductions=0 keeps the reduce kernel. GPU:
// gpu_gemm_columns_test.cpp.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
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
          // No scratch as large as the anchor's output: the partials are a row tile's fraction of it.
          const int64_t out_bytes = g->node(*g->anchor()).type.numel() * 4;
          for (const auto& s : prog->scratch)
            if (s.what.find("split-K") == std::string::npos) EXPECT_LT(s.bytes, out_bytes) << label << ": " << s.what;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenGemmColumns, OtherConsumersKeepTheOutputStored) {
  const testing::GemmColumnCase c = testing::gemm_column_cases()[0];  // sum(gelu(h), 0)
  // gelu(h) an output too: it is stored, and a reduce kernel reads it.
  auto g = testing::gemm_column_chain(Precision::FP32, c);
  ASSERT_TRUE(g);
  std::string spec = "name: both\nprecision: fp32\ninputs:\n" + c.inputs + "ops:\n" + c.anchor + c.ops +
                     "outputs: [g, out]\n";
  auto two = parse_spec(spec, "both");
  ASSERT_TRUE(two) << two.error().str();
  auto prog = generate_program(*two, {"sm_90a", ""});
  ASSERT_TRUE(prog.ok()) << prog.error().str();
  EXPECT_NE(prog->plan_text.find("not fused into the epilogue: other consumers need the full [M, N] result"),
            std::string::npos)
      << prog->plan_text;
  EXPECT_EQ(prog->plan_text.find("partly fused"), std::string::npos) << prog->plan_text;
  auto off = generate_program(*g, {"sm_90a", "fuse_reductions=0"});
  ASSERT_TRUE(off.ok()) << off.error().str();
  EXPECT_NE(off->plan_text.find("[reduce]"), std::string::npos) << off->plan_text;
  EXPECT_NE(off->plan_text.find("disabled by the codegen config (fuse_reductions=0)"), std::string::npos)
      << off->plan_text;
  // A logsumexp over the rows is not a column partial: the stored value and a reduce kernel.
  const std::string lse = "name: lse\nprecision: fp32\ninputs:\n" + c.inputs + "ops:\n" + c.anchor +
                          "  - {name: out, op: logsumexp, args: [h], dims: [0]}\noutputs: [out]\n";
  auto gl = parse_spec(lse, "lse");
  ASSERT_TRUE(gl) << gl.error().str();
  auto pl = generate_program(*gl, {"sm_90a", ""});
  ASSERT_TRUE(pl.ok()) << pl.error().str();
  EXPECT_EQ(pl->plan_text.find("partly fused"), std::string::npos) << pl->plan_text;
  EXPECT_NE(pl->plan_text.find("[reduce]"), std::string::npos) << pl->plan_text;
}

}  // namespace
}  // namespace fusejit
