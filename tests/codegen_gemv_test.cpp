// CPU (no GPU): the GEMV loop (pass_schedule_gemv.cpp, templates/gemm_gemv.cuh)
// for fp32 GEMMs of at most 32 rows on FFMA: which plans take it (the skinny
// fp32 default, mainloop=ffma), which cannot and why (gemv=1 then an error
// naming it), gemv=0 and tile= keep the SIMT tile, gemv_tile= sets the tile (bad
// ones are config errors), and the kernels compile for
// sm_80 and sm_90a without spills. GPU: gpu_gemv_test.cpp.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

Graph linear(int64_t m, int64_t k, int64_t n, DType dt = DType::F32, bool row_sum = false) {
  GraphBuilder g(dt == DType::F32 ? Precision::FP32 : Precision::BF16, "gemv");
  auto y = g.linear(g.input("x", {m, k}, dt), g.input("w", {n, k}, dt), g.input("b", {n}, dt)).gelu();
  g.output("y", row_sum ? y.sum({-1}) : y);
  auto graph = g.build();
  EXPECT_TRUE(graph) << graph.error().str();
  return *graph;
}

Graph matmul(int64_t batch, int64_t m, int64_t k, int64_t n) {
  GraphBuilder g(Precision::FP32, "gemv_matmul");
  g.output("y", g.matmul(g.input("a", {batch, m, k}), g.input("b", {k, n})).relu());
  auto graph = g.build();
  EXPECT_TRUE(graph) << graph.error().str();
  return *graph;
}

TEST(CodegenGemv, FewFp32RowsTakeTheGemvLoop) {
  struct Case {
    Graph g;
    std::string config, plan;
    unsigned splits;  // grid z; 0: not checked
  };
  const Case cases[] = {
      {linear(32, 8192, 1024), "", "tile GEMV 32x64x64 (8x2 per thread, 4 k groups, 128 threads, 2 stages), split-K 16", 16},
      {linear(1, 4096, 4096), "", "tile GEMV 4x32x128 (1x1 per thread, 4 k groups, 128 threads, 4 stages), split-K 3", 3},
      {linear(3, 1000, 70), "mainloop=ffma", "tile GEMV 4x32x128 (1x1 per thread", 0},
      {linear(2, 4096, 512), "mainloop=ffma,gemv_tile=256x16x2x1", "tile GEMV 2x256x16 (2x2 per thread, 1 k groups", 0},
      {linear(17, 2048, 300), "mainloop=ffma,split_k=3", "tile GEMV 20x64x64 (5x2 per thread, 4 k groups", 3},
      {linear(8, 4096, 512), "split_k=1,mainloop=ffma", "tile GEMV 8x64x64", 1},
      {matmul(2, 5, 3000, 52), "mainloop=ffma", "tile GEMV 8x64x64", 0},
  };
  for (const Case& c : cases) {
    auto prog = generate_program(c.g, {"sm_90a", c.config});
    ASSERT_TRUE(prog.ok()) << c.config << ": " << prog.error().str();
    EXPECT_NE(prog->plan_text.find(c.plan), std::string::npos) << prog->plan_text;
    ASSERT_EQ(prog->launches.size(), 1u) << prog->plan_text;
    EXPECT_EQ(prog->launches[0].block[0], 128u);
    EXPECT_GE(prog->launches[0].shared_bytes, 2u * 32 * 132 * 4) << "a ring of at least 2 k-tiles of W in dynamic shared memory";
    EXPECT_EQ(prog->launches[0].aligned.size(), 2u) << "16-byte aligned operands are checked at launch";
    if (c.splits) EXPECT_EQ(prog->launches[0].grid[2], c.splits) << prog->plan_text;
    EXPECT_NE(prog->source.find("fj::GemvTile<"), std::string::npos);
    for (const char* arch : {"sm_80", "sm_90a"}) {
      auto p = generate_program(c.g, {arch, c.config});
      ASSERT_TRUE(p.ok()) << p.error().str();
      auto cubin = compile_to_cubin(p->source, p->name, {arch, false, {"--ptxas-options=-v"}});
      ASSERT_TRUE(cubin.ok()) << arch << ": " << cubin.error().str();
      EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << arch << "\n" << cubin->log;
    }
  }
}

