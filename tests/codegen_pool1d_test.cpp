// CPU (no GPU): a max / avg pool1d along a linear's or matmul's N fused into
// the anchor epilogue on every mainloop (FFMA, mma.sync, wgmma): one kernel,
// nothing anchor-sized stored, and every variant compiles for sm_80 and
// sm_90a. Windows that do not divide 16, overlapping windows and fuse_pool=0
// stay a pool kernel of their own, with a note. GPU: gpu_pool1d_test.cpp.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "tests/compile_jobs.h"
#include "tests/pool1d_cases.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::CompileJob;

TEST(CodegenPool1d, FusedIntoEveryMainloop) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::Pool1dCase& c : testing::pool1d_cases())
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "mainloop=wgmma"}) {
          const bool wgmma = std::string(config) == "mainloop=wgmma";
          // wgmma: sm_90a, linear rows TMA can read (16-byte multiples)
          if (wgmma && (std::string(arch) != "sm_90a" || c.matmul || c.x.back() * (p == Precision::BF16 || p == Precision::F16 ? 2 : 4) % 16))
            continue;
          if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;  // FFMA is the fp32 mode's
          const std::string label = c.label + " " + std::string(precision_name(p)) + " " + arch + " '" + config + "'";
          auto g = testing::pool1d_chain(p, c);
          ASSERT_TRUE(g) << label << ": " << g.error().str();
          auto prog = generate_program(*g, {arch, config});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          EXPECT_EQ(testing::chain_launches(*prog), 1u) << label << "\n" << prog->plan_text;
          EXPECT_NE(prog->plan_text.find("fused into the epilogue: tiles hold whole windows of " + std::to_string(c.k)),
                    std::string::npos)
              << label << "\n" << prog->plan_text;
          for (const ScratchSpec& s : testing::chain_scratch(*prog))  // split-K's slabs only, never the unpooled output
            EXPECT_NE(s.what.find("split-K"), std::string::npos) << label << ": " << s.what;
          EXPECT_NE(prog->name.find(std::string(c.is_max ? "maxpool1d" : "avgpool1d") + std::to_string(c.k)),
                    std::string::npos)
              << label << ": " << prog->name;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenPool1d, UnfusedWindowsSayWhy) {
  struct Case {
    int64_t k, stride;
    std::string config, why;
  };
  const Case cases[] = {{3, 3, "", "a window of 3 columns does not divide the epilogue's 16-column chunks"},
                        {4, 2, "", "its windows overlap, leave gaps or are padded"},
                        {4, 4, "fuse_pool=0", "disabled by the codegen config (fuse_pool=0)"}};
  for (const Case& c : cases) {
    GraphBuilder g(Precision::FP32, "pool1d_unfused");
    auto x = g.input("x", {16, 32});
    Pool1dOptions po;
    po.kernel = c.k;
    po.stride = c.stride;
    g.output("y", g.linear(x, g.input("w", {48, 32})).relu().max_pool1d(po));
    auto graph = g.build();
    ASSERT_TRUE(graph) << graph.error().str();
    auto prog = generate_program(*graph, {"sm_90a", c.config});
    ASSERT_TRUE(prog.ok()) << prog.error().str();
    EXPECT_EQ(testing::chain_launches(*prog), 2u) << prog->plan_text;
    EXPECT_NE(prog->plan_text.find("not fused: " + c.why), std::string::npos) << prog->plan_text;
  }
}

}  // namespace
}  // namespace fusejit
