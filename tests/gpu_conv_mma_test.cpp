// GPU: the conv2d mma.sync mainloop (im2col gather by cp.async) and, on
// sm_90a, the wgmma TMA path (conv_wgmma.cuh) against fp64.
// Hand-listed conv geometries (stride 1/2, padding 0..3, dilation 1/2,
// groups 1/2/4, odd H and W, Cin not a multiple of 8, Cout not a multiple of
// any tile, batch 1..4, kernels 1x1 to 7x7 incl. a ResNet stem) x precision
// (fp32 = 3xTF32, tf32, bf16, f16) x epilogue kind (pointwise, fused 2x2 max
// and avg pool, min / sum over channels, global average pool), with the
// default plan, with mainloop=mma forced and with a small forced mma tile,
// each at its mode's tolerance with NaN-poisoned outputs (check_kernel).
// NaN and Inf inputs propagate as in PyTorch. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "compiler/program.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/mma_kinds.h"

namespace fusejit {
namespace {

using test_util::kPrecisions;
using test_util::mma_kind;

struct ConvGeom {
  int64_t n, cin, h, w, cout, k, stride, pad, dil, groups;
  int64_t oh() const { return (h + 2 * pad - dil * (k - 1) - 1) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - dil * (k - 1) - 1) / stride + 1; }
};

struct ConvCase {
  Precision precision;
  ConvGeom g;
  // bias_relu | gelu | tanh2_bias | maxpool2 | avgpool2 | chmin_tanh | chsum | gap | chmin_gap | two_outputs
  std::string tail;
};

std::string label(const ConvCase& c) {
  const ConvGeom& g = c.g;
  return std::string(precision_name(c.precision)) + " x[" + std::to_string(g.n) + "," + std::to_string(g.cin) + "," +
         std::to_string(g.h) + "," + std::to_string(g.w) + "] -> " + std::to_string(g.cout) + " k" +
         std::to_string(g.k) + " s" + std::to_string(g.stride) + " p" + std::to_string(g.pad) + " d" +
         std::to_string(g.dil) + " g" + std::to_string(g.groups) + " " + c.tail;
}

Expected<Graph> build(const ConvCase& c) {
  const ConvGeom& geo = c.g;
  GraphBuilder g(c.precision, "conv_mma_case");
  auto x = g.input("x", {geo.n, geo.cin, geo.h, geo.w});
  auto w = g.input("w", {geo.cout, geo.cin / geo.groups, geo.k, geo.k});
  auto b = g.input("b", {geo.cout});
  const bool needs_bias =
      c.tail == "bias_relu" || c.tail == "tanh2_bias" || c.tail == "maxpool2" || c.tail == "maxpool_bias" ||
      c.tail == "two_outputs";
  Value bias;
  if (needs_bias) bias = g.input("bias", {geo.cout, 1, 1});  // every input must be read
  Conv2dOptions o;
  o.stride = {geo.stride, geo.stride};
  o.padding = {geo.pad, geo.pad};
  o.dilation = {geo.dil, geo.dil};
  o.groups = geo.groups;
  auto y = g.conv2d(x, w, b, o);
  if (c.tail == "bias_relu") y = y.relu().add(bias);
  if (c.tail == "gelu") y = y.gelu();
  if (c.tail == "tanh2_bias") y = y.tanh().mul(2.0).add(bias);
  if (c.tail == "maxpool2") y = y.tanh().mul(2.0).add(bias).max_pool2d({});
  if (c.tail == "avgpool2") y = y.relu().avg_pool2d({});
  if (c.tail == "maxpool_bias") y = y.add(bias).max_pool2d({});
  if (c.tail == "chmin_tanh") y = y.min({1}, true).tanh();
  if (c.tail == "chsum") y = y.sum({1});
  if (c.tail == "gap") y = y.relu().global_avg_pool();
  if (c.tail == "two_outputs") {  // the conv output itself (as a training forward saves it) and the chain's
    g.output("c", y);
    y = y.relu().add(bias);
  }
  if (c.tail == "chmin_gap") {  // a channel reduction and a reduction over the pixels in one epilogue
    g.output("z", y.min({1}, true).tanh());
    y = y.relu().global_avg_pool();
  }
  g.output("y", y);
  return g.build();
}

std::vector<ConvCase> cases() {
  // {n, cin, h, w, cout, k, stride, pad, dil, groups}
  const ConvGeom geoms[] = {
      {2, 16, 18, 18, 32, 3, 1, 1, 1, 1},   // seed 1, smaller
      {1, 3, 17, 23, 10, 3, 1, 0, 1, 1},    // Cin 3, odd H/W, Cout 10
      {2, 3, 33, 31, 33, 7, 2, 3, 1, 1},    // ResNet stem: 7x7 s2 p3
      {3, 5, 17, 23, 130, 1, 1, 0, 1, 1},   // 1x1, Cout over a 128 tile
      {4, 12, 15, 15, 64, 5, 1, 2, 1, 1},   // 5x5
      {2, 8, 20, 20, 16, 3, 2, 1, 1, 2},    // strided, 2 groups
      {1, 16, 21, 19, 48, 3, 1, 2, 2, 4},   // dilated, 4 groups
      {2, 12, 17, 17, 36, 3, 1, 1, 2, 4},   // Cin/g = 3, Cout/g = 9
      {1, 64, 14, 14, 130, 3, 1, 1, 1, 1},  // K = 576
      {2, 5, 9, 11, 20, 5, 2, 0, 1, 1},     // 3x4 output
      {4, 32, 8, 8, 128, 1, 2, 0, 1, 1},    // 1x1 stride 2 (a downsample)
      {1, 4, 23, 17, 10, 3, 1, 3, 1, 2},    // padding 3, Cout/g = 5
      {2, 256, 7, 7, 64, 3, 1, 1, 1, 1},    // K = 2304: many k-tiles through the ring
      {1, 24, 13, 13, 33, 5, 2, 1, 2, 1},   // dilated and strided
      // sm_90a: stride 1, one group, Cin in whole 128-byte blocks -> the wgmma TMA path
      {2, 64, 19, 23, 72, 3, 1, 1, 1, 1},   // odd H/W, Cout 72
      {1, 128, 12, 40, 96, 3, 1, 2, 2, 1},  // dilated and padded, K = 1152
      {2, 32, 33, 17, 40, 5, 1, 2, 1, 1},   // fp32 Cin 32 (16-bit: mma.sync), 5x5
      {3, 64, 9, 130, 64, 1, 1, 0, 1, 1},   // 1x1, OW 130: two patches per row
      {2, 64, 16, 16, 64, 3, 1, 1, 1, 1},   // square, padded, pools in whole patches
      {1, 64, 10, 36, 200, 3, 1, 0, 1, 1},  // Cout 200 (two column tiles, one ragged)
      {1, 64, 13, 14, 40, 5, 1, 2, 1, 1},   // 5x5, Cin 64: 16-bit keeps per-tap boxes (the filter takes 200 KiB)
      {2, 64, 12, 24, 48, 3, 1, 1, 1, 1},   // W 24: rows of whole 16-byte vectors (halos from NCHW x)
      // few output channels from many: halo patches in blocks of channels (a dX conv's shape)
      {2, 64, 18, 20, 8, 3, 1, 2, 1, 1},    // Cin 64 -> 8, padding 2
      {1, 40, 13, 15, 24, 3, 1, 1, 1, 1},   // Cin 40: a last block past Cin
      {2, 48, 11, 11, 12, 5, 1, 2, 1, 2},   // 2 groups of 24, 5x5: blocks of 2 chunks
  };
  const char* tails[] = {"bias_relu", "gelu",  "tanh2_bias", "maxpool2", "avgpool2",
                         "chmin_tanh", "chsum", "gap",        "chmin_gap"};
  std::vector<ConvCase> out;
  int t = 0;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const ConvGeom& g : geoms) {
      std::string tail = tails[t++ % 9];
      if ((tail == "maxpool2" || tail == "avgpool2") && (g.oh() < 2 || g.ow() < 2)) tail = "tanh2_bias";
      out.push_back({p, g, tail});
    }
  return out;
}

