// CPU: softmax / log_softmax along an N wider than one wgmma tile, finished
// across a cluster of column tiles with row_cluster=1 (pass_fuse_softmax.cpp,
// fj::tile_row_softmax_cluster): one kernel, no scratch, the plan's note, a
// launch in whole clusters, compiled by NVRTC for sm_90a without spills; the
// default keeps the row kernel; where no cluster spans N (or the epilogue has
// other row tails, or the mainloop is not wgmma) the row kernel stays, said.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/program_util.h"
#include "tests/softmax_cluster_cases.h"

namespace fusejit {
namespace {

Program plan_of(const std::string& text, const std::string& name, const std::string& arch,
                const std::string& config) {
  Expected<Graph> g = parse_spec(text, name);
  EXPECT_TRUE(g) << name << ": " << g.error().str();
  if (!g) return {};
  Expected<Program> p = generate_program(*g, {arch, config});
  EXPECT_TRUE(p) << name << ": " << p.error().str();
  return p ? *p : Program{};
}

// A configured 64-row ping-pong tile keeps ping-pong across the cluster (each consumer exchanges its own units).
TEST(CodegenSoftmaxCluster, PingPongTilesAcrossAClusterWhenConfigured) {
  for (const testing::SoftmaxClusterCase& c : testing::softmax_cluster_cases()) {
    if (!c.pingpong_ok()) continue;
    const Program p = plan_of(c.spec, c.name, "sm_90a", testing::kSoftmaxClusterPingPong);
    EXPECT_EQ(testing::chain_launches(p), 1u) << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.plan_text.find("64x256 ping-pong"), std::string::npos) << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.plan_text.find("fused across clusters of"), std::string::npos) << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.source.find("frag.consumer() * kEpilogueFloats"), std::string::npos) << c.name;
    // the Tile itself is ping-pong (a cooperative 64-row Tile under a ping-pong launch of 384 threads hung)
    EXPECT_NE(p.source.find("/*kPingPong=*/true"), std::string::npos) << c.name;
    EXPECT_NE(p.source.find("/*kClusterN=*/"), std::string::npos) << c.name;
    auto cubin = compile_to_cubin(p.source, p.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.name << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.name << "\n" << cubin->log;
  }
  // wgmma_schedule=pingpong alone: the pass picks the width and stages, on 64-row ping-pong tiles
  for (const testing::SoftmaxClusterCase& c : testing::softmax_cluster_cases()) {
    if (!c.pingpong_ok()) continue;
    const Program p = plan_of(c.spec, c.name, "sm_90a", "row_cluster=1,wgmma_schedule=pingpong");
    EXPECT_EQ(testing::chain_launches(p), 1u) << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.plan_text.find("ping-pong"), std::string::npos) << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.source.find("/*kPingPong=*/true"), std::string::npos) << c.name;
    auto cubin = compile_to_cubin(p.source, p.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.name << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.name << "\n" << cubin->log;
  }
  // Ping-pong tiles of 128 rows are refused (one exchange of 64 rows a consumer): the row kernel, said.
  const testing::SoftmaxClusterCase c = testing::softmax_cluster_cases()[0];
  const Program wide = plan_of(c.spec, c.name, "sm_90a", "row_cluster=1,wgmma_schedule=pingpong,wgmma_tile=128x128x4");
  EXPECT_EQ(testing::chain_launches(wide), 2u) << wide.plan_text;
  EXPECT_NE(wide.plan_text.find("ping-pong of more than 64 rows"), std::string::npos) << wide.plan_text;
}

