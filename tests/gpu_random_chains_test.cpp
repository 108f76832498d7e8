// GPU: the random chains of tests/random_chains.h (the same 200 that CI
// compiles for sm_80 and sm_90a) run on the device and match the fp64
// reference, with the default plan and with fusion off and a small tile (so
// the fallback kernels and edge tiles run too). Outputs are NaN-poisoned.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/random_chains.h"

namespace fusejit {
namespace {

void run_chains(const std::string& config, int count, uint64_t first_seed) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CompileOptions opts;
  opts.config = config;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  int failures = 0;
  for (int i = 0; i < count; ++i) {
    uint64_t seed = first_seed + static_cast<uint64_t>(i);
    auto g = testing::random_chain(seed);
    ASSERT_TRUE(g) << "chain " << seed << ": " << g.error().str();
    auto kernel = engine.compile(*g, opts);
    if (!kernel) {
      ADD_FAILURE() << "chain " << seed << " does not compile: " << kernel.error().str();
      ++failures;
      continue;
    }
    check.seed = seed;
    auto r = check_kernel(**kernel, *g, check);
    if (!r || !r->pass) {
      ADD_FAILURE() << "chain " << seed << " (" << (*kernel)->name() << ", config '" << config << "'):\n"
                    << (r ? r->summary() : r.error().str()) << print_graph(*g);
      ++failures;
    }
    if (failures >= 5) break;  // enough to debug; keep the log readable
  }
}

TEST(GpuRandomChains, DefaultPlanMatchesReference) { run_chains("", 200, 1); }

TEST(GpuRandomChains, UnfusedSmallTileMatchesReference) {
  run_chains("tile=32x32x4x4 fuse_pool=0 fuse_reductions=0", 100, 1);
}

}  // namespace
}  // namespace fusejit
