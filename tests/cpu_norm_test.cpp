// The CPU backend (Engine, Backend::Cpu) on the norm chains of
// tests/norm_chains.h — group / instance / layer norm row kernels and
// batch_norm lowered into the anchor epilogue, after linear and conv2d, ragged
// sizes, every precision mode — against the fp64 reference at each mode's
// tolerance (check_kernel, NaN-poisoned outputs). Skipped without LLVM.
#include <gtest/gtest.h>

#include "compiler/cpu_program.h"
#include "fusejit/engine.h"
#include "runtime/kernel_check.h"
#include "tests/norm_chains.h"

namespace fusejit {
namespace {

TEST(CpuNorm, ChainsMatchReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  Engine engine;
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  const auto chains = testing_norm::norm_chains({Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16});
  for (const auto& c : chains) {
    ASSERT_TRUE(c.graph) << c.label << ": " << c.graph.error().str();
    auto kernel = engine.compile(*c.graph, opts);
    ASSERT_TRUE(kernel) << c.label << ": " << kernel.error().str();
    CheckOptions check;
    check.time = false;
    auto r = check_kernel(**kernel, *c.graph, check);
    ASSERT_TRUE(r) << c.label << ": " << r.error().str();
    EXPECT_TRUE(r->pass) << c.label << " (" << (*kernel)->name() << "):\n" << r->summary() << print_graph(*c.graph);
  }
}

}  // namespace
}  // namespace fusejit
