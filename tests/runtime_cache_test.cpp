// The in-memory kernel cache: one compile per key, even under contention.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <set>
#include <stdexcept>
#include <thread>

#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"

namespace fusejit {
namespace {

using IntCache = OnceCache<std::shared_ptr<int>>;

TEST(RuntimeCache, KeyCoversEveryField) {
  std::vector<std::string> opts = {"--gpu-architecture=sm_90a", "-lineinfo"};
  std::string base = kernel_cache_key("00ff", "", opts, "sm_90a", 0);
  EXPECT_EQ(base, kernel_cache_key("00ff", "", opts, "sm_90a", 0));
  std::set<std::string> keys = {
      base,
      kernel_cache_key("00fe", "", opts, "sm_90a", 0),
      kernel_cache_key("00ff", "tile=64", opts, "sm_90a", 0),
      kernel_cache_key("00ff", "", {"--gpu-architecture=sm_90a"}, "sm_90a", 0),
      kernel_cache_key("00ff", "", opts, "sm_80", 0),
      kernel_cache_key("00ff", "", opts, "sm_90a", 1),
  };
  EXPECT_EQ(keys.size(), 6u);
  // Field boundaries cannot be forged by moving characters between fields.
  EXPECT_NE(kernel_cache_key("ab", "c", {}, "x", 0), kernel_cache_key("a", "bc", {}, "x", 0));
  EXPECT_NE(kernel_cache_key("a", "", {"b", "c"}, "x", 0),
            kernel_cache_key("a", "", {"b\nnvrtc=1:c"}, "x", 0));
}

TEST(RuntimeCache, SameKeyReturnsTheSameValue) {
  IntCache cache;
  int builds = 0;
  auto build = [&]() -> Expected<std::shared_ptr<int>> { return std::make_shared<int>(++builds); };
  auto a = cache.get_or_build("k", build);
  auto b = cache.get_or_build("k", build);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(builds, 1);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.entries, 1u);
}

// Eight threads released together; each asks for key_of(thread).
template <class KeyOf>
std::vector<std::shared_ptr<int>> contend(IntCache& cache, std::atomic<int>& builds, KeyOf key_of) {
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::shared_ptr<int>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      auto r = cache.get_or_build(key_of(t), [&]() -> Expected<std::shared_ptr<int>> {
        int id = ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a slow compile
        return std::make_shared<int>(id);
      });
      if (r.ok()) results[t] = *r;
    });
  }
  for (auto& th : threads) th.join();
  return results;
}

TEST(RuntimeCache, EightThreadsOneKeyCompileOnce) {
  IntCache cache;
  std::atomic<int> builds{0};
  auto results = contend(cache, builds, [](int) { return std::string("one"); });
  EXPECT_EQ(builds.load(), 1);
  for (const auto& r : results) {
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r.get(), results[0].get());
  }
  CacheStats s = cache.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 7u);
  EXPECT_EQ(s.entries, 1u);
}

TEST(RuntimeCache, DifferentKeysCompileSeparately) {
  IntCache cache;
  std::atomic<int> builds{0};
  auto results = contend(cache, builds, [](int t) { return "key" + std::to_string(t % 4); });
  EXPECT_EQ(builds.load(), 4);
  std::set<int*> distinct;
  for (int t = 0; t < 8; ++t) {
    ASSERT_NE(results[t], nullptr);
    distinct.insert(results[t].get());
    EXPECT_EQ(results[t].get(), results[t % 4].get()) << t;  // same key, same value
  }
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_EQ(cache.stats().compiles, 4u);
  EXPECT_EQ(cache.stats().entries, 4u);
}

TEST(RuntimeCache, FailuresReachWaitersButAreNotKept) {
  IntCache cache;
  int calls = 0;
  auto failing = [&]() -> Expected<std::shared_ptr<int>> {
    ++calls;
    return Error("codegen failed");
  };
  auto a = cache.get_or_build("k", failing);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message, "codegen failed");
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().failures, 1u);
  auto b = cache.get_or_build("k", [&]() -> Expected<std::shared_ptr<int>> {
    ++calls;
    return std::make_shared<int>(7);
  });
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(**b, 7);
  EXPECT_EQ(calls, 2);
}

TEST(RuntimeCache, ExceptionsBecomeErrors) {
  IntCache cache;
  auto r = cache.get_or_build("k", []() -> Expected<std::shared_ptr<int>> {
    throw std::runtime_error("boom");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("boom"), std::string::npos);
}

TEST(RuntimeCache, ClearDropsEntries) {
  IntCache cache;
  int builds = 0;
  auto build = [&]() -> Expected<std::shared_ptr<int>> { return std::make_shared<int>(++builds); };
  auto a = cache.get_or_build("k", build);
  cache.clear();
  auto b = cache.get_or_build("k", build);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(**a, 1);  // handed-out values stay valid
  EXPECT_EQ(builds, 2);
}

TEST(RuntimeCache, RealNvrtcCompileRunsOncePerKey) {
  OnceCache<std::shared_ptr<CubinResult>> cache;
  std::atomic<int> compiles{0};
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::vector<const CubinResult*> got(kThreads, nullptr);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      NvrtcOptions opts;
      opts.arch = t < 4 ? "sm_80" : "sm_90a";
      std::string key = kernel_cache_key("test", "", nvrtc_option_list(opts), opts.arch, 0);
      start.arrive_and_wait();
      auto r = cache.get_or_build(key, [&]() -> Expected<std::shared_ptr<CubinResult>> {
        ++compiles;
        auto c = compile_to_cubin("extern \"C\" __global__ void fj_test_k(float* x) { x[0] = 1; }",
                                  "fj_test_cache", opts);
        if (!c) return c.error();
        return std::make_shared<CubinResult>(c.take());
      });
      if (r.ok()) got[t] = r->get();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(compiles.load(), 2);  // one per arch
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_NE(got[t], nullptr) << t;
    EXPECT_EQ(got[t], got[t < 4 ? 0 : 4]) << t;
  }
  EXPECT_NE(got[0], got[4]);
}

}  // namespace
}  // namespace fusejit