// The graph compiled under a codegen config.
auto compile_with(Engine& engine, const Graph& g, const std::string& config) {
  CompileOptions opts;
  opts.config = config;
  return engine.compile(g, opts);
}

// 80 for "sm_80", 90 for "sm_90a"; 0 when unknown.
int sm_number(const std::string& arch) { return arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0; }

void run_cases(const std::string& config) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch) << arch.error().str();
  const int sm = sm_number(*arch);
  const bool forced = config.find("mainloop=mma") != std::string::npos;
  const bool ffma = config.find("mainloop=ffma") != std::string::npos;
  if (forced && sm < 80) GTEST_SKIP() << "mma.sync needs sm_80 or newer; the device is " << *arch;
  Engine engine;
  CompileOptions opts;
  opts.config = config;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  int failures = 0, mma = 0, explained_simt = 0, compiled = 0, index = 0, on_wgmma = 0, on_nchw = 0;
  const bool pingpong = config.find("wgmma_schedule=pingpong") != std::string::npos;
  const bool halo = config.find("conv_halo=1") != std::string::npos || config.find("conv_halo=2") != std::string::npos;
  const bool cluster = config.find("wgmma_cluster=2") != std::string::npos;
  int on_cluster = 0;
  for (const ConvCase& c : cases()) {
    if (failures >= 5) break;  // enough to debug; keep the log readable
    if (pingpong && c.precision == Precision::FP32) continue;  // 3xTF32 is cooperative only (a config error)
    ++index;
    auto g = build(c);
    ASSERT_TRUE(g) << label(c) << ": " << g.error().str();
    auto kernel = engine.compile(*g, opts);
    if (!kernel && halo && (kernel.error().message.find("conv_halo=1, but") != std::string::npos ||
                            kernel.error().message.find("conv_halo=1 applies to") != std::string::npos)) {
      --index;  // not a halo conv (3xTF32, mma.sync, a filter too large, ...): CodegenConvWgmma checks why
      continue;
    }
    if (!kernel && kernel.error().message.find("codegen config: conv_nchw=") != std::string::npos) {
      --index;  // 3xTF32 on wgmma: the NCHW producer writes no residuals (CodegenConvWgmma checks why)
      continue;
    }
    if (!kernel && cluster && kernel.error().message.find("not 3xTF32") != std::string::npos) {
      --index;  // 3xTF32 on wgmma runs without clusters (CodegenConvWgmma checks the message)
      continue;
    }
    if (!kernel && kernel.error().message.find("halo_prefetch=1, but") != std::string::npos) {
      --index;  // fp32 / tf32, odd W, several channel blocks: CodegenConvMma checks why
      continue;
    }
    if (!kernel) {
      ADD_FAILURE() << label(c) << " does not compile with config '" << config << "': " << kernel.error().str();
      ++failures;
      continue;
    }
    ++compiled;
    const std::string& name = (*kernel)->name();
    on_nchw += (*kernel)->program().source.find("fj::ConvNchwOperands<") != std::string::npos ||
               (*kernel)->program().source.find("each patch's halo written from NCHW x") != std::string::npos;
    on_cluster += (*kernel)->program().plan_text.find("2-block clusters sharing B") != std::string::npos;
    const bool on_mma = name.find("_mma_") != std::string::npos;
    mma += on_mma;
    if (ffma) {
      EXPECT_FALSE(on_mma) << label(c) << ": mainloop=ffma, but the kernel is " << name;
    } else if (forced || sm >= 80) {  // conv2d on sm_80+ runs mma.sync by default
      // By default, fp32 (3xTF32) may keep FFMA where the planner says why
      // (a short K, where FFMA is faster).
      const bool explained = !forced && !on_mma && c.precision == Precision::FP32 &&
                             (*kernel)->program().plan_text.find("not mma.sync") != std::string::npos;
      explained_simt += explained;
      // sm_90a: the TMA path's convs run wgmma (pass_mainloop says which and why not).
      const bool wgmma = sm == 90 && name.find("_wgmma_" + mma_kind(c.precision)) != std::string::npos;
      mma += wgmma && !forced;
      on_wgmma += wgmma;
      if (!explained && !(wgmma && !forced) && name.find("_mma_" + mma_kind(c.precision)) == std::string::npos) {
        ADD_FAILURE() << label(c) << ": expected the mma.sync " << mma_kind(c.precision) << " mainloop with config '"
                      << config << "' on " << *arch << ", got kernel " << name << "\n"
                      << (*kernel)->program().plan_text;
        ++failures;
      }
    }
    for (uint64_t seed : {1u, 2u}) {  // fresh inputs: the same function on any input
      check.seed = seed * 7919 + static_cast<uint64_t>(index);
      auto r = check_kernel(**kernel, *g, check);
      if (!r || !r->pass) {
        ADD_FAILURE() << label(c) << " (" << name << ", config '" << config << "', seed " << check.seed << "):\n"
                      << (r ? r->summary() : r.error().str()) << "\n"
                      << (*kernel)->program().plan_text;
        ++failures;
        break;
      }
    }
  }
  if (halo && sm == 90) EXPECT_GT(on_wgmma, 4) << "few cases ran on the halo path";
  if (cluster && sm == 90) EXPECT_GT(on_cluster, 8) << "few cases ran on 2-block clusters";
  if (config.find("conv_nchw=") != std::string::npos && sm == 90)
    EXPECT_GT(on_nchw, halo ? 4 : 8) << "few cases ran on the NCHW producer";
  if (failures < 5 && !ffma && sm >= 80)
    EXPECT_EQ(mma + explained_simt, compiled) << "not every conv ran on the mma.sync mainloop";
  if (!ffma && sm >= 80 && !halo) EXPECT_GT(mma, 0) << "no case ran on the mma.sync mainloop";
  if (config.empty() && sm == 90) EXPECT_GT(on_wgmma, 8) << "few cases ran on the wgmma TMA conv path";
}

