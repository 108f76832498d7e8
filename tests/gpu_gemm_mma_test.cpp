// GPU: matmul and batched matmul (B read as [K, N], broadcast batch dims) on
// the mma.sync mainloop, and 16-bit matmul with one B [K, N] on wgmma (B read
// N-major; sm_90a only), against fp64: ragged shapes (M = 1, odd N and K,
// tiles over every edge) x precision (fp32 = 3xTF32, tf32, bf16, f16) x
// epilogue kind (bias + relu, gelu, whole-row and partial row reductions),
// with the default plan, small and wide forced tiles and the FFMA control,
// each at its mode's tolerance with NaN-poisoned outputs (check_kernel).
// And: an operand whose address breaks the copies' alignment is refused with
// a clear error before anything runs. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/gpu_repeat_util.h"

namespace fusejit {
namespace {

struct MatmulCase {
  Precision precision;
  int64_t batch_a, batch_b;  // a [batch_a, 1, M, K] @ b [batch_b, K, N] (broadcast), or 0: 2-D
  int64_t m, k, n;
  std::string tail;  // bias_relu | gelu | sum | max | logsumexp | mean
};

std::string label(const MatmulCase& c) {
  return std::string(precision_name(c.precision)) + " [" + std::to_string(c.batch_a) + "," +
         std::to_string(c.batch_b) + "] " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
         std::to_string(c.n) + " " + c.tail;
}

Expected<Graph> build(const MatmulCase& c) {
  GraphBuilder g(c.precision, "matmul_case");
  auto a = c.batch_a ? g.input("a", {c.batch_a, 1, c.m, c.k}) : g.input("a", {c.m, c.k});
  auto b = c.batch_b ? g.input("b", {c.batch_b, c.k, c.n}) : g.input("b", {c.k, c.n});
  auto y = g.matmul(a, b);
  if (c.tail != "none") y = y.add(g.input("bias", {c.n}));  // "none": the matmul alone
  if (c.tail == "bias_relu") y = y.relu();
  if (c.tail == "gelu") y = y.gelu();
  if (c.tail == "logsumexp") y = y.logsumexp({-1});
  if (c.tail == "sum") y = y.sum({-1}, true);
  if (c.tail == "max") y = y.max({-1});
  if (c.tail == "mean") y = y.mean({-1});
  g.output("y", y);
  return g.build();
}

using Shapes = int64_t[6][5];  // {batch_a, batch_b, M, K, N} each

// Every shape in every precision, the tails taken in turn.
std::vector<MatmulCase> cases_of(std::initializer_list<Precision> precisions, const Shapes& shapes) {
  const char* tails[] = {"bias_relu", "gelu", "sum", "max", "logsumexp", "mean"};
  std::vector<MatmulCase> out;
  int t = 0;
  for (Precision p : precisions)
    for (const auto& s : shapes) out.push_back({p, s[0], s[1], s[2], s[3], s[4], tails[t++ % 6]});
  return out;
}

std::vector<MatmulCase> cases() {
  const Shapes shapes = {{0, 0, 1, 64, 64},   {3, 4, 100, 72, 45},  {2, 2, 33, 37, 130},
                         {0, 0, 257, 96, 520}, {2, 3, 64, 256, 96}, {0, 3, 129, 520, 257}};
  return cases_of({Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16}, shapes);
}

// 16-bit, one B [K, N] (batch_b = 0), N and K multiples of 8: the wgmma path.
std::vector<MatmulCase> wgmma_cases() {
  const Shapes shapes = {{0, 0, 1, 64, 64},     {3, 0, 100, 72, 48}, {0, 0, 257, 96, 520},
                         {2, 0, 129, 520, 264}, {0, 0, 33, 1000, 8}, {4, 0, 64, 256, 200}};
  return cases_of({Precision::BF16, Precision::F16}, shapes);
}

// fp32 operands, one B [K, N] (any N; K a multiple of 4): B transposed by the
// staging kernel, then wgmma (tf32; fp32 as 3xTF32 with the residuals).
std::vector<MatmulCase> transposed_b_cases() {
  const Shapes shapes = {{0, 0, 1, 64, 64},     {3, 0, 100, 72, 45}, {0, 0, 257, 96, 520},
                         {2, 0, 129, 520, 257}, {0, 0, 33, 1000, 7}, {0, 0, 300, 4096, 200}};
  return cases_of({Precision::FP32, Precision::TF32}, shapes);
}

// tf32, one B [K, N] with rows TMA can read (N and K multiples of 4),
// elementwise epilogues (cheap: stored from registers; gelu: staged through
// shared memory): B as wgmma's register operand (swap-AB, wgmma_swap_ab.cuh),
// no transposed copy. Tiles over every edge, M = 1, K of one k-tile and of 128.
std::vector<MatmulCase> swap_ab_cases() {
  const Shapes shapes = {{0, 0, 1, 64, 64},     {3, 0, 100, 72, 48},  {0, 0, 257, 96, 520},
                         {2, 0, 129, 520, 264}, {0, 0, 33, 1000, 8}, {0, 0, 300, 4096, 200}};
  std::vector<MatmulCase> out;
  int t = 0;
  const char* tails[] = {"bias_relu", "none", "gelu"};
  for (Precision p : {Precision::TF32, Precision::FP32}) {  // fp32: 3xTF32, B's residual in registers too
    for (const auto& s : shapes) out.push_back({p, s[0], s[1], s[2], s[3], s[4], tails[t++ % 3]});
    out.push_back({p, 0, 0, 1000, 36, 1028, "bias_relu"});
    out.push_back({p, 0, 0, 513, 4, 132, "none"});
    out.push_back({p, 2, 0, 700, 200, 388, "gelu"});
  }
  return out;
}

// The kernel name's mainloop: "_mma_", "_wgmma_", or "" for the SIMT control
// (neither); "tc" for either tensor-core path (the default plans).
bool on_mainloop(const std::string& name, const std::string& expect) {
  const bool wgmma = name.find("_wgmma_") != std::string::npos, mma = name.find("_mma_") != std::string::npos;
  if (expect == "tc") return wgmma || mma;
  if (expect.empty()) return !wgmma && !mma;
  return name.find(expect) != std::string::npos;
}

void run_cases(const std::string& config, const std::string& expect,
               const std::vector<MatmulCase>& all = cases()) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CompileOptions opts;
  opts.config = config;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  for (const MatmulCase& c : all) {
    auto g = build(c);
    ASSERT_TRUE(g) << label(c) << ": " << g.error().str();
    auto kernel = engine.compile(*g, opts);
    ASSERT_TRUE(kernel) << label(c) << " config '" << config << "': " << kernel.error().str();
    EXPECT_TRUE(on_mainloop((*kernel)->name(), expect)) << label(c) << ": kernel " << (*kernel)->name()
                                                         << ", expected '" << expect << "'";
    for (uint64_t seed : {1u, 2u}) {  // fresh inputs each time
      check.seed = seed * 7919 + static_cast<uint64_t>(c.m);
      auto r = check_kernel(**kernel, *g, check);
      ASSERT_TRUE(r) << label(c) << ": " << r.error().str();
      EXPECT_TRUE(r->pass) << label(c) << " (" << (*kernel)->name() << ", config '" << config << "'):\n"
                           << r->summary();
    }
  }
}

TEST(GpuGemmMma, MatmulDefaultPlansMatchReference) { run_cases("", "tc"); }
TEST(GpuGemmMma, MatmulSmallTilesMatchReference) { run_cases("mma_tile=64x32x4", "_mma_"); }
TEST(GpuGemmMma, MatmulWideTilesMatchReference) { run_cases("mma_tile=128x256x3", "_mma_"); }
TEST(GpuGemmMma, MatmulFfmaControlMatchesReference) { run_cases("mainloop=ffma", ""); }
TEST(GpuGemmMma, MatmulSplitKMatchesReference) { run_cases("split_k=5,mma_tile=64x64x3", "_mma_"); }

void run_wgmma_cases(const std::string& config, const std::vector<MatmulCase>& all = wgmma_cases()) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch) << arch.error().str();
  if (*arch != "sm_90a") GTEST_SKIP() << "wgmma needs sm_90a; this device is " << *arch;
  run_cases(config, "_wgmma_", all);
}
TEST(GpuGemmMma, MatmulWgmmaTransposedBMatchesReference) { run_wgmma_cases("mainloop=wgmma", transposed_b_cases()); }
TEST(GpuGemmMma, MatmulWgmmaTransposedBSmallTilesMatchReference) {
  run_wgmma_cases("mainloop=wgmma,wgmma_tile=64x64x4x8", transposed_b_cases());
}
TEST(GpuGemmMma, MatmulWgmmaDefaultMatchesReference) { run_wgmma_cases(""); }
TEST(GpuGemmMma, MatmulWgmmaSmallTilesMatchReference) { run_wgmma_cases("wgmma_tile=64x64x4x8"); }
TEST(GpuGemmMma, MatmulWgmmaWideTilesMatchReference) { run_wgmma_cases("wgmma_tile=128x256x3x8"); }
TEST(GpuGemmMma, MatmulWgmmaPingPongMatchesReference) { run_wgmma_cases("wgmma_schedule=pingpong"); }
TEST(GpuGemmMma, MatmulWgmmaTallPingPongMatchesReference) {
  run_wgmma_cases("wgmma_tile=128x128x4x8,wgmma_schedule=pingpong");
}
TEST(GpuGemmMma, MatmulWgmmaTmaStoresMatchReference) { run_wgmma_cases("tma_store=1"); }
// The cases of one precision (fp32's small grids would take mma.sync split-K by default: mainloop=wgmma).
std::vector<MatmulCase> swap_ab_cases_of(Precision p) {
  std::vector<MatmulCase> out;
  for (const MatmulCase& c : swap_ab_cases())
    if (c.precision == p) out.push_back(c);
  return out;
}
TEST(GpuGemmMma, MatmulWgmmaSwapAbMatchesReference) {
  run_wgmma_cases("wgmma_swap_ab=1", swap_ab_cases_of(Precision::TF32));
  run_wgmma_cases("mainloop=wgmma,wgmma_swap_ab=1", swap_ab_cases_of(Precision::FP32));
}
TEST(GpuGemmMma, MatmulWgmmaSwapAbTilesMatchReference) {
  for (const char* tile : {"64x64x4x8", "128x128x6x4", "256x64x5x2", "192x128x4x8", "176x64x4x1"})
    run_wgmma_cases(std::string("wgmma_swap_ab=1,wgmma_tile=") + tile, swap_ab_cases_of(Precision::TF32));
  for (const char* tile : {"64x64x4x8", "128x64x4x2", "128x128x3x8"})  // 3xTF32: at most 128 rows
    run_wgmma_cases(std::string("mainloop=wgmma,wgmma_swap_ab=1,wgmma_tile=") + tile, swap_ab_cases_of(Precision::FP32));
}
TEST(GpuGemmMma, MatmulWgmmaSwapAbSplitKMatchesReference) {
  run_wgmma_cases("wgmma_swap_ab=1,split_k=3", swap_ab_cases_of(Precision::TF32));
  run_wgmma_cases("mainloop=wgmma,wgmma_swap_ab=1,split_k=3", swap_ab_cases_of(Precision::FP32));
}
// The same cases on the transposed copy of B (wgmma_swap_ab=0), the path swap-AB replaces.
TEST(GpuGemmMma, MatmulWgmmaTransposedCopyMatchesReference) {
  run_wgmma_cases("mainloop=wgmma,wgmma_swap_ab=0", swap_ab_cases());
}

