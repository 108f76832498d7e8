// CPU: a whole-row reduction broadcast back over the anchor's rows in the
// wgmma epilogue (pass_fuse_row_broadcast.cpp; by default over one tile,
// row_cluster=1 across a cluster of column tiles): one kernel,
// nothing of the anchor's output in scratch, the plan's note, the kernel
// compiled by NVRTC for sm_90a without spills; where the pass declines, the
// plan of today (a pointwise kernel over the stored output).
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/program_util.h"
#include "tests/row_broadcast_cases.h"

namespace fusejit {
namespace {

Program plan_of(const std::string& spec, const std::string& name, const std::string& config) {
  Expected<Graph> g = parse_spec(spec, name);
  EXPECT_TRUE(g) << name << ": " << g.error().str();
  if (!g) return {};
  Expected<Program> p = generate_program(*g, {"sm_90a", config});
  EXPECT_TRUE(p) << name << ": " << p.error().str();
  return p ? *p : Program{};
}

TEST(CodegenRowBroadcast, OneKernelAndNoStoredAnchorOutput) {
  for (const testing::RowBroadcastCase& c : testing::row_broadcast_cases()) {
    const Program p = plan_of(c.spec, c.name, c.config);
    EXPECT_EQ(testing::chain_launches(p), 1u) << c.name << "\n" << p.plan_text;
    EXPECT_TRUE(testing::chain_scratch(p).empty()) << c.name << "\n" << p.plan_text;
    const bool cluster = c.name.rfind("cluster_", 0) == 0;
    EXPECT_NE(p.plan_text.find(cluster ? "exchanged through distributed shared memory"
                                       : "broadcast back over the tile's rows in the epilogue"),
              std::string::npos)
        << c.name << "\n" << p.plan_text;
    if (cluster) {  // a cluster of blocks over N's column tiles, the whole grid in clusters
      const LaunchSpec& l = p.launches.back();
      EXPECT_GE(l.cluster, 2) << p.plan_text;
      EXPECT_LE(l.cluster, 8) << p.plan_text;
      EXPECT_EQ(l.grid[0] % static_cast<unsigned>(l.cluster), 0u) << p.plan_text;
      EXPECT_NE(p.source.find("fj::tile_row_broadcast_cluster<"), std::string::npos) << c.name;
      EXPECT_NE(p.source.find("__cluster_dims__(" + std::to_string(l.cluster) + ", 1, 1)"), std::string::npos);
    }
    EXPECT_NE(p.source.find(cluster ? "fj::tile_row_broadcast_cluster<" : "fj::tile_row_broadcast<"), std::string::npos)
        << c.name;
    EXPECT_NE(p.name.find("_broadcast_"), std::string::npos) << p.name;
    auto cubin = compile_to_cubin(p.source, p.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.name << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.name << "\n" << cubin->log;
    // Off: the consumers run in a pointwise or row-finish kernel over the stored output.
    const Program off = plan_of(c.spec, c.name, "row_broadcast=0");
    EXPECT_EQ(testing::chain_launches(off), 2u) << c.name << "\n" << off.plan_text;
    // The default: over one tile, not across clusters (row_cluster=1 opts in)
    EXPECT_EQ(testing::chain_launches(plan_of(c.spec, c.name, "")), cluster ? 2u : 1u) << c.name;
  }
}

// row_cluster=1 with wgmma_schedule=pingpong: 64-row ping-pong tiles across the cluster (an exchange per
// consumer), the Tile itself ping-pong, compiled without spills (3xTF32 has no ping-pong: the schedule is a
// config error there, before any cluster).
TEST(CodegenRowBroadcast, PingPongTilesAcrossClusters) {
  for (const testing::RowBroadcastCase& c : testing::row_broadcast_cases()) {
    if (c.name.rfind("cluster_", 0) != 0 || c.name.find("fp32") != std::string::npos) continue;
    const Program p = plan_of(c.spec, c.name, "row_cluster=1,wgmma_schedule=pingpong");
    EXPECT_EQ(testing::chain_launches(p), 1u) << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.plan_text.find("exchanged through distributed shared memory"), std::string::npos)
        << c.name << "\n" << p.plan_text;
    EXPECT_NE(p.source.find("/*kPingPong=*/true"), std::string::npos) << c.name;
    EXPECT_NE(p.plan_text.find("ping-pong"), std::string::npos) << c.name << "\n" << p.plan_text;
    auto cubin = compile_to_cubin(p.source, p.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.name << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.name << "\n" << cubin->log;
  }
}

TEST(CodegenRowBroadcast, DeclinesWhatItDoesNotCover) {
  const std::string max_sub = "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                              "  - {name: y, op: sub, args: [h, mx]}\n"
                              "outputs: [y]\n";
  // N wider than 8 tiles: partials and a row-finish kernel, as without the option, with the reason
  const Program wide = plan_of(testing::row_broadcast_head("rb_wide", "bf16", 128, 64, 4096) + max_sub, "rb_wide",
                               "row_cluster=1");
  EXPECT_NE(wide.plan_text.find("needs more than 8 column tiles"), std::string::npos) << wide.plan_text;
  EXPECT_EQ(testing::chain_launches(wide), 2u) << wide.plan_text;
  // a second row stage (mean(h - max(h))) would store h - max(h): declined, said (row_stages=0); by default the
  // reduction stays partial even though one tile spans N, and the row-finish kernel runs both stages
  const std::string staged_spec = testing::row_broadcast_head("rb_staged", "bf16", 128, 64, 128) +
                                  "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                                  "  - {name: d, op: sub, args: [h, mx]}\n"
                                  "  - {name: a, op: mean, args: [d], dims: [1], keepdim: true}\n"
                                  "  - {name: y, op: sub, args: [d, a]}\n"
                                  "outputs: [y]\n";
  const Program staged = plan_of(staged_spec, "rb_staged", "row_broadcast=1,row_stages=0");
  EXPECT_NE(staged.plan_text.find("(a second row stage)"), std::string::npos) << staged.plan_text;
  EXPECT_EQ(staged.source.find("tile_row_broadcast"), std::string::npos);
  const Program stages = plan_of(staged_spec, "rb_staged", "row_broadcast=1");
  EXPECT_NE(stages.plan_text.find("partly fused: a second row stage follows (mean %"), std::string::npos)
      << stages.plan_text;
  EXPECT_EQ(testing::chain_launches(stages), 2u) << stages.plan_text;
  EXPECT_EQ(stages.source.find("tile_row_broadcast"), std::string::npos);
  // sm_80 (mma.sync): not on this mainloop
  Expected<Graph> g = parse_spec(testing::row_broadcast_head("rb_mma", "bf16", 128, 64, 128) + max_sub, "rb_mma");
  ASSERT_TRUE(g) << g.error().str();
  Expected<Program> mma = generate_program(*g, {"sm_80", "row_broadcast=1"});
  ASSERT_TRUE(mma) << mma.error().str();
  EXPECT_EQ(mma->plan_text.find("broadcast back over the tile's rows"), std::string::npos) << mma->plan_text;
  // logsumexp: no broadcast form, said in the plan
  const Program lse = plan_of(testing::row_broadcast_head("rb_lse", "bf16", 128, 64, 128) +
                                  "  - {name: l, op: logsumexp, args: [h], dims: [1], keepdim: true}\n"
                                  "  - {name: y, op: sub, args: [h, l]}\n"
                                  "outputs: [y]\n",
                              "rb_lse", "row_broadcast=1");
  EXPECT_NE(lse.plan_text.find("only sum, mean, max and min"), std::string::npos) << lse.plan_text;
  // a bad value
  auto bad = generate_program(*g, {"sm_90a", "row_broadcast=2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("row_broadcast must be 0 or 1"), std::string::npos) << bad.error().message;
  auto bad_cluster = generate_program(*g, {"sm_90a", "row_cluster=on"});
  ASSERT_FALSE(bad_cluster.ok());
  EXPECT_NE(bad_cluster.error().message.find("row_cluster must be 0 or 1"), std::string::npos);
}

}  // namespace
}  // namespace fusejit