TEST(GpuConvMma, DefaultPlansMatchReference) { run_cases(""); }
TEST(GpuConvMma, ForcedMmaMatchesReference) { run_cases("mainloop=mma"); }
TEST(GpuConvMma, SmallMmaTileMatchesReference) { run_cases("mainloop=mma,mma_tile=64x32x3"); }
// Convs with few channels per group take halo patches (conv_patch.cuh) by
// default; the im2col gather for them too, and patches on a small tile.
TEST(GpuConvMma, GatherMatchesReference) { run_cases("mainloop=mma,conv_patch=0"); }
TEST(GpuConvMma, SmallTileHaloPatchesMatchReference) { run_cases("mainloop=mma,mma_tile=64x16x2"); }
// Two cp.async halo buffers (fp32 / tf32 convs with several channel blocks).
TEST(GpuConvMma, PipelinedHaloPatchesMatchReference) { run_cases("mainloop=mma,halo_pipeline=1"); }
// Halo patches with the next tile's halo loaded into registers during the MMAs (3xTF32's default where it applies).
TEST(GpuConvMma, HaloPrefetchMatchesReference) { run_cases("mainloop=mma,halo_prefetch=1"); }
// Pools over halo patches staged through shared memory (fj::tile_pool), not reduced in registers.
TEST(GpuConvMma, StagedPatchPoolsMatchReference) { run_cases("mainloop=mma,pool_registers=0"); }
// 256 columns: 2 x 8 warps (512 threads), 32 row sharers in the reductions, wide pool chunks.
TEST(GpuConvMma, WideMmaTileMatchesReference) { run_cases("mainloop=mma,mma_tile=128x256x3"); }
// sm_90a's wgmma conv path with other schedules: ping-pong (64-row tiles, two
// consumers), and 64 x 64 tiles (16-bit x in place: 64 x 1 patches; pools
// that need taller patches take the NHWC staging). Elsewhere: the defaults.
TEST(GpuConvMma, WgmmaPingPongMatchesReference) { run_cases("wgmma_schedule=pingpong"); }
TEST(GpuConvMma, WgmmaSmallTileMatchesReference) { run_cases("wgmma_tile=64x64x4"); }
// wgmma convs whose producer warpgroup writes A from NCHW x (no NHWC staging of x; opt-in, conv_nchw=1).
TEST(GpuConvMma, WgmmaNchwProducerMatchesReference) { run_cases("conv_nchw=1"); }
// The 16-bit NHWC staging with the next tile's loads in flight during the current one's stores (opt-in).
TEST(GpuConvMma, WgmmaStagingPrefetchMatchesReference) { run_cases("staging_prefetch=1"); }
// ... two k-tiles of loads in flight a producer thread, ping-pong consumers.
TEST(GpuConvMma, WgmmaNchwProducerPingPongMatchesReference) { run_cases("conv_nchw=2,wgmma_schedule=pingpong"); }
// The resident-filter halo path (conv_wgmma_halo.cuh, conv_halo=1; the convs
// it cannot take are skipped): default tiles (64 rows: one consumer), and
// 128-row tiles (two consumers, 8-wide patches of 16 rows or 2 x 64).
TEST(GpuConvMma, WgmmaHaloMatchesReference) { run_cases("conv_halo=1"); }
TEST(GpuConvMma, WgmmaHaloTwoConsumersMatchReference) { run_cases("conv_halo=1,wgmma_tile=128x64x2"); }
// ... with each patch's halo written from NCHW x by the producer warpgroup (opt-in, conv_nchw=1; W a multiple of
// 16 bytes, the others skipped: CodegenConvWgmma checks why).
TEST(GpuConvMma, WgmmaHaloNchwMatchesReference) { run_cases("conv_halo=1,conv_nchw=1"); }
TEST(GpuConvMma, WgmmaHaloNchwTwoConsumersMatchReference) { run_cases("conv_halo=1,conv_nchw=1,wgmma_tile=128x64x2"); }
// ... with the filter streamed through a TMA ring, a halo per patch and channel block (conv_halo=2; opt-in), from
// NHWC boxes and from NCHW x.
TEST(GpuConvMma, WgmmaHaloStreamedFilterMatchesReference) { run_cases("conv_halo=2"); }
TEST(GpuConvMma, WgmmaHaloStreamedFilterNchwMatchesReference) { run_cases("conv_halo=2,conv_nchw=1"); }
// ... on ping-pong tiles: the consumers take alternate patches (opt-in).
TEST(GpuConvMma, WgmmaHaloPingPongMatchesReference) { run_cases("conv_halo=1,wgmma_schedule=pingpong"); }
TEST(GpuConvMma, WgmmaHaloNchwPingPongMatchesReference) { run_cases("conv_halo=1,conv_nchw=1,wgmma_schedule=pingpong"); }
TEST(GpuConvMma, WgmmaHaloStreamedPingPongMatchesReference) {
  run_cases("conv_halo=2,conv_nchw=1,wgmma_schedule=pingpong");
}
// 2-block clusters sharing the filter's k-tiles (opt-in): cooperative 128-row tiles (and 128 x 256), odd patch
// counts giving a block a zero-filled partner patch.
TEST(GpuConvMma, WgmmaClusterMatchesReference) { run_cases("wgmma_cluster=2"); }
TEST(GpuConvMma, WgmmaClusterWideTileMatchesReference) { run_cases("wgmma_tile=128x256x3,wgmma_cluster=2"); }
// The same cases on the SIMT mainloop: a failure in both points at the test, not at mma.sync.
TEST(GpuConvMma, FfmaMainloopStillMatchesReference) { run_cases("mainloop=ffma"); }

