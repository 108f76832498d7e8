// CPU (no GPU): split-K on the SIMT FFMA mainloop (pass_schedule.cpp
// with_simt_split_k, templates/split_k.cuh): a skinny fp32 GEMM whose tiles
// leave the SMs idle splits K over 32x32 tiles; `split_k=` sets the split;
// fused tails keep whole tiles (gemv=0 where the GEMV loop would take it); the kernels compile for sm_80 and sm_90a
// without spills. GPU: gpu_gemm_test.cpp (FfmaSplitKMatchesReference).
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

Graph linear_chain(int64_t m, int64_t k, int64_t n, bool row_sum = false) {
  GraphBuilder g(Precision::FP32, "simt_split_k");
  auto y = g.linear(g.input("x", {m, k}), g.input("w", {n, k}), g.input("b", {n})).gelu();
  g.output("y", row_sum ? y.sum({-1}) : y);
  auto graph = g.build();
  EXPECT_TRUE(graph) << graph.error().str();
  return *graph;
}

TEST(CodegenSimtSplitK, SkinnyGemmsSplitK) {
  struct Case {
    Graph g;
    std::string config, plan;
    unsigned splits;
  };
  GraphBuilder mb(Precision::FP32, "simt_split_k_matmul");
  mb.output("y", mb.matmul(mb.input("a", {2, 17, 4000}), mb.input("b", {4000, 50})).relu());
  auto matmul = mb.build();
  ASSERT_TRUE(matmul) << matmul.error().str();
  const Case cases[] = {
      {linear_chain(32, 8192, 1024), "mainloop=ffma,gemv=0", "tile 32x32x32 (4x4 per thread, 64 threads), split-K 16", 16},
      {linear_chain(33, 3000, 70), "mainloop=ffma", "tile 64x32x32 (4x4 per thread, 128 threads), split-K", 0},
      {linear_chain(1, 4096, 96), "mainloop=ffma,split_k=5,gemv=0", "split-K 5", 5},
      {*matmul, "mainloop=ffma", "split-K", 0},  // (N = 50: not the GEMV loop's)
  };
  for (const Case& c : cases) {
    auto prog = generate_program(c.g, {"sm_90a", c.config});
    ASSERT_TRUE(prog.ok()) << c.config << ": " << prog.error().str();
    EXPECT_NE(prog->plan_text.find(c.plan), std::string::npos) << prog->plan_text;
    EXPECT_NE(prog->plan_text.find("split-K accumulators"), std::string::npos) << prog->plan_text;
    ASSERT_EQ(prog->launches.size(), 1u) << prog->plan_text;
    if (c.splits) EXPECT_EQ(prog->launches[0].grid[2], c.splits) << prog->plan_text;
    EXPECT_GT(prog->launches[0].grid[2], 1u) << prog->plan_text;
    for (const char* arch : {"sm_80", "sm_90a"}) {
      auto p = generate_program(c.g, {arch, c.config});
      ASSERT_TRUE(p.ok()) << p.error().str();
      auto cubin = compile_to_cubin(p->source, p->name, {arch, false, {"--ptxas-options=-v"}});
      ASSERT_TRUE(cubin.ok()) << arch << ": " << cubin.error().str();
      EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << arch << "\n" << cubin->log;
    }
  }
}

TEST(CodegenSimtSplitK, FusedTailsFullGridsAndConvsKeepWholeTiles) {
  // a row sum fused into the epilogue (a tile spans N = 64): whole tiles, no split
  auto fused = generate_program(linear_chain(32, 8192, 64, true), {"sm_90a", "mainloop=ffma"});
  ASSERT_TRUE(fused.ok()) << fused.error().str();
  EXPECT_EQ(fused->plan_text.find("split-K"), std::string::npos) << fused->plan_text;
  // a conv on the SIMT mainloop takes no split: a config error naming it
  GraphBuilder cb(Precision::FP32, "simt_split_k_conv");
  cb.output("y", cb.conv2d(cb.input("x", {1, 3, 8, 8}), cb.input("w", {4, 3, 3, 3})));
  auto conv = cb.build();
  ASSERT_TRUE(conv) << conv.error().str();
  auto refused = generate_program(*conv, {"sm_90a", "mainloop=ffma,split_k=2"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().str().find("split_k applies to linear and matmul"), std::string::npos)
      << refused.error().str();
  // enough tiles to fill the SMs: no split
  auto big = generate_program(linear_chain(2048, 4096, 2048), {"sm_90a", "mainloop=ffma"});
  ASSERT_TRUE(big.ok()) << big.error().str();
  EXPECT_EQ(big->plan_text.find("split-K"), std::string::npos) << big->plan_text;
}

}  // namespace
}  // namespace fusejit
