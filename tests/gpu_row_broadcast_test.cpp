// GPU: the chains of tests/row_broadcast_cases.h with their whole-row
// reduction broadcast back in the wgmma epilogue (over one tile by default,
// across clusters with row_cluster=1) match the fp64 reference (fresh seeded
// inputs, outputs poisoned first, each precision's tolerance), as do the same
// chains with the broadcast off (row_broadcast=0). Skipped without a
// CUDA device.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "tests/reference_check.h"
#include "tests/row_broadcast_cases.h"

namespace fusejit {
namespace {

TEST(GpuRowBroadcast, MatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const testing::RowBroadcastCase& c : testing::row_broadcast_cases()) {
    Expected<Graph> g = parse_spec(c.spec, c.name);
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    test_util::expect_matches_reference(engine, *g, c.config, c.name);
    test_util::expect_matches_reference(engine, *g, "row_broadcast=0", c.name + " (row_broadcast=0)");
    // across clusters of 64-row ping-pong tiles (an exchange per consumer), where the precision has ping-pong
    if (c.config == "row_cluster=1" && c.name.find("fp32") == std::string::npos)
      test_util::expect_matches_reference(engine, *g, "row_cluster=1,wgmma_schedule=pingpong,wgmma_tile=64x128x4",
                                          c.name + " (ping-pong)");
  }
}

}  // namespace
}  // namespace fusejit