TEST(CodegenGemv, WhereItCannotRunGemvOneSaysWhy) {
  struct Case {
    Graph g;
    std::string config, why;
  };
  const Case cases[] = {
      {linear(33, 4096, 256), "mainloop=ffma,gemv=1", "M=33 is over 32 rows"},
      {linear(8, 4098, 256), "mainloop=ffma,gemv=1", "K=4098 is not a multiple of 4"},
      {matmul(1, 8, 4096, 50), "mainloop=ffma,gemv=1", "N=50 is not a multiple of 4"},
      {linear(8, 4096, 256, DType::BF16), "mainloop=ffma,gemv=1", "operands are not fp32"},
      {linear(8, 4096, 64, DType::F32, true), "mainloop=ffma,gemv=1", "fused into its epilogue"},
      {linear(8, 4096, 256), "mainloop=ffma,gemv=1,tile=32x32x4x4", "the config sets the SIMT tile"},
      {linear(8, 4096, 256), "mainloop=mma,gemv=1", "runs on mma"},
      {linear(8, 4096, 256), "gemv=1", "", },  // the skinny default: FFMA, so the GEMV loop runs
  };
  for (const Case& c : cases) {
    auto prog = generate_program(c.g, {"sm_90a", c.config});
    if (c.why.empty()) {
      ASSERT_TRUE(prog.ok()) << c.config << ": " << prog.error().str();
      EXPECT_NE(prog->plan_text.find("GEMV"), std::string::npos) << prog->plan_text;
      continue;
    }
    ASSERT_FALSE(prog.ok()) << c.config << "\n" << prog->plan_text;
    EXPECT_NE(prog.error().str().find("gemv=1, but"), std::string::npos) << prog.error().str();
    EXPECT_NE(prog.error().str().find(c.why), std::string::npos) << prog.error().str();
  }
  auto old_arch = generate_program(linear(8, 4096, 256), {"sm_75", "mainloop=ffma,gemv=1"});
  ASSERT_FALSE(old_arch.ok());
  EXPECT_NE(old_arch.error().str().find("cp.async needs sm_80"), std::string::npos) << old_arch.error().str();
}

TEST(CodegenGemv, GemvZeroTileAndFusedTailsKeepTheSimtTile) {
  for (const std::string config : {"gemv=0", "mainloop=ffma,tile=32x32x4x4"}) {
    auto prog = generate_program(linear(32, 8192, 1024), {"sm_90a", config});
    ASSERT_TRUE(prog.ok()) << config << ": " << prog.error().str();
    EXPECT_EQ(prog->plan_text.find("GEMV"), std::string::npos) << config << "\n" << prog->plan_text;
    EXPECT_EQ(prog->source.find("GemvTile"), std::string::npos) << config;
  }
  auto fused = generate_program(linear(8, 4096, 64, DType::F32, true), {"sm_90a", "mainloop=ffma"});
  ASSERT_TRUE(fused.ok()) << fused.error().str();
  EXPECT_EQ(fused->plan_text.find("GEMV"), std::string::npos) << fused->plan_text;
  auto bad = generate_program(linear(8, 4096, 64), {"sm_90a", "gemv=2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().str().find("gemv must be 0 or 1"), std::string::npos) << bad.error().str();
}

// gemv_tile= sets BN, BK, TN, the k groups and the stages; the rows follow M (rounded up to whole groups).
TEST(CodegenGemv, GemvTileSetsTheTileAndRefusesWhatCannotRun) {
  auto prog = generate_program(linear(1, 4096, 4096), {"sm_90a", "gemv_tile=32x256x1x4x3"});
  ASSERT_TRUE(prog.ok()) << prog.error().str();
  EXPECT_NE(prog->plan_text.find("tile GEMV 4x32x256 (1x1 per thread, 4 k groups, 128 threads, 3 stages)"),
            std::string::npos) << prog->plan_text;
  auto cubin = compile_to_cubin(prog->source, prog->name, {"sm_90a", false, {"--ptxas-options=-v"}});
  ASSERT_TRUE(cubin.ok()) << cubin.error().str();
  EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << cubin->log;
  // a 64-row GEMM would take mma.sync: gemv_tile asks for FFMA, and the GEMV loop then says why it cannot run
  auto rows = generate_program(linear(64, 4096, 256), {"sm_90a", "gemv_tile=64x64x2x4"});
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.error().str().find("gemv_tile=, but M=64 is over 32 rows"), std::string::npos) << rows.error().str();
  struct Bad {
    std::string config, why;
  };
  const Bad bad[] = {
      {"gemv_tile=64x64", "must be BNxBKxTNxGROUPS[xSTAGES]"},
      {"gemv_tile=64x64x2x0", "must be BNxBKxTNxGROUPS[xSTAGES]"},
      {"gemv_tile=64x64x2x3", "whole 4-k steps a k group"},
      {"gemv_tile=48x64x2x4", "whole warps of tn columns"},
      {"gemv_tile=64x64x2x4x1", "at least 2 stages"},
      {"gemv_tile=64x64x2x4,gemv=0", "gemv=0"},
  };
  for (const Bad& b : bad) {
    auto p = generate_program(linear(8, 4096, 256), {"sm_90a", b.config});
    ASSERT_FALSE(p.ok()) << b.config;
    EXPECT_NE(p.error().str().find(b.why), std::string::npos) << b.config << ": " << p.error().str();
  }
}

}  // namespace
}  // namespace fusejit
