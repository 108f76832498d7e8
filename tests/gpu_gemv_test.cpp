// GPU: the GEMV loop (templates/gemm_gemv.cuh) against fp64: linear and
// batched matmul (B [K, N]) of 1 to 32 rows, tiles over every edge (M below
// the tile's rows, N ragged, K not a multiple of the k-tile), one and several
// k groups, with and without split-K, each at fp32's tolerance with
// NaN-poisoned outputs (check_kernel), twice (split-K counters reset for the
// next launch); the same inputs give bitwise the same output; a misaligned
// operand is a clear launch error. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "compiler/program.h"
#include "fusejit/reference.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/gpu_repeat_util.h"

namespace fusejit {
namespace {

struct GemvCase {
  int64_t batch, m, k, n;  // batch 0: linear of x [m, k] (batch < 0: x [-batch, m, k]); else matmul a [batch, m, k]
  std::string config;
};

Expected<Graph> build(const GemvCase& c) {
  GraphBuilder g(Precision::FP32, "gemv");
  if (c.batch > 0) {  // inputs in argument order: a, b, bias (x, w, b)
    auto a = g.input("a", {c.batch, c.m, c.k});
    auto b = g.input("b", {c.k, c.n});
    auto bias = g.input("bias", {c.n});
    g.output("y", g.matmul(a, b).add(bias).relu());
  } else {
    auto x = c.batch < 0 ? g.input("x", {-c.batch, c.m, c.k}) : g.input("x", {c.m, c.k});
    auto w = g.input("w", {c.n, c.k});
    auto b = g.input("b", {c.n});
    g.output("y", g.linear(x, w, b).gelu());
  }
  return g.build();
}

const GemvCase kCases[] = {
    {0, 1, 4096, 4096, ""},                         // 1 row, 256-column tiles, split-K 16
    {0, 3, 1000, 70, "mainloop=ffma"},              // 128-column tile over N = 70, a ragged last k-tile
    {0, 2, 520, 300, "mainloop=ffma,split_k=1"},    // no split
    {0, 32, 8192, 1024, ""},                        // 4 k groups, split-K 16
    {0, 17, 2052, 300, "mainloop=ffma,split_k=3"},  // 20-row tile over 17 rows, ragged splits
    {0, 8, 4096, 512, "mainloop=ffma,split_k=1"},
    {-2, 7, 512, 200, "mainloop=ffma"},             // x [2, 7, 512]: 14 rows
    {2, 5, 3000, 52, "mainloop=ffma"},              // matmul, B [K, N] staged [BK][BN]
    {3, 32, 1024, 260, "mainloop=ffma,split_k=5"},
    {1, 1, 2048, 1024, "mainloop=ffma"},
};

TEST(GpuGemv, MatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  for (const GemvCase& c : kCases) {
    auto g = build(c);
    ASSERT_TRUE(g) << g.error().str();
    CompileOptions opts;
    opts.config = c.config;
    auto kernel = engine.compile(*g, opts);
    const std::string name = std::to_string(c.batch) + ":" + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                             std::to_string(c.n) + " '" + c.config + "'";
    ASSERT_TRUE(kernel) << name << ": " << kernel.error().str();
    EXPECT_NE((*kernel)->program().plan_text.find("GEMV"), std::string::npos) << name << "\n" << (*kernel)->program().plan_text;
    for (uint64_t seed : {1, 2}) {  // a second launch: the split-K counters were reset by the first
      check.seed = seed * 7919 + static_cast<uint64_t>(c.m * 31 + c.n);
      auto r = check_kernel(**kernel, *g, check);
      ASSERT_TRUE(r) << name << ": " << r.error().str();
      EXPECT_TRUE(r->pass) << name << " (" << (*kernel)->name() << "):\n" << r->summary();
    }
  }
}

// Split-K in a fixed order: the same inputs give bitwise the same output, launch after launch.
TEST(GpuGemv, SplitKIsDeterministic) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  const GemvCase c{0, 32, 8192, 1024, ""};
  auto g = build(c);
  ASSERT_TRUE(g) << g.error().str();
  Engine engine;
  auto kernel = engine.compile(*g);
  ASSERT_TRUE(kernel) << kernel.error().str();
  testing::expect_bitwise_repeatable(**kernel, *g);
}

// W 4 bytes past a 16-byte boundary: the launch is refused before anything is enqueued.
TEST(GpuGemv, MisalignedOperandIsAClearError) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  const GemvCase c{0, 4, 1024, 256, "mainloop=ffma"};
  auto g = build(c);
  ASSERT_TRUE(g) << g.error().str();
  Engine engine;
  CompileOptions opts;
  opts.config = c.config;
  auto kernel = engine.compile(*g, opts);
  ASSERT_TRUE(kernel) << kernel.error().str();
  auto xs = DeviceBuffer::allocate(4 * 1024 * 4);
  auto ws = DeviceBuffer::allocate(256 * 1024 * 4 + 16);
  auto bs = DeviceBuffer::allocate(256 * 4);
  auto ys = DeviceBuffer::allocate(4 * 256 * 4);
  ASSERT_TRUE(xs.ok() && ws.ok() && bs.ok() && ys.ok());
  Status s = (*kernel)->launch({xs->ptr(), ws->ptr() + 4, bs->ptr()}, {ys->ptr()});
  ASSERT_FALSE(s.ok()) << "a misaligned W was launched";
  EXPECT_NE(s.error().str().find("16-byte aligned"), std::string::npos) << s.error().str();
  ASSERT_TRUE(device_synchronize().ok()) << "the refused launch left the context broken";
}

}  // namespace
}  // namespace fusejit
