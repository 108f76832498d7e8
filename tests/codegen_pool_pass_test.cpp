// CPU (no GPU): pools of one value to one shape share one kernel (a pool
// pass, pass_fallback.cpp): the kernel count with and without it
// (pool_pass=0), the pools the pass's kernel computes and its note, pools of
// another shape or value kept apart; every variant compiles for sm_80 and
// sm_90a. GPU: gpu_pool1d_test.cpp (PoolPassMatchesReference).
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "tests/compile_jobs.h"
#include "tests/pool_pass_cases.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::CompileJob;

// The most pools one pool kernel computes (its name: fj_maxpool1d4_avgpool1d3 ...).
size_t most_pools_a_kernel(const Program& p) {
  size_t most = 0;
  for (const LaunchSpec& l : p.launches) {
    if (l.kernel.rfind("fj_maxpool", 0) != 0 && l.kernel.rfind("fj_avgpool", 0) != 0) continue;
    size_t pools = 0;
    for (size_t at = l.kernel.find("pool"); at != std::string::npos; at = l.kernel.find("pool", at + 1)) ++pools;
    most = std::max(most, pools);
  }
  return most;
}

TEST(CodegenPoolPass, OneKernelReadsTheValueForEveryPool) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::FP32, Precision::BF16})
    for (testing::PoolPassCase& c : testing::pool_pass_cases(p))
      for (const char* arch : {"sm_80", "sm_90a"}) {
        const std::string label = c.label + " " + std::string(precision_name(p)) + " " + arch;
        ASSERT_TRUE(c.graph) << label << ": " << c.graph.error().str();
        auto prog = generate_program(*c.graph, {arch, ""});
        ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
        EXPECT_EQ(testing::chain_launches(*prog), c.kernels) << label << "\n" << prog->plan_text;
        EXPECT_EQ(most_pools_a_kernel(*prog), c.pooled) << label << "\n" << prog->plan_text;
        EXPECT_NE(prog->plan_text.find("pools the same value in the same pass"), std::string::npos)
            << label << "\n" << prog->plan_text;
        jobs.push_back({label, arch, prog->name, prog->source});

        auto off = generate_program(*c.graph, {arch, "pool_pass=0"});
        ASSERT_TRUE(off.ok()) << label << ": " << off.error().str();
        EXPECT_EQ(testing::chain_launches(*off), c.kernels_off) << label << " pool_pass=0\n" << off->plan_text;
        EXPECT_EQ(most_pools_a_kernel(*off), 1u) << label << " pool_pass=0\n" << off->plan_text;
      }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenPoolPass, ConfigKeyChecked) {
  GraphBuilder g(Precision::FP32, "pool_pass_config");
  g.output("y", g.input("x", {1, 2, 8, 8}).max_pool2d({}));
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  auto prog = generate_program(*graph, {"sm_90a", "pool_pass=2"});
  ASSERT_FALSE(prog.ok());
  EXPECT_NE(prog.error().str().find("pool_pass must be 0 or 1"), std::string::npos) << prog.error().str();
}

}  // namespace
}  // namespace fusejit