// NaN and Inf in x reach the output as in PyTorch (the fp64 reference): a NaN
// poisons every output whose window covers it (in every channel); an Inf gives
// +-Inf there (NaN where signs meet). 3xTF32 must not turn Inf into NaN by its
// hi/lo split (Inf - Inf).
TEST(GpuConvMma, NanAndInfPropagate) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch) << arch.error().str();
  const int sm = sm_number(*arch);
  Engine engine;
  // maxpool_bias: max_pool2d(c + bias) with bias +inf / -inf in channels 0 / 1
  // whose filters are positive, so -inf / +inf conv outputs meet them (inf -
  // inf = NaN in a window): the pool-first epilogue must still give NaN.
  for (Precision p : {Precision::FP32, Precision::BF16})
    for (const std::string config : {"", "mainloop=mma", "pool_first=0"})
      for (const std::string tail : {"gelu", "maxpool_bias"}) {
      if (!config.empty() && sm < 80) continue;
      const ConvCase c{p, {2, 8, 12, 12, 16, 3, 1, 1, 1, 1}, tail};
      const std::string what = label(c) + " config '" + config + "'";
      auto g = build(c);
      ASSERT_TRUE(g) << g.error().str();
      auto kernel = compile_with(engine, *g, config);
      ASSERT_TRUE(kernel) << what << ": " << kernel.error().str();
      if (!config.empty())
        EXPECT_NE((*kernel)->name().find("_mma_" + mma_kind(p)), std::string::npos) << (*kernel)->name();
      std::vector<HostTensor> inputs = make_random_inputs(*g, 99);
      const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
      auto at = [&](int64_t n, int64_t ch, int64_t h, int64_t w) {
        return ((n * c.g.cin + ch) * c.g.h + h) * c.g.w + w;
      };
      inputs[0].data[at(0, 2, 3, 4)] = nan;
      inputs[0].data[at(1, 5, 6, 6)] = inf;
      inputs[0].data[at(1, 0, 10, 1)] = -inf;
      inputs[0].data[at(0, 7, 11, 11)] = inf;  // a corner: windows with padding
      if (tail == "maxpool_bias") {
        for (int64_t i = 0; i < 2 * c.g.cin * c.g.k * c.g.k; ++i) inputs[1].data[i] = std::fabs(inputs[1].data[i]);
        inputs[3].data[0] = inf;
        inputs[3].data[1] = -inf;
      }
      std::vector<DeviceBuffer> buffers;
      std::vector<DevicePtr> in, out;
      for (const HostTensor& t : inputs) {
        std::vector<uint8_t> bytes = to_device_bytes(t);
        auto buf = DeviceBuffer::allocate(bytes.size());
        ASSERT_TRUE(buf.ok() && buf->upload(bytes.data(), bytes.size()).ok());
        in.push_back(buf->ptr());
        buffers.push_back(buf.take());
      }
      const TensorType& type = g->node(g->outputs[0].value).type;
      auto y = DeviceBuffer::allocate(static_cast<size_t>(type.numel()) * dtype_size(type.dtype));
      ASSERT_TRUE(y.ok() && y->fill_bytes(0xFF).ok());
      out.push_back(y->ptr());
      ASSERT_TRUE((*kernel)->launch(in, out).ok());
      ASSERT_TRUE(device_synchronize().ok());
      std::vector<uint8_t> bytes(y->size());
      ASSERT_TRUE(y->download(bytes.data(), bytes.size()).ok());
      HostTensor result = from_device_bytes(type, bytes.data());
      auto ref = evaluate_reference(*g, inputs);
      ASSERT_TRUE(ref.ok()) << ref.error().str();
      int64_t non_finite = 0, mismatches = 0;
      for (int64_t i = 0; i < type.numel(); ++i) {
        const double r = (*ref)[0][i];
        const float v = result.data[i];
        if (std::isfinite(r)) continue;
        ++non_finite;
        const bool ok = std::isnan(r) ? std::isnan(v) : static_cast<double>(v) == r;
        if (!ok && ++mismatches <= 5)
          ADD_FAILURE() << what << " (" << (*kernel)->name() << ") element " << i << ": " << v << ", reference " << r;
      }
      EXPECT_EQ(mismatches, 0) << what;
      EXPECT_GT(non_finite, 0) << what << ": the NaN and Inf inputs reached no output";
      Comparison cmp = compare_outputs(result.data.data(), ref->at(0).data(), type.numel(), p);
      EXPECT_TRUE(cmp.pass) << what << " (" << (*kernel)->name() << "): " << cmp.summary();
    }
}


