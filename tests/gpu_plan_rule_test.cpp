// GPU: the planner cases of the fusion rule (tests/plan_rule_cases.h) and the
// row-finish examples run on the device and match the fp64 reference, with
// the default plan (one finish kernel for every partial row reduction), with
// reductions unfused, with the broadcast back over the rows off, and across
// clusters (row_cluster=1).
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "tests/plan_rule_cases.h"
#include "tests/reference_check.h"

namespace fusejit {
namespace {

void check_case(const std::string& name, const Graph& g, const std::string& config) {
  Engine engine;
  test_util::expect_matches_reference(engine, g, config, name);
}

void run_cases(const std::string& config) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  for (const testing::PlanRuleCase& c : testing::plan_rule_cases()) {
    Expected<Graph> g = parse_spec(c.spec, c.name);
    ASSERT_TRUE(g) << c.name << ": " << g.error().str();
    check_case(c.name, *g, config);
  }
  for (const char* ex : {"linear_row_stats", "linear_rmsnorm", "linear_max_subtract_gelu", "matmul_log_softmax_f16"}) {
    Expected<Graph> g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + ex + ".yaml");
    ASSERT_TRUE(g) << ex << ": " << g.error().str();
    check_case(ex, *g, config);
  }
}

TEST(GpuPlanRule, DefaultPlanMatchesReference) { run_cases(""); }

TEST(GpuPlanRule, UnfusedReductionsMatchReference) { run_cases("fuse_reductions=0"); }

// The broadcast back over the rows: off, and across clusters of column tiles (opt-in; linear_rmsnorm).
TEST(GpuPlanRule, RowBroadcastOffMatchesReference) { run_cases("row_broadcast=0"); }

TEST(GpuPlanRule, RowClusterMatchesReference) { run_cases("row_cluster=1"); }

// Pointwise and row-finish kernels one element a thread (no lanes), the row-finish kernels' wide rows included.
TEST(GpuPlanRule, ElementLoopsMatchReference) { run_cases("pointwise_lanes=0,row_broadcast=0"); }

}  // namespace
}  // namespace fusejit
