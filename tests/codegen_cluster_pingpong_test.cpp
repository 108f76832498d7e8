// CPU: 2-block clusters sharing B (wgmma_cluster=2) under the ping-pong
// schedule: the blocks of a cluster run the same units in the same order, so
// consumer c of each block reads a stage and both release it. The kernels
// compile with NVRTC for sm_90a without spills; conv2d keeps clusters
// cooperative (codegen_conv_wgmma_test.cpp).
#include <gtest/gtest.h>

#include "runtime/nvrtc_compiler.h"
#include "tests/wgmma_chains.h"

namespace fusejit {
namespace {

using test_util::generate;
using test_util::linear_chain;
using test_util::matmul_chain;

TEST(CodegenClusterPingPong, PlansAndCompilesWithoutSpills) {
  struct Case {
    Graph g;
    const char* config;
    const char* tile;  // in the plan
  };
  const Case cases[] = {
      {linear_chain(Precision::BF16, 16384, 2048, 2048, "", DType::BF16),
       "wgmma_cluster=2,wgmma_schedule=pingpong", "tile 64x256 ping-pong"},
      {linear_chain(Precision::F16, 4096, 4096, 4096, "", DType::F16),
       "wgmma_cluster=2,wgmma_schedule=pingpong,wgmma_tile=128x128x5x16", "tile 128x128 ping-pong"},
      {linear_chain(Precision::TF32, 1000, 520, 392), "wgmma_cluster=2,wgmma_schedule=pingpong,wgmma_tile=64x128x4",
       "tile 64x128 ping-pong"},
      {linear_chain(Precision::BF16, 333, 256, 1000, "sum", DType::BF16),  // per-tile row partials
       "wgmma_cluster=2,wgmma_schedule=pingpong,wgmma_tile=64x256x4", "tile 64x256 ping-pong"},
      {matmul_chain(Precision::BF16, 2, 300, 200, 384), "wgmma_cluster=2,wgmma_schedule=pingpong,wgmma_tile=128x128x4",
       "tile 128x128 ping-pong"},
  };
  for (const Case& c : cases) {
    const Program prog = generate(c.g, "sm_90a", c.config);
    ASSERT_FALSE(prog.source.empty()) << c.config;
    EXPECT_NE(prog.plan_text.find(c.tile), std::string::npos) << c.config << "\n" << prog.plan_text;
    EXPECT_NE(prog.plan_text.find("2-block clusters sharing B"), std::string::npos) << prog.plan_text;
    EXPECT_NE(prog.source.find("/*kPingPong=*/true, /*kClusterM=*/2"), std::string::npos) << c.config;
    EXPECT_NE(prog.source.find("__cluster_dims__(2, 1, 1)"), std::string::npos) << c.config;
    ASSERT_FALSE(prog.launches.empty());
    EXPECT_EQ(prog.launches.at(0).cluster, 2) << c.config;
    EXPECT_EQ(prog.launches.at(0).grid[0] % 2, 0u) << c.config;
    auto cubin = compile_to_cubin(prog.source, prog.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.config << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.config << "\n" << cubin->log;
  }
}

TEST(CodegenClusterPingPong, StillRefusesSplitKAnd3xTf32) {
  auto error_of = [](const Graph& graph, const std::string& config) {
    auto r = generate_program(graph, {"sm_90a", config});
    return r.ok() ? std::string("(no error)") : r.error().message;
  };
  const Graph g = linear_chain(Precision::BF16, 4096, 4096, 4096, "", DType::BF16);
  EXPECT_NE(error_of(g, "wgmma_cluster=2,wgmma_schedule=pingpong,split_k=2").find("without split-K"),
            std::string::npos);
  EXPECT_NE(error_of(linear_chain(Precision::FP32, 4096, 4096, 4096), "wgmma_cluster=2,wgmma_schedule=pingpong")
                .find("3xTF32"),
            std::string::npos);
}

}  // namespace
}  // namespace fusejit