// 16-bit halo patches (conv_patch.cuh) copy a channel's 4 or 8 bytes of pixels a load from a column aligned down
// to the vector (W a multiple of 4 or 2; padding shifts the patch in the halo); an x not aligned to the vector (a
// view one element into a larger buffer) takes the element path. Both match fp64, pool-first chains included;
// with halo_prefetch=1 (4-byte halos by vectors too) the same through registers held across tiles (128x32 tiles:
// 128 threads, whose two vector units a thread hold these halos).
TEST(GpuConvMma, PatchHaloVectorsAndUnalignedInput) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch) << arch.error().str();
  if (sm_number(*arch) < 80) GTEST_SKIP() << "mma.sync needs sm_80 or newer; the device is " << *arch;
  Engine engine;
  // {n, cin, h, w, cout, k, stride, pad, dil, groups}: W % 4 == 0 padded, W % 2 == 0, W odd, dilated
  const ConvCase cases[] = {{Precision::BF16, {2, 8, 20, 24, 16, 3, 1, 1, 1, 1}, "maxpool2"},
                            {Precision::F16, {1, 8, 13, 18, 12, 3, 1, 2, 1, 1}, "tanh2_bias"},
                            {Precision::BF16, {1, 6, 11, 15, 8, 3, 1, 0, 1, 1}, "maxpool_bias"},
                            {Precision::F16, {2, 12, 16, 20, 24, 3, 1, 2, 2, 1}, "gelu"},
                            // 4-byte halos: vectors with halo_prefetch=1 (the element copy without)
                            {Precision::TF32, {2, 8, 20, 24, 16, 3, 1, 1, 1, 1}, "maxpool2"},
                            {Precision::FP32, {1, 8, 13, 18, 12, 3, 1, 2, 1, 1}, "tanh2_bias"}};
  int prefetched = 0;
  for (const ConvCase& c : cases)
    for (const std::string config : {"mainloop=mma,conv_patch=1,halo_prefetch=0",  // the default tiles
                                     "mainloop=mma,conv_patch=1,halo_prefetch=1,mma_tile=128x32x3"})
    for (int64_t offset : {0, 1}) {
      const std::string what = label(c) + " '" + config + "' x offset " + std::to_string(offset);
      auto g = build(c);
      ASSERT_TRUE(g) << g.error().str();
      auto kernel = compile_with(engine, *g, config);
      if (!kernel && kernel.error().message.find("halo_prefetch=1, but") != std::string::npos)
        continue;  // an odd width, or more than two vector units a thread: CodegenConvMma checks why
      ASSERT_TRUE(kernel) << what << ": " << kernel.error().str();
      prefetched += (*kernel)->program().source.find("conv.accumulate_prefetched<") != std::string::npos;
      ASSERT_NE((*kernel)->name().find("_halo_"), std::string::npos) << what << ": " << (*kernel)->name();
      const std::vector<HostTensor> inputs = make_random_inputs(*g, 11);
      std::vector<DeviceBuffer> buffers;
      std::vector<DevicePtr> in;
      for (size_t i = 0; i < inputs.size(); ++i) {
        std::vector<uint8_t> bytes = to_device_bytes(inputs[i]);
        const size_t elem = bytes.size() / inputs[i].data.size();
        const size_t shift = i == 0 ? static_cast<size_t>(offset) * elem : 0;  // x: a view into a larger buffer
        bytes.insert(bytes.begin(), shift, 0x7F);  // NaN before the view
        auto buf = DeviceBuffer::allocate(bytes.size());
        ASSERT_TRUE(buf.ok() && buf->upload(bytes.data(), bytes.size()).ok()) << what;
        in.push_back(buf->ptr() + static_cast<DevicePtr>(shift));
        buffers.push_back(buf.take());
      }
      const TensorType& type = g->node(g->outputs[0].value).type;
      auto y = DeviceBuffer::allocate(static_cast<size_t>(type.numel()) * dtype_size(type.dtype));
      ASSERT_TRUE(y.ok() && y->fill_bytes(0xFF).ok()) << what;
      ASSERT_TRUE((*kernel)->launch(in, {y->ptr()}).ok()) << what;
      ASSERT_TRUE(device_synchronize().ok()) << what;
      std::vector<uint8_t> bytes(y->size());
      ASSERT_TRUE(y->download(bytes.data(), bytes.size()).ok()) << what;
      const HostTensor result = from_device_bytes(type, bytes.data());
      auto ref = evaluate_reference(*g, inputs);
      ASSERT_TRUE(ref.ok()) << ref.error().str();
      const Comparison cmp = compare_outputs(result.data.data(), ref->at(0).data(), type.numel(), c.precision);
      EXPECT_TRUE(cmp.pass) << what << " (" << (*kernel)->name() << "): " << cmp.summary();
    }
  EXPECT_GE(prefetched, 8) << "few cases ran with halo_prefetch=1";  // 4 specs x 2 offsets
}

