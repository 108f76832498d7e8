// GPU: the GEMM mainloops against fp64. Linear chains over ragged shapes
// (M = 1, odd N, K not a multiple of the tile's K, tiles hanging over every
// edge) x precision (fp32 = 3xTF32, tf32, bf16, f16) x epilogue kind
// (pointwise, gelu, x*sigmoid(x)*2, whole-row and partial row reductions, softmax and
// log_softmax along N: whole in the epilogue, a row kernel, or in parts),
// with the default plan, forced wgmma tiles and forced mma.sync, each at its mode's
// tolerance with NaN-poisoned outputs (check_kernel). NaN and Inf inputs
// propagate as in PyTorch. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fusejit/builder.h"
#include "compiler/program.h"
#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "fusejit/reference.h"
#include "runtime/kernel_check.h"

namespace fusejit {
namespace {

struct GemmCase {
  Precision precision;
  int64_t m, k, n;
  std::string tail;  // bias_relu | gelu | swish2 | logsumexp | sum | max | mean
};

std::string label(const GemmCase& c) {
  return std::string(precision_name(c.precision)) + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
         std::to_string(c.n) + " " + c.tail;
}

Expected<Graph> build(const GemmCase& c) {
  GraphBuilder g(c.precision, "gemm_case");
  auto x = g.input("x", {c.m, c.k});
  auto w = g.input("w", {c.n, c.k});
  auto b = g.input("b", {c.n});
  auto y = g.linear(x, w).add(b);
  if (c.tail == "bias_relu") y = y.relu();
  if (c.tail == "gelu") y = y.gelu();
  if (c.tail == "swish2") {
    auto s = y.sigmoid();
    y = y.mul(s).mul(2.0);
  }
  if (c.tail == "logsumexp") y = y.logsumexp({-1});
  if (c.tail == "softmax") y = y.softmax(-1);
  if (c.tail == "log_softmax") y = y.log_softmax(-1);
  if (c.tail == "sum") y = y.sum({-1}, true);
  if (c.tail == "max") y = y.max({-1});
  if (c.tail == "mean") y = y.mean({-1});
  g.output("y", y);
  return g.build();
}

std::vector<GemmCase> cases() {
  std::vector<GemmCase> out;
  const int64_t shapes[][3] = {{1, 64, 64},    {100, 1000, 500}, {257, 96, 130}, {129, 520, 257},
                               {64, 4096, 64}, {300, 72, 1000},  {33, 37, 45},   {512, 256, 768},
                               {512, 64, 11000}};  // default: 128x128 ping-pong tiles (344 of them)
  const char* tails[] = {"bias_relu", "gelu", "swish2", "logsumexp", "sum", "max", "mean"};
  int t = 0;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const auto& s : shapes) out.push_back({p, s[0], s[1], s[2], tails[t++ % 7]});
  // Row reductions over 18 or more column tiles: the finish spreads tiles over a block's warps.
  out.push_back({Precision::FP32, 70, 40, 4500, "mean"});
  out.push_back({Precision::TF32, 70, 40, 4500, "logsumexp"});
  out.push_back({Precision::BF16, 70, 40, 4500, "sum"});
  out.push_back({Precision::F16, 70, 40, 4500, "max"});
  // Softmax along N: whole in the epilogue (one tile spans N) or in parts (per-tile partials, a finish kernel).
  out.push_back({Precision::FP32, 100, 1000, 500, "softmax"});
  out.push_back({Precision::TF32, 257, 96, 130, "log_softmax"});
  out.push_back({Precision::BF16, 512, 64, 11000, "softmax"});
  out.push_back({Precision::F16, 33, 37, 45, "log_softmax"});
  out.push_back({Precision::BF16, 129, 520, 257, "log_softmax"});
  out.push_back({Precision::F16, 300, 72, 1000, "softmax"});
  out.push_back({Precision::FP32, 64, 4096, 64, "softmax"});
  return out;
}

void run_cases(const std::string& config) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CompileOptions opts;
  opts.config = config;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  int wgmma = 0;
  size_t mma = 0;
  const bool pingpong = config.find("wgmma_schedule=pingpong") != std::string::npos;
  for (const GemmCase& c : cases()) {
    if (pingpong && c.precision == Precision::FP32) continue;  // 3xTF32 is cooperative only (a config error)
    auto g = build(c);
    ASSERT_TRUE(g) << label(c) << ": " << g.error().str();
    auto kernel = engine.compile(*g, opts);
    if (!kernel) {
      // A forced tile may not fit a shape (e.g. a whole-row reduction wider
      // than the tile): that must be a clear codegen error, nothing else.
      EXPECT_NE(kernel.error().str().find("codegen"), std::string::npos) << label(c) << ": " << kernel.error().str();
      continue;
    }
    wgmma += (*kernel)->name().find("wgmma") != std::string::npos;
    mma += (*kernel)->name().find("_mma_") != std::string::npos;
    for (uint64_t seed : {1u, 2u}) {  // fresh inputs: the same function on any input
      check.seed = seed * 7919 + static_cast<uint64_t>(c.m);
      auto r = check_kernel(**kernel, *g, check);
      ASSERT_TRUE(r) << label(c) << ": " << r.error().str();
      EXPECT_TRUE(r->pass) << label(c) << " (" << (*kernel)->name() << ", config '" << config << "'):\n"
                           << r->summary();
    }
  }
  auto arch = Engine::device_arch();
  if (arch && *arch == "sm_90a" && config.find("mainloop=") == std::string::npos)
    EXPECT_GT(wgmma, 0) << "no case ran on the wgmma mainloop";
  if (config.find("mainloop=mma") != std::string::npos)
    EXPECT_EQ(mma, cases().size()) << "forced mma.sync: every case compiles and runs on it";
}

