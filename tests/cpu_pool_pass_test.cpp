// The CPU backend on pool passes (tests/pool_pass_cases.h: pools of one value
// to one shape in one kernel, pass_fallback.cpp) against the fp64 reference at
// each mode's tolerance, with and without pool_pass=0, each plan checked for
// the pass. Skipped without LLVM.
#include <gtest/gtest.h>

#include "compiler/cpu_program.h"
#include "fusejit/engine.h"
#include "runtime/kernel_check.h"
#include "tests/pool_pass_cases.h"

namespace fusejit {
namespace {

TEST(CpuPoolPass, PoolsOfOneValueMatchReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  Engine engine;
  for (Precision p : {Precision::FP32, Precision::BF16})
    for (testing::PoolPassCase& c : testing::pool_pass_cases(p))
      for (const char* config : {"", "pool_pass=0"}) {
        const std::string label = c.label + " " + std::string(precision_name(p)) + " '" + config + "'";
        ASSERT_TRUE(c.graph) << label << ": " << c.graph.error().str();
        CompileOptions opts;
        opts.backend = Backend::Cpu;
        opts.config = config;
        auto kernel = engine.compile(*c.graph, opts);
        ASSERT_TRUE(kernel) << label << ": " << kernel.error().str();
        const bool joined = (*kernel)->program().plan_text.find("pools the same value in the same pass") != std::string::npos;
        EXPECT_EQ(joined, std::string(config).empty()) << label << "\n" << (*kernel)->program().plan_text;
        CheckOptions check;
        check.time = false;
        auto r = check_kernel(**kernel, *c.graph, check);
        ASSERT_TRUE(r) << label << ": " << r.error().str();
        EXPECT_TRUE(r->pass) << label << "\n" << r->summary();
      }
}

}  // namespace
}  // namespace fusejit