// Why the runs epilogue's tests cannot run here (no device, or not sm_90a), or "".
std::string no_wgmma_device() {
  if (!gpu_available()) return "no CUDA device: " + gpu_unavailable_reason();
  auto arch = Engine::device_arch();
  if (!arch) return "no device arch: " + arch.error().str();
  if (sm_number(*arch) < 90) return "the runs epilogue is wgmma's (sm_90a); the device is " + *arch;
  return "";
}

// The runs epilogue (conv_wgmma_store.cuh) stores vectors of a channel's pixels where the output pointer is
// aligned to them, else element by element: outputs at an offset of one element (a view into a larger buffer)
// take the element path and match fp64 like the aligned ones; the elements around the view stay untouched.
TEST(GpuConvMma, RunsEpilogueWithUnalignedOutputs) {
  if (const std::string why = no_wgmma_device(); !why.empty()) GTEST_SKIP() << why;
  Engine engine;
  for (const char* name : {"conv_runs_bf16", "conv_runs_f16_ragged", "conv_runs_tf32_odd"})
    for (const char* config : {"", "wgmma_schedule=pingpong"})
      for (int64_t offset : {0, 1}) {
        const std::string what = std::string(name) + " '" + config + "' output offset " + std::to_string(offset);
        auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/" + name + ".yaml");
        ASSERT_TRUE(g) << g.error().str();
        auto kernel = compile_with(engine, *g, config);
        ASSERT_TRUE(kernel) << what << ": " << kernel.error().str();
        ASSERT_NE((*kernel)->program().source.find("fj::tile_nchw_store<"), std::string::npos) << what;
        const std::vector<HostTensor> inputs = make_random_inputs(*g, 5);
        std::vector<DeviceBuffer> buffers;
        std::vector<DevicePtr> in;
        for (const HostTensor& t : inputs) {
          std::vector<uint8_t> bytes = to_device_bytes(t);
          auto buf = DeviceBuffer::allocate(bytes.size());
          ASSERT_TRUE(buf.ok() && buf->upload(bytes.data(), bytes.size()).ok()) << what;
          in.push_back(buf->ptr());
          buffers.push_back(buf.take());
        }
        const TensorType& type = g->node(g->outputs[0].value).type;
        const size_t elem = dtype_size(type.dtype), bytes = static_cast<size_t>(type.numel()) * elem;
        auto y = DeviceBuffer::allocate(bytes + 2 * elem);  // the view, and one element on either side of it
        ASSERT_TRUE(y.ok() && y->fill_bytes(0xFF).ok()) << what;
        const DevicePtr out = y->ptr() + static_cast<DevicePtr>(offset * elem);
        ASSERT_TRUE((*kernel)->launch(in, {out}).ok()) << what;
        ASSERT_TRUE(device_synchronize().ok()) << what;
        std::vector<uint8_t> all(bytes + 2 * elem);
        ASSERT_TRUE(y->download(all.data(), all.size()).ok()) << what;
        for (size_t b = 0; b < static_cast<size_t>(offset) * elem; ++b) EXPECT_EQ(all[b], 0xFF) << what << ": byte " << b;
        for (size_t b = offset * elem + bytes; b < all.size(); ++b) EXPECT_EQ(all[b], 0xFF) << what << ": byte " << b;
        const HostTensor result = from_device_bytes(type, all.data() + offset * elem);
        auto ref = evaluate_reference(*g, inputs);
        ASSERT_TRUE(ref.ok()) << ref.error().str();
        const Comparison cmp = compare_outputs(result.data.data(), ref->at(0).data(), type.numel(), g->precision);
        EXPECT_TRUE(cmp.pass) << what << " (" << (*kernel)->name() << "): " << cmp.summary();
      }
}