TEST(GpuGemm, DefaultPlansMatchReference) { run_cases(""); }
TEST(GpuGemm, SmallWgmmaTilesMatchReference) { run_cases("wgmma_tile=64x64x2x1"); }
TEST(GpuGemm, WideWgmmaTilesMatchReference) { run_cases("wgmma_tile=128x256x3x3"); }
// Ping-pong on every shape (one tile per block included: consumer 1 idles).
// Tiles 168, 176 and 192 wide (K-major B): the widths that cut a wave on some shapes; 168 in 2-block clusters.
TEST(GpuGemm, OddWidthWgmmaTilesMatchReference) {
  run_cases("wgmma_tile=128x168x5");
  run_cases("wgmma_tile=64x168x6,wgmma_schedule=pingpong");
  run_cases("wgmma_tile=128x168x5,wgmma_schedule=pingpong");  // a consumer holds the whole 128x168 tile
  run_cases("wgmma_tile=128x176x5");
  run_cases("wgmma_tile=128x192x4x4");
  run_cases("wgmma_tile=64x176x6,wgmma_schedule=pingpong");
  run_cases("wgmma_tile=128x168x4,wgmma_cluster=2");  // B in boxes of 56 rows: two from block 0, one from block 1
}
TEST(GpuGemm, PingPongMatchesReference) { run_cases("wgmma_schedule=pingpong"); }
// The staged epilogue two columns a call (opt-in): global stores kept (no TMA stores), then on 168-column tiles
// (chunks of 56) and ping-pong 64-row ones; ragged chunks fall back to one element a call.
TEST(GpuGemm, EpiloguePairsMatchReference) {
  run_cases("epilogue_pairs=1,tma_store=0");
  run_cases("epilogue_pairs=1,wgmma_tile=128x168x5");
  run_cases("epilogue_pairs=1,wgmma_schedule=pingpong");
}
// Cheap elementwise epilogues stored from the fragment's registers (opt-in), cooperative and ping-pong.
// (f16 512x64x11000 under ping-pong: one k-tile a tile, two tiles a consumer. It hung on the H100 while the
// ping-pong turn barrier took one arrival per consumer instead of one per warp.)
TEST(GpuGemm, EpilogueDirectMatchesReference) {
  run_cases("epilogue_direct=1,tma_store=0");
  run_cases("epilogue_direct=1,wgmma_schedule=pingpong,tma_store=0");
  run_cases("epilogue_direct=1,epilogue_pairs=1,tma_store=0");
}
// Outputs through shared-memory tiles and TMA bulk stores (ragged edges clipped by TMA).
TEST(GpuGemm, TmaStoresMatchReference) {
  run_cases("tma_store=1");
  run_cases("tma_store=1,wgmma_tile=128x168x4");  // unswizzled chunks of 56 (16-bit) or 24 (32-bit) columns
}
// Two outputs through TMA stores (two slots each), ragged rows and columns
// (TMA clips the chunks), one and several column chunks per tile.
TEST(GpuGemm, TmaStoresOfTwoOutputsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch) << arch.error().str();
  if (*arch != "sm_90a") GTEST_SKIP() << "wgmma needs sm_90a; this device is " << *arch;
  Engine engine;
  CheckOptions check;
  check.time = false;
  // 8192x64x900: two tiles per block, last column tiles of 3 (bf16) or 5 (fp32) chunks (the slot ring runs across tiles).
  const int64_t shapes[][3] = {{257, 96, 136}, {1000, 520, 392}, {512, 256, 512}, {8192, 64, 900}};
  for (Precision p : {Precision::BF16, Precision::TF32, Precision::F16})
    for (const auto& s : shapes)
      for (const char* config : {"tma_store=1", "tma_store=1,wgmma_tile=128x64x4x2", "tma_store=1,tma_slots=3",
                                 "tma_store=1,wgmma_tile=128x168x4"}) {
        GraphBuilder g(p, "two_outputs");
        auto y = g.linear(g.input("x", {s[0], s[1]}), g.input("w", {s[2], s[1]})).add(g.input("b", {s[2]}));
        g.output("h", y);
        g.output("y", y.gelu().mul(2.0));
        auto graph = g.build();
        ASSERT_TRUE(graph) << graph.error().str();
        CompileOptions opts;
        opts.config = config;
        auto kernel = engine.compile(*graph, opts);
        ASSERT_TRUE(kernel) << kernel.error().str();
        const std::string what = std::string(precision_name(p)) + " " + std::to_string(s[0]) + "x" +
                                 std::to_string(s[1]) + "x" + std::to_string(s[2]) + " '" + config + "'";
        EXPECT_NE((*kernel)->program().plan_text.find("TMA bulk stores"), std::string::npos) << what;
        for (uint64_t seed : {3u, 4u}) {
          check.seed = seed;
          auto r = check_kernel(**kernel, *graph, check);
          ASSERT_TRUE(r) << what << ": " << r.error().str();
          EXPECT_TRUE(r->pass) << what << ":\n" << r->summary();
        }
      }
}
TEST(GpuGemm, NarrowPingPongMatchesReference) { run_cases("wgmma_tile=64x64x3x2,wgmma_schedule=pingpong"); }
// 128-row ping-pong tiles: each consumer runs two 64-row wgmmas per k step
// (four accumulator rows per thread); whole-row reductions wider than 128
// columns give a codegen error, which run_cases accepts.
TEST(GpuGemm, TallPingPongMatchesReference) { run_cases("wgmma_tile=128x128x4x4,wgmma_schedule=pingpong"); }
TEST(GpuGemm, TallNarrowPingPongMatchesReference) { run_cases("wgmma_tile=128x64x5x2,wgmma_schedule=pingpong"); }
// Softmax along an N wider than a tile in parts: per-tile partials and a finish kernel.
TEST(GpuGemm, SoftmaxInPartsMatchesReference) { run_cases("softmax_parts=1"); }
TEST(GpuGemm, SoftmaxInPartsOnMmaMatchesReference) { run_cases("mainloop=mma,softmax_parts=1"); }
TEST(GpuGemm, FfmaMainloopStillMatchesReference) { run_cases("mainloop=ffma"); }
// SIMT split-K on every case without a fused tail (K ranges of whole 8-deep k tiles, the last one ragged).
TEST(GpuGemm, FfmaSplitKMatchesReference) { run_cases("mainloop=ffma,split_k=3"); }
// mma.sync (cp.async copies; the sm_80 path, and sm_90a's where TMA cannot read the rows).
TEST(GpuGemm, MmaMainloopMatchesReference) { run_cases("mainloop=mma"); }
TEST(GpuGemm, SmallMmaTilesMatchReference) { run_cases("mainloop=mma,mma_tile=64x16x2"); }
TEST(GpuGemm, SplitKMatchesReference) { run_cases("mainloop=mma,split_k=3"); }
// wgmma split-K: every tile in 3 K ranges (the last range's unit sums them),
// and in ping-pong only the tiles from the second on (whole and split units
// in one block; 3xTF32 is cooperative only and skipped there).
TEST(GpuGemm, WgmmaSplitKMatchesReference) { run_cases("split_k=3"); }
TEST(GpuGemm, WgmmaSplitKLastTilesMatchReference) { run_cases("split_k=4,split_from=1,wgmma_schedule=pingpong"); }