TEST(CodegenSoftmaxCluster, OneKernelAcrossAClusterWithRowCluster) {
  for (const testing::SoftmaxClusterCase& c : testing::softmax_cluster_cases()) {
    const std::string& name = c.name;
    const std::string& text = c.spec;
    const Program p = plan_of(text, name, "sm_90a", "row_cluster=1");
    EXPECT_EQ(testing::chain_launches(p), 1u) << name << "\n" << p.plan_text;
    EXPECT_TRUE(testing::chain_scratch(p).empty()) << name << "\n" << p.plan_text;
    EXPECT_NE(p.plan_text.find("fused across clusters of"), std::string::npos) << name << "\n" << p.plan_text;
    const LaunchSpec& l = p.launches.back();
    EXPECT_GE(l.cluster, 2) << p.plan_text;
    EXPECT_LE(l.cluster, 8) << p.plan_text;
    EXPECT_EQ(l.grid[0] % static_cast<unsigned>(l.cluster), 0u) << p.plan_text;
    if (name.find("16384x") != std::string::npos)  // units for several rounds of every cluster that fits 132 SMs
      EXPECT_GE(l.grid[0], 2u * 132u) << p.plan_text;
    EXPECT_NE(p.source.find(std::string("fj::tile_row_softmax_cluster<") + (c.log ? "true" : "false")), std::string::npos)
        << name;
    EXPECT_NE(p.source.find("__cluster_dims__(" + std::to_string(l.cluster) + ", 1, 1)"), std::string::npos) << name;
    auto cubin = compile_to_cubin(p.source, p.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << name << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << name << "\n" << cubin->log;
    // The default: the row kernel over the stored output (row_cluster=1 opts in)
    const Program plain = plan_of(text, name, "sm_90a", "");
    EXPECT_EQ(testing::chain_launches(plain), 2u) << name << "\n" << plain.plan_text;
    EXPECT_EQ(plain.source.find("tile_row_softmax_cluster"), std::string::npos) << name;
  }
}

TEST(CodegenSoftmaxCluster, RowKernelWhereNoClusterApplies) {
  // N = 4096: 16 tiles of 256, more than a cluster holds
  const Program wide = plan_of(testing::softmax_cluster_spec("sc_wide", "bf16", 1024, 256, 4096, "softmax", false), "sc_wide", "sm_90a",
                               "row_cluster=1");
  EXPECT_EQ(testing::chain_launches(wide), 2u) << wide.plan_text;
  EXPECT_NE(wide.plan_text.find("N=4096 is wider than one tile and than a cluster's 8 tiles of 256 (row_cluster=1)"),
            std::string::npos)
      << wide.plan_text;
  EXPECT_EQ(wide.plan_text.find("ping-pong"), std::string::npos) << "the tile chosen as without the softmax\n"
                                                                   << wide.plan_text;
  EXPECT_EQ(wide.plan_text.find("partly fused"), std::string::npos) << wide.plan_text;
  // with softmax_parts=1 as well, the parts' plan stays where no cluster spans N
  const Program parts = plan_of(testing::softmax_cluster_spec("sc_parts", "bf16", 1024, 256, 4096, "softmax", false), "sc_parts", "sm_90a",
                                "row_cluster=1,softmax_parts=1");
  EXPECT_NE(parts.plan_text.find("partly fused"), std::string::npos) << parts.plan_text;
  EXPECT_NE(parts.plan_text.find("not finished across a cluster (row_cluster=1"), std::string::npos) << parts.plan_text;
  EXPECT_NE(parts.source.find("fj::softmax_finish_row<"), std::string::npos);
  // a second row tail (logsumexp of the same h; simplify=0, which otherwise makes the softmax exp(h - that
  // logsumexp): simplify_logsumexp.cpp): the softmax goes to the row kernel, said
  const std::string two = "name: sc_two\nprecision: bf16\ninputs:\n  - {name: x, shape: [512, 256], dtype: bf16}\n"
                          "  - {name: w, shape: [1000, 256], dtype: bf16}\nops:\n"
                          "  - {name: h, op: linear, args: [x, w]}\n  - {name: p, op: softmax, args: [h], dim: 1}\n"
                          "  - {name: l, op: logsumexp, args: [h], dims: [1]}\noutputs: [p, l]\n";
  const Program tails = plan_of(two, "sc_two", "sm_90a", "row_cluster=1,simplify=0");
  EXPECT_NE(tails.plan_text.find("other row tails"), std::string::npos) << tails.plan_text;
  EXPECT_EQ(tails.source.find("tile_row_softmax_cluster"), std::string::npos);
  // sm_80 (mma.sync): no clusters; the row kernel, as without the option
  const Program mma = plan_of(testing::softmax_cluster_spec("sc_mma", "bf16", 1024, 256, 1000, "softmax", false), "sc_mma", "sm_80",
                              "row_cluster=1");
  EXPECT_EQ(testing::chain_launches(mma), 2u) << mma.plan_text;
  EXPECT_EQ(mma.plan_text.find("clusters"), std::string::npos) << mma.plan_text;
}

}  // namespace
}  // namespace fusejit