// Several NCHW outputs through the runs epilogue (conv_runs=2: the conv output, as a training forward saves it,
// and relu(c) + bias), one tile_nchw_store after the other through the same staging; cooperative and ping-pong.
TEST(GpuConvMma, RunsEpilogueTwoOutputsMatchReference) {
  if (const std::string why = no_wgmma_device(); !why.empty()) GTEST_SKIP() << why;
  Engine engine;
  // {n, cin, h, w, cout, k, stride, pad, dil, groups}
  const ConvGeom geoms[] = {{2, 64, 19, 23, 72, 3, 1, 1, 1, 1}, {1, 64, 10, 36, 200, 3, 1, 0, 1, 1},
                            {2, 64, 16, 16, 128, 3, 1, 1, 1, 1}};
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32})
    for (const ConvGeom& geo : geoms)
      for (const std::string config : {"conv_runs=2", "conv_runs=2,wgmma_schedule=pingpong"}) {
        const ConvCase c{p, geo, "two_outputs"};
        const std::string what = label(c) + " config '" + config + "'";
        auto g = build(c);
        ASSERT_TRUE(g) << g.error().str();
        auto kernel = compile_with(engine, *g, config);
        ASSERT_TRUE(kernel) << what << ": " << kernel.error().str();
        const std::string& src = (*kernel)->program().source;
        size_t calls = 0;
        for (size_t at = src.find("fj::tile_nchw_store<"); at != std::string::npos; at = src.find("fj::tile_nchw_store<", at + 1))
          ++calls;
        EXPECT_EQ(calls, 2u) << what << "\n" << (*kernel)->program().plan_text;
        CheckOptions check;
        check.time = false;
        check.samples = 20000;
        check.seed = 31;
        auto r = check_kernel(**kernel, *g, check);
        ASSERT_TRUE(r) << what << ": " << r.error().str();
        EXPECT_TRUE(r->pass) << what << " (" << (*kernel)->name() << "):\n" << r->summary();
      }
}
}  // namespace
}  // namespace fusejit