// 2-block clusters sharing B by TMA multicast (wgmma_cluster=2): odd row-tile
// counts (the last pair's second block stores nothing), 64- and 128-row
// tiles, 256-wide tiles, TMA-stored outputs, and fused row reductions
// (3xTF32 cases are a config error there and skipped by run_cases).
TEST(GpuGemm, TwoBlockClustersMatchReference) { run_cases("wgmma_cluster=2"); }
TEST(GpuGemm, WideTwoBlockClustersMatchReference) { run_cases("wgmma_cluster=2,wgmma_tile=128x256x4x4"); }
// Clusters under ping-pong: consumer c of both blocks reads a stage and releases it to both producers.
TEST(GpuGemm, TwoBlockClusterPingPongMatchesReference) { run_cases("wgmma_cluster=2,wgmma_schedule=pingpong"); }
TEST(GpuGemm, TallTwoBlockClusterPingPongMatchesReference) {
  run_cases("wgmma_cluster=2,wgmma_schedule=pingpong,wgmma_tile=128x128x4x4");
}
TEST(GpuGemm, TwoBlockClustersWithTmaStoresMatchReference) {
  run_cases("wgmma_cluster=2,tma_store=1,wgmma_tile=128x128x6x2");
}

// matmul on clusters: bf16 / f16 B [K, N] (N-major: the blocks split its
// 64-column boxes), tf32 B transposed to [N, K] first, broadcast batches.
TEST(GpuGemm, TwoBlockClusterMatmulsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  struct Case {
    Precision p;
    int64_t batch, m, k, n;
    std::string config;
  };
  const Case cases[] = {{Precision::BF16, 0, 1000, 520, 704, "wgmma_cluster=2,wgmma_tile=128x128x4"},
                        {Precision::F16, 3, 333, 256, 384, "wgmma_cluster=2,wgmma_tile=64x256x4"},
                        {Precision::F16, 3, 333, 256, 384, "wgmma_cluster=2,wgmma_tile=64x256x4,wgmma_schedule=pingpong"},
                        {Precision::TF32, 2, 200, 136, 250, "wgmma_cluster=2"},
                        {Precision::BF16, 0, 2048, 1024, 2048, "wgmma_cluster=2,wgmma_tile=128x256x4x8"}};
  for (const Case& c : cases) {
    const DType dt = c.p == Precision::BF16 ? DType::BF16 : c.p == Precision::F16 ? DType::F16 : DType::F32;
    GraphBuilder g(c.p, "cluster_matmul");
    auto a = c.batch ? g.input("a", {c.batch, c.m, c.k}, dt) : g.input("a", {c.m, c.k}, dt);
    auto b = g.input("b", {c.k, c.n}, dt);
    auto bias = g.input("bias", {c.n}, dt);
    g.output("y", g.matmul(a, b).add(bias).gelu());
    auto graph = g.build();
    ASSERT_TRUE(graph) << graph.error().str();
    CompileOptions opts;
    opts.config = c.config;
    auto kernel = engine.compile(*graph, opts);
    ASSERT_TRUE(kernel) << c.config << ": " << kernel.error().str();
    const std::string name = (*kernel)->name() + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                             std::to_string(c.n) + " '" + c.config + "'";
    auto arch = Engine::device_arch();
    if (arch && *arch == "sm_90a") EXPECT_NE((*kernel)->name().find("wgmma"), std::string::npos) << name;
    check.seed = static_cast<uint64_t>(c.m * 31 + c.n);
    auto r = check_kernel(**kernel, *graph, check);
    ASSERT_TRUE(r) << name << ": " << r.error().str();
    EXPECT_TRUE(r->pass) << name << ":\n" << r->summary();
  }
}

