// Measures what the disk cache saves: a cold NVRTC compile of a small
// generated program vs a warm disk hit vs an in-memory hit. Prints the figures
// (docs/cache.md quotes them) and checks their order.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/disk_cache.h"
#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Runs `f` `n` times; returns the fastest run in milliseconds.
template <class F>
double best_of(int n, F f) {
  double best = 1e300;
  for (int i = 0; i < n; ++i) {
    auto start = Clock::now();
    f();
    best = std::min(best, ms_since(start));
  }
  return best;
}

TEST(DiskCacheTiming, ColdCompileVsDiskHitVsMemoryHit) {
  GraphBuilder b(Precision::FP32, "timing_linear_bias_relu");
  auto x = b.input("x", {64, 128});
  auto w = b.input("w", {256, 128});
  auto bias = b.input("bias", {256});
  b.output("y", (b.linear(x, w) + bias).relu());
  auto graph = b.build();
  ASSERT_TRUE(graph.ok()) << graph.error().str();

  const std::string arch = "sm_90a";
  auto program = generate_program(*graph, CodegenOptions{arch, ""});
  if (!program) GTEST_SKIP() << "codegen is not available yet: " << program.error().str();
  NvrtcOptions nv;
  nv.arch = arch;
  std::vector<std::string> options = nvrtc_option_list(nv);

  // Cold: NVRTC compiles the generated source (the first call also loads NVRTC).
  Expected<CubinResult> cubin = Error("not compiled");
  auto start = Clock::now();
  cubin = compile_to_cubin(program->source, program->name, nv);
  double first_compile_ms = ms_since(start);
  ASSERT_TRUE(cubin.ok()) << cubin.error().message;
  double compile_ms = best_of(1, [&] { (void)compile_to_cubin(program->source, program->name, nv); });

  // Warm disk: codegen + key + verified read, as a new process would do.
  testing::ScratchDir tmp;
  DiskCache disk(tmp / "cache");
  CacheKey key = cubin_cache_key(*graph, arch, "", options, program->source);
  ASSERT_TRUE(disk.store(key, cubin->cubin).ok());
  double codegen_ms = best_of(5, [&] { (void)generate_program(*graph, CodegenOptions{arch, ""}); });
  double key_ms = best_of(20, [&] { (void)cubin_cache_key(*graph, arch, "", options, program->source); });
  std::optional<std::vector<char>> hit;
  double disk_ms = best_of(20, [&] { hit = disk.load(key); });
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, cubin->cubin);

  // Memory: the Engine's in-process cache (key string + map lookup).
  OnceCache<std::shared_ptr<std::vector<char>>> memory;
  auto memory_key = [&] {
    return kernel_cache_key(hash_hex(structural_hash(*graph)), "", options, arch, 0);
  };
  (void)memory.get_or_build(memory_key(), [&]() -> Expected<std::shared_ptr<std::vector<char>>> {
    return std::make_shared<std::vector<char>>(cubin->cubin);
  });
  double memory_ms = best_of(100, [&] {
    auto r = memory.get_or_build(memory_key(), []() -> Expected<std::shared_ptr<std::vector<char>>> {
      return Error("must not rebuild");
    });
    EXPECT_TRUE(r.ok());
  });

  std::printf(
      "[ timing ] program %s: %zu source bytes, CUBIN %zu bytes, NVRTC %s, arch %s\n"
      "[ timing ] cold NVRTC compile: first %.1f ms, second %.1f ms\n"
      "[ timing ] warm disk hit: codegen %.3f ms + key %.3f ms + load %.3f ms = %.3f ms\n"
      "[ timing ] memory hit (key + lookup): %.4f ms\n",
      program->name.c_str(), program->source.size(), cubin->cubin.size(), nvrtc_version().c_str(),
      arch.c_str(), first_compile_ms, compile_ms, codegen_ms, key_ms, disk_ms,
      codegen_ms + key_ms + disk_ms, memory_ms);
  EXPECT_LT(codegen_ms + key_ms + disk_ms, compile_ms / 5) << "a disk hit must be far cheaper than NVRTC";
  EXPECT_LT(memory_ms, disk_ms);
}

}  // namespace
}  // namespace fusejit
