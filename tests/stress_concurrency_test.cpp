// Concurrency stress (run under TSan by scripts/ci_hardening.sh): 16 threads
// compile chains through one Engine (memory cache + a fresh disk cache) and
// the tuner compiles candidates in parallel. Without a GPU compile() fails
// cleanly after codegen; compile_cubin(), emit() and the caches still work.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "compiler/program.h"
#include "compiler/tuning_space.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/tuner_core.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

constexpr int kThreads = 16;

Graph chain(int variant) {
  GraphBuilder g;
  auto x = g.input("x", {32, 64});
  auto y = g.linear(x, g.input("w", {16 + 16 * variant, 64}));
  g.output("y", variant % 2 ? y.relu() : y.tanh());
  return g.build().take();
}

// Points FUSEJIT_CACHE_DIR at a scratch directory for one test.
struct CacheDirEnv {
  testing::ScratchDir dir;
  CacheDirEnv() { ::setenv("FUSEJIT_CACHE_DIR", dir.path().c_str(), 1); }
  ~CacheDirEnv() { ::unsetenv("FUSEJIT_CACHE_DIR"); }
};

TEST(Stress, SixteenThreadsCompileThroughOneEngine) {
  CacheDirEnv env;
  testing::WarningCapture warnings;
  Engine engine;
  constexpr int kVariants = 4;
  std::mutex mu;
  std::map<int, std::vector<char>> cubins;  // variant -> first CUBIN seen
  std::vector<std::string> failures;
  auto fail = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(std::move(what));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round) {
        int v = (t + round) % kVariants;
        Graph g = chain(v);
        auto program = engine.emit(g, CompileOptions{.arch = "sm_90a"});
        if (!program) return fail("emit: " + program.error().str());
        auto cubin = engine.compile_cubin(g, "sm_90a");
        if (!cubin) return fail("compile_cubin: " + cubin.error().str());
        {
          std::lock_guard<std::mutex> lock(mu);
          auto [it, fresh] = cubins.emplace(v, cubin->cubin);
          if (!fresh && it->second != cubin->cubin) failures.push_back("different CUBINs for one graph");
        }
        auto k = engine.compile(g);  // loads on a device: an Error without one
        if (gpu_available() && !k) return fail("compile: " + k.error().str());
        (void)engine.cache_stats();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(failures.empty()) << (failures.empty() ? "" : failures.front());
  EXPECT_EQ(cubins.size(), size_t(kVariants));
  EXPECT_GE(engine.cache_stats().disk_stores + engine.cache_stats().disk_hits, 1u);
}

TEST(Stress, OnceCacheBuildsEachKeyOnce) {
  OnceCache<int> cache;
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string key = std::to_string((t + i) % 8);
        auto v = cache.get_or_build(key, [&]() -> Expected<int> {
          ++builds;
          return std::stoi(key);
        });
        ASSERT_TRUE(v);
        EXPECT_EQ(*v, std::stoi(key));
        if (i % 50 == 0) (void)cache.stats();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(builds.load(), 8);
}

// The tuner's parallel compile path with a runner that really compiles
// (compile_cubin through a shared Engine); measurements are faked.
struct CubinRunner : CandidateRunner {
  Engine& engine;
  const Graph& g;
  std::mutex mu;
  std::map<std::string, size_t> sizes;
  CubinRunner(Engine& e, const Graph& graph) : engine(e), g(graph) {}
  Status compile(const std::string& config) override {
    CompileOptions o;
    o.config = config;
    auto c = engine.compile_cubin(g, "sm_90a", o);
    if (!c) return c.error();
    std::lock_guard<std::mutex> lock(mu);
    sizes[config] = c->cubin.size();
    return Status::success();
  }
  Expected<Measurement> measure(const std::string& config) override {
    Measurement m;
    m.correct = true;
    m.median_ms = m.min_ms = m.max_ms = 1.0 + static_cast<double>(config.size()) * 1e-3;
    return m;
  }
};

TEST(Stress, TunerCompilesCandidatesInParallel) {
  CacheDirEnv env;
  testing::WarningCapture warnings;
  Engine engine;
  Graph g = chain(3);
  auto configs = tuning_candidates(g);
  ASSERT_GE(configs.size(), 2u);
  if (configs.size() > 8) configs.resize(8);
  CubinRunner runner(engine, g);
  TuneOptions o;
  o.compile_threads = kThreads;
  o.save = false;
  TuneReport rep = run_tuner(configs, runner, o);
  ASSERT_NE(rep.best(), nullptr);
  EXPECT_EQ(runner.sizes.size(), configs.size());
  for (const auto& c : rep.candidates) EXPECT_EQ(c.state, CandidateResult::State::Ok) << c.config << ": " << c.detail;
}

}  // namespace
}  // namespace fusejit