// Runs `kernel` on host inputs (outputs poisoned with 0xFF bytes first): its
// first output, on the host.
Expected<HostTensor> launch_on(CompiledKernel& kernel, const Graph& g, const std::vector<HostTensor>& inputs) {
  std::vector<DeviceBuffer> buffers;
  std::vector<DevicePtr> in, out;
  for (const HostTensor& t : inputs) {
    std::vector<uint8_t> bytes = to_device_bytes(t);
    auto buf = DeviceBuffer::allocate(bytes.size());
    if (!buf.ok()) return buf.error();
    if (auto st = buf->upload(bytes.data(), bytes.size()); !st.ok()) return st.error();
    in.push_back(buf->ptr());
    buffers.push_back(buf.take());
  }
  const TensorType& type = g.node(g.outputs[0].value).type;
  auto y = DeviceBuffer::allocate(static_cast<size_t>(type.numel()) * dtype_size(type.dtype));
  if (!y.ok()) return y.error();
  if (auto st = y->fill_bytes(0xFF); !st.ok()) return st.error();
  out.push_back(y->ptr());
  if (auto st = kernel.launch(in, out); !st.ok()) return st.error();
  if (auto st = device_synchronize(); !st.ok()) return st.error();
  std::vector<uint8_t> bytes(y->size());
  if (auto st = y->download(bytes.data(), bytes.size()); !st.ok()) return st.error();
  return from_device_bytes(type, bytes.data());
}

