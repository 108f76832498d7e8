// CPU: a group / layer norm done in the wgmma epilogue (pass_fuse_norm_epilogue.cpp,
// on by default): one kernel, nothing in scratch, the plan's note; compiled by
// NVRTC for sm_90a without spills; where it cannot (groups not dividing any
// tile, not a multiple of 8 columns, sm_80) or with norm_epilogue=0, the norm
// kernel over the stored output, with the reason.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/norm_chains.h"
#include "tests/norm_epilogue_cases.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

TEST(CodegenNormEpilogue, OneKernelOnWgmma) {
  const auto cases = testing_norm::norm_epilogue_cases({Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16});
  for (const auto& c : cases) {
    ASSERT_TRUE(c.graph) << c.label << ": " << c.graph.error().str();
    for (const char* config : {"", "wgmma_schedule=pingpong"}) {
      if (std::string(config).find("pingpong") != std::string::npos && c.graph->precision == Precision::FP32) continue;
      auto p = generate_program(*c.graph, {"sm_90a", config});
      ASSERT_TRUE(p) << c.label << ": " << p.error().str();
      EXPECT_EQ(testing::chain_launches(*p), 1u) << c.label << " [" << config << "]\n" << p->plan_text;
      EXPECT_TRUE(testing::chain_scratch(*p).empty()) << c.label << "\n" << p->plan_text;
      EXPECT_NE(p->plan_text.find("done in the epilogue"), std::string::npos) << c.label << "\n" << p->plan_text;
      EXPECT_NE(p->source.find("fj::tile_segment_norm<"), std::string::npos) << c.label;
      auto cubin = compile_to_cubin(p->source, p->name, {"sm_90a", false, {"--ptxas-options=-v"}});
      ASSERT_TRUE(cubin.ok()) << c.label << " [" << config << "]: " << cubin.error().str();
      EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << c.label << "\n" << cubin->log;
    }
    // norm_epilogue=0: the norm kernel over the stored output.
    auto d = generate_program(*c.graph, {"sm_90a", "norm_epilogue=0"});
    ASSERT_TRUE(d) << d.error().str();
    EXPECT_EQ(testing::chain_launches(*d), 2u) << c.label << "\n" << d->plan_text;
    // sm_80 (mma.sync): not taken.
    auto a = generate_program(*c.graph, {"sm_80", ""});
    ASSERT_TRUE(a) << a.error().str();
    EXPECT_EQ(testing::chain_launches(*a), 2u) << c.label << "\n" << a->plan_text;
  }
}

// A tile narrower than a group is widened to a multiple of it (the config fixing none); a fixed tile is kept.
TEST(CodegenNormEpilogue, WidensTheTileForItsGroups) {
  auto g = testing_norm::norm_epilogue_chain(Precision::FP32, 1);  // 130 x 384, groups of 128; 3xTF32: at most 128
  ASSERT_TRUE(g) << g.error().str();
  auto p = generate_program(*g, {"sm_90a", ""});
  ASSERT_TRUE(p) << p.error().str();
  EXPECT_NE(p->plan_text.find("-> 64x128, "), std::string::npos) << p->plan_text;
  EXPECT_NE(p->plan_text.find("for group_norm %5's groups of 128 columns"), std::string::npos) << p->plan_text;
  auto fixed = generate_program(*g, {"sm_90a", "wgmma_tile=64x64x4"});
  ASSERT_TRUE(fixed) << fixed.error().str();
  EXPECT_EQ(testing::chain_launches(*fixed), 2u) << fixed->plan_text;
  EXPECT_NE(fixed->plan_text.find("do not divide the 64-column tile (set by the config)"), std::string::npos)
      << fixed->plan_text;
}

TEST(CodegenNormEpilogue, SaysWhyNot) {
  // groups of 100 columns (tests/norm_chains.h's linear layer_norm): not a multiple of 8
  auto ln = testing_norm::linear_chain(Precision::BF16, "layer_norm_relu");
  ASSERT_TRUE(ln);
  auto p = generate_program(*ln, {"sm_90a", ""});
  ASSERT_TRUE(p) << p.error().str();
  EXPECT_EQ(testing::chain_launches(*p), 2u) << p->plan_text;
  EXPECT_NE(p->plan_text.find("not done in the epilogue: groups of 100 columns: not a multiple of 8"),
            std::string::npos)
      << p->plan_text;
  // groups wider than the tile: 2 groups of 512 over 1024 columns
  GraphBuilder g(Precision::BF16, "wide_groups");
  auto x = g.input("x", {64, 32}, DType::BF16);
  g.output("y", g.linear(x, g.input("w", {1024, 32}, DType::BF16)).group_norm(2));
  auto wide = g.build();
  ASSERT_TRUE(wide) << wide.error().str();
  auto q = generate_program(*wide, {"sm_90a", ""});
  ASSERT_TRUE(q) << q.error().str();
  EXPECT_EQ(testing::chain_launches(*q), 2u) << q->plan_text;
  EXPECT_NE(q->plan_text.find("groups of 512 columns do not divide the"), std::string::npos) << q->plan_text;
  // a residual of the norm's input: the norm kernel reads it once (the epilogue would store it and the norm)
  GraphBuilder r(Precision::BF16, "residual");
  auto h = r.linear(r.input("x", {256, 64}, DType::BF16), r.input("w", {256, 64}, DType::BF16));
  r.output("z", (h.group_norm(4) + h).silu());
  auto res = r.build();
  ASSERT_TRUE(res) << res.error().str();
  auto t = generate_program(*res, {"sm_90a", ""});
  ASSERT_TRUE(t) << t.error().str();
  EXPECT_EQ(testing::chain_launches(*t), 2u) << t->plan_text;
  EXPECT_EQ(testing::chain_scratch(*t).size(), 1u) << t->plan_text;
  EXPECT_NE(t->plan_text.find("is read after the norm too (add"), std::string::npos) << t->plan_text;
}

}  // namespace
}  // namespace fusejit