// Split-K sums the splits in a fixed order and leaves its counters at zero:
// the same inputs give bitwise the same output, launch after launch.
TEST(GpuGemmMma, SplitKIsDeterministic) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  const MatmulCase c{Precision::FP32, 0, 0, 100, 1000, 500, "gelu"};
  auto g = build(c);
  ASSERT_TRUE(g) << g.error().str();
  Engine engine;
  auto kernel = engine.compile(*g);
  ASSERT_TRUE(kernel) << kernel.error().str();
  testing::expect_bitwise_repeatable(**kernel, *g);
}

// x at an address 4 bytes past a 16-byte boundary: the launch is refused
// before anything is enqueued, and the same kernel then runs on aligned data.
TEST(GpuGemmMma, MisalignedOperandIsAClearError) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  GraphBuilder b(Precision::BF16, "aligned_linear");
  auto x = b.input("x", {64, 64});
  auto w = b.input("w", {96, 64});
  b.output("y", b.linear(x, w).relu());
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  Engine engine;
  CompileOptions opts;
  opts.config = "mainloop=mma";
  auto kernel = engine.compile(*g, opts);
  ASSERT_TRUE(kernel) << kernel.error().str();
  auto xs = DeviceBuffer::allocate(64 * 64 * 2 + 16);
  auto ws = DeviceBuffer::allocate(96 * 64 * 2);
  auto ys = DeviceBuffer::allocate(64 * 96 * 2);
  ASSERT_TRUE(xs.ok() && ws.ok() && ys.ok());
  Status s = (*kernel)->launch({xs->ptr() + 4, ws->ptr()}, {ys->ptr()});
  ASSERT_FALSE(s.ok()) << "a misaligned x was launched";
  EXPECT_NE(s.error().str().find("16-byte aligned"), std::string::npos) << s.error().str();
  ASSERT_TRUE(device_synchronize().ok()) << "the refused launch left the context broken";
  CheckOptions check;
  check.time = false;
  auto r = check_kernel(**kernel, *g, check);
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_TRUE(r->pass) << r->summary();
}

}  // namespace
}  // namespace fusejit
