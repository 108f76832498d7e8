// GPU: the norm chains of tests/norm_chains.h (group / instance / layer norm
// row kernels, batch_norm fused into the anchor epilogue; linear and conv2d;
// ragged sizes; every precision mode) against the fp64 reference at each
// mode's tolerance, with NaN-poisoned outputs (check_kernel), for the default
// plan and with the SIMT mainloop forced. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/norm_chains.h"

namespace fusejit {
namespace {

TEST(GpuNorm, ChainsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  const auto chains = testing_norm::norm_chains({Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16});
  // (norm_cache=0: every pass reads the row from memory; the default holds short rows in registers, copies long
  // ones to shared memory)
  for (const char* config : {"", "mainloop=ffma", "norm_cache=0"}) {
    for (const auto& c : chains) {
      ASSERT_TRUE(c.graph) << c.label << ": " << c.graph.error().str();
      CompileOptions opts;
      opts.config = config;
      auto kernel = engine.compile(*c.graph, opts);
      ASSERT_TRUE(kernel) << c.label << " [" << config << "]: " << kernel.error().str();
      CheckOptions check;
      check.time = false;
      auto r = check_kernel(**kernel, *c.graph, check);
      ASSERT_TRUE(r) << c.label << ": " << r.error().str();
      EXPECT_TRUE(r->pass) << c.label << " [" << config << "] (" << (*kernel)->name() << "):\n"
                           << r->summary() << print_graph(*c.graph);
    }
  }
}

}  // namespace
}  // namespace fusejit