// NaN and Inf in x reach the output as in PyTorch (the fp64 reference):
// a NaN poisons its row; +Inf gives +-Inf (or NaN where signs meet). Softmax
// over 600 columns (in parts): such rows are NaN, and a bias of -inf over the
// first 256 columns (whole column tiles of -inf) gives exact zeros there.
TEST(GpuGemm, NanAndInfPropagate) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const char* tail : {"gelu", "softmax"})
  for (const char* config : {"", "mainloop=mma", "softmax_parts=1", "mainloop=mma,softmax_parts=1", "row_cluster=1",
                             "row_cluster=1,wgmma_schedule=pingpong,wgmma_tile=64x128x4"})
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16}) {
    CompileOptions opts;
    opts.config = config;
    if (p == Precision::FP32 && std::string(config).find("pingpong") != std::string::npos) continue;  // 3xTF32
    const bool softmax = std::string(tail) == "softmax";
    if (!softmax && std::string(config).find("softmax_parts") != std::string::npos) continue;
    const GemmCase c{p, 96, 128, softmax ? 600 : 80, tail};
    auto g = build(c);
    ASSERT_TRUE(g) << g.error().str();
    auto kernel = engine.compile(*g, opts);
    ASSERT_TRUE(kernel) << kernel.error().str();
    std::vector<HostTensor> inputs = make_random_inputs(*g, 99);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    inputs[0].data[3 * c.k + 5] = nan;   // row 3
    inputs[0].data[7 * c.k + 9] = inf;   // row 7
    inputs[0].data[11 * c.k + 2] = -inf; // row 11
    if (softmax)
      for (int64_t n = 0; n < 256; ++n) inputs[2].data[static_cast<size_t>(n)] = -inf;  // b
    const TensorType& type = g->node(g->outputs[0].value).type;
    auto ran = launch_on(**kernel, *g, inputs);
    ASSERT_TRUE(ran) << ran.error().str();
    const HostTensor& result = *ran;
    auto ref = evaluate_reference(*g, inputs);
    ASSERT_TRUE(ref.ok()) << ref.error().str();
    for (int64_t row : {3, 7, 11})
      for (int64_t n = 0; n < c.n; ++n) {
        const double r = (*ref)[0][row * c.n + n];
        const float v = result.data[row * c.n + n];
        if (std::isnan(r)) EXPECT_TRUE(std::isnan(v)) << label(c) << " row " << row << " col " << n << ": " << v;
        else EXPECT_EQ(v, r) << label(c) << " row " << row << " col " << n;  // +-Inf, or gelu(-Inf) = 0
      }
    if (softmax)
      for (int64_t row = 0; row < c.m; ++row)
        for (int64_t n = 0; n < 256; ++n)
          if (!std::isnan((*ref)[0][row * c.n + n]))
            EXPECT_EQ(result.data[row * c.n + n], 0.f) << label(c) << " row " << row << " col " << n;
    Comparison cmp = compare_outputs(result.data.data(), ref->at(0).data(), type.numel(), p);
    EXPECT_TRUE(cmp.pass) << label(c) << " (" << (*kernel)->name() << "): " << cmp.summary();
  }
}

