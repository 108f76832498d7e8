// GPU: tune the three seed specs; the winner is correct and never slower than
// the default config measured in the same run.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fusejit/autotune.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"

namespace fusejit {
namespace {

class GpuAutotune : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuAutotune, SeedWinnerIsCorrectAndNotSlowerThanDefault) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  std::string dir = ::testing::TempDir() + "fj-tune-cache";
  setenv("FUSEJIT_CACHE_DIR", dir.c_str(), 1);
  auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + GetParam() + ".yaml");
  ASSERT_TRUE(g) << g.error().str();
  Engine engine;
  TuneOptions t;
  t.budget_s = 150;
  auto rep = autotune(engine, *g, {}, t);
  ASSERT_TRUE(rep) << rep.error().str();
  std::printf("%s\n%s", GetParam(), rep->table().c_str());
  const CandidateResult* best = rep->best();
  ASSERT_NE(best, nullptr);
  ASSERT_EQ(rep->candidates[0].state, CandidateResult::State::Ok) << "the default config must be correct";
  EXPECT_LE(best->median_ms, rep->candidates[0].median_ms);
  EXPECT_TRUE(rep->saved);

  // A use_db compile picks the winner; re-time winner and default side by side.
  auto stored = stored_tuning(*g);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ(**stored, best->config);
  auto tuned = engine.compile(*g, {.autotune = AutotuneMode::UseDb});
  auto plain = engine.compile(*g, {});
  ASSERT_TRUE(tuned && plain);
  CheckOptions c;
  c.iters = 30;
  c.samples = 20000;
  auto rt = check_kernel(**tuned, *g, c);
  auto rd = check_kernel(**plain, *g, c);
  ASSERT_TRUE(rt && rd);
  EXPECT_TRUE(rt->pass) << rt->summary();
  std::printf("re-timed: tuned %.4f ms, default %.4f ms\n", rt->timing.median_ms, rd->timing.median_ms);
  EXPECT_LE(rt->timing.median_ms, rd->timing.median_ms * 1.05) << "winner slower than default beyond 5% noise";
}

INSTANTIATE_TEST_SUITE_P(Seeds, GpuAutotune,
                         ::testing::Values("seed1_conv_relu_bias", "seed2_linear_bias_relu",
                                           "seed3_conv_tanh_scale_bias_maxpool"));

}  // namespace
}  // namespace fusejit
