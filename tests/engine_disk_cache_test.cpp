// The Engine's CUBIN path goes through the disk cache: a second Engine (as a
// second process would) gets the same CUBIN from disk without NVRTC.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

TEST(EngineDiskCache, SecondEngineHitsTheDisk) {
  char tmpl[] = "/tmp/fj-engine-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  setenv("FUSEJIT_CACHE_DIR", tmpl, 1);
  auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/seed2_small.yaml");
  ASSERT_TRUE(g) << g.error().str();

  Engine first;
  auto a = first.compile_cubin(*g, "sm_80");
  ASSERT_TRUE(a) << a.error().str();
  EXPECT_EQ(first.cache_stats().disk_stores, 1u);
  EXPECT_EQ(first.cache_stats().disk_hits, 0u);

  Engine second;
  auto b = second.compile_cubin(*g, "sm_80");
  ASSERT_TRUE(b) << b.error().str();
  EXPECT_EQ(second.cache_stats().disk_hits, 1u);
  EXPECT_EQ(second.cache_stats().disk_stores, 0u);
  EXPECT_EQ(a->cubin, b->cubin);
  EXPECT_NE(b->log.find("disk cache"), std::string::npos);

  // Another arch is another entry.
  auto c = second.compile_cubin(*g, "sm_90a");
  ASSERT_TRUE(c) << c.error().str();
  EXPECT_EQ(second.cache_stats().disk_stores, 1u);
  unsetenv("FUSEJIT_CACHE_DIR");
  std::system((std::string("rm -rf ") + tmpl).c_str());
}

}  // namespace
}  // namespace fusejit