// A zero row of x or of W gives exact zeros, not tiny values (3xTF32's
// residual of 0 is 0): a zero gradient through a fp32 backward GEMM stays zero.
// Linear and matmul (B [K, N], staged), every precision, wgmma and mma.sync.
TEST(GpuGemm, ZeroRowsGiveExactZeros) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  const int64_t m = 96, k = 72, n = 80;
  for (bool matmul : {false, true})
  for (const char* config : {"", "mainloop=mma"})
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16}) {
    GraphBuilder gb(p, "zero_rows");
    auto x = gb.input("x", {m, k});
    auto w = matmul ? gb.input("w", {k, n}) : gb.input("w", {n, k});
    gb.output("y", matmul ? gb.matmul(x, w) : gb.linear(x, w));
    auto g = gb.build();
    ASSERT_TRUE(g) << g.error().str();
    CompileOptions opts;
    opts.config = config;
    auto kernel = engine.compile(*g, opts);
    ASSERT_TRUE(kernel) << kernel.error().str();
    const std::string name = std::string(precision_name(p)) + (matmul ? " matmul '" : " linear '") + config + "' " +
                             (*kernel)->name();
    std::vector<HostTensor> inputs = make_random_inputs(*g, 7);
    for (int64_t row : {0, 5, 77})
      for (int64_t i = 0; i < k; ++i) inputs[0].data[static_cast<size_t>(row * k + i)] = 0.f;
    for (int64_t i = 0; i < k; ++i)  // output column 3 (W's row 3, or B's column 3)
      inputs[1].data[static_cast<size_t>(matmul ? i * n + 3 : 3 * k + i)] = 0.f;
    auto result = launch_on(**kernel, *g, inputs);
    ASSERT_TRUE(result) << name << ": " << result.error().str();
    for (int64_t row = 0; row < m; ++row)
      for (int64_t col = 0; col < n; ++col)
        if (row == 0 || row == 5 || row == 77 || col == 3)
          ASSERT_EQ(result->data[static_cast<size_t>(row * n + col)], 0.f) << name << " row " << row << " col " << col;
    auto ref = evaluate_reference(*g, inputs);
    ASSERT_TRUE(ref.ok()) << ref.error().str();
    Comparison cmp = compare_outputs(result->data.data(), ref->at(0).data(), m * n, p);
    EXPECT_TRUE(cmp.pass) << name << ": " << cmp.summary();
  }
}

}  // namespace
}  // namespace fusejit
