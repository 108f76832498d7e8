// GPU: softmax / log_softmax across a cluster of column tiles (row_cluster=1,
// tests/softmax_cluster_cases.h: bf16, f16, tf32, 3xTF32; ragged M and N; a
// case with several units a cluster) and the same chains' default plan (the
// row kernel) match the fp64 reference: fresh seeded inputs, outputs
// poisoned first, each precision's tolerance. (NaN / inf rows and a whole
// tile of -inf: GpuGemm.NanAndInfPropagate with row_cluster=1.) Skipped
// without a CUDA device.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "tests/reference_check.h"
#include "tests/softmax_cluster_cases.h"

namespace fusejit {
namespace {

TEST(GpuSoftmaxCluster, MatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const testing::SoftmaxClusterCase& c : testing::softmax_cluster_cases()) {
    Expected<Graph> g = parse_spec(c.spec, c.name);
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    test_util::expect_matches_reference(engine, *g, "row_cluster=1", c.name);
    test_util::expect_matches_reference(engine, *g, "", c.name + " (the row kernel)");
  }
}

// The same across clusters of 64-row ping-pong tiles (an exchange per consumer; the 16384-row case gives each
// consumer several units, so both consumers' slots and barriers alternate).
TEST(GpuSoftmaxCluster, PingPongMatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const testing::SoftmaxClusterCase& c : testing::softmax_cluster_cases()) {
    if (!c.pingpong_ok()) continue;
    Expected<Graph> g = parse_spec(c.spec, c.name);
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    test_util::expect_matches_reference(engine, *g, testing::kSoftmaxClusterPingPong, c.name);
  }
}

}  // namespace
}  // namespace fusejit
