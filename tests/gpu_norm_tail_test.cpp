// GPU: random chains whose pool or reduction the norm kernel does
// (tests/norm_tail_cases.h: group / instance / layer norm, any 2-D window,
// reductions over trailing dims, every precision mode)
// against the fp64 reference at each mode's tolerance (check_kernel,
// NaN-poisoned outputs), with the norm's rows copied to shared memory (the
// default) and read from memory (norm_cache=0), and with the tail a kernel of
// its own (norm_tail=0). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/norm_tail_cases.h"

namespace fusejit {
namespace {

TEST(GpuNormTail, RandomChainsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  const auto cases = testing_norm::random_norm_tail_cases(24, 55);
  ASSERT_GE(cases.size(), 16u) << "too few random cases parsed";
  Engine engine;
  for (const char* config : {"", "norm_cache=0", "norm_tail=0"}) {
    for (const auto& c : cases) {
      CompileOptions opts;
      opts.config = config;
      auto kernel = engine.compile(*c.graph, opts);
      ASSERT_TRUE(kernel) << c.label << " [" << config << "]: " << kernel.error().str();
      CheckOptions check;
      check.time = false;
      auto r = check_kernel(**kernel, *c.graph, check);
      ASSERT_TRUE(r) << c.label << r.error().str();
      EXPECT_TRUE(r->pass) << c.label << " [" << config << "] (" << (*kernel)->name() << "):\n" << r->summary();
    }
  }
}

}  // namespace
}  // namespace fusejit
