// The CPU backend on random chains whose pool or reduction the norm kernel
// does (tests/norm_tail_cases.h: group / instance / layer norm, any 2-D
// window, reductions over trailing dims, every precision mode) against the
// fp64 reference at each mode's tolerance, and each plan checked to take the
// tail into the norm kernel. Skipped without LLVM.
#include <gtest/gtest.h>

#include "compiler/cpu_program.h"
#include "fusejit/engine.h"
#include "runtime/kernel_check.h"
#include "tests/norm_tail_cases.h"

namespace fusejit {
namespace {

TEST(CpuNormTail, RandomChainsMatchReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  const auto cases = testing_norm::random_norm_tail_cases(48, 55);
  ASSERT_GE(cases.size(), 40u) << "too few random cases parsed";
  Engine engine;
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  for (const auto& c : cases) {
    auto kernel = engine.compile(*c.graph, opts);
    ASSERT_TRUE(kernel) << c.label << kernel.error().str();
    EXPECT_NE((*kernel)->program().plan_text.find("in this kernel: its last pass"), std::string::npos)
        << c.label << (*kernel)->program().plan_text;
    CheckOptions check;
    check.time = false;
    auto r = check_kernel(**kernel, *c.graph, check);
    ASSERT_TRUE(r) << c.label << r.error().str();
    EXPECT_TRUE(r->pass) << c.label << r->summary();
  }
}

}  // namespace
}  // namespace fusejit
