// GPU: conv2d_weight_grad (templates/conv_wgrad.cuh) against fp64 in every
// precision, on the default plan (mma.sync, split-K), a small forced tile,
// without split-K, with an uneven split, and on the SIMT mainloop; outputs
// NaN-poisoned, two seeds each (check_kernel). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "compiler/program.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/mma_kinds.h"

namespace fusejit {
namespace {

struct WgradGeom {
  int64_t n, cin, h, w, cout, k, stride, pad, dil, groups;
  int64_t out(int64_t in) const { return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1; }
};

const WgradGeom kGeoms[] = {
    {4, 8, 34, 34, 64, 3, 1, 0, 1, 1},    // seed 3, smaller: 72 im2col rows of a 128-row tile
    {2, 16, 18, 18, 32, 3, 1, 1, 1, 1},   // seed 1, smaller
    {3, 8, 17, 15, 6, 3, 2, 1, 2, 2},     // strided, dilated, 2 groups, odd planes (16-bit: element copies)
    {2, 3, 33, 31, 20, 7, 2, 3, 1, 1},    // a 7x7 stem
    {1, 64, 14, 14, 130, 3, 1, 1, 1, 1},  // 576 x 130: tiles both ways
    {2, 16, 9, 11, 8, 1, 1, 0, 1, 4},     // 1x1, 4 groups
    {8, 12, 30, 30, 24, 5, 1, 2, 1, 1},   // 5x5, K = 7200 pixels: many k-tiles per split
};

std::string label(Precision p, const WgradGeom& g, const std::string& config) {
  return std::string(precision_name(p)) + " x[" + std::to_string(g.n) + "," + std::to_string(g.cin) + "," +
         std::to_string(g.h) + "," + std::to_string(g.w) + "] -> " + std::to_string(g.cout) + " k" +
         std::to_string(g.k) + " s" + std::to_string(g.stride) + " p" + std::to_string(g.pad) + " d" +
         std::to_string(g.dil) + " g" + std::to_string(g.groups) + " '" + config + "'";
}

void run(const std::string& config) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CompileOptions opts;
  opts.config = config;
  CheckOptions check;
  check.time = false;
  int failures = 0, index = 0;
  for (Precision p : test_util::kPrecisions)
    for (const WgradGeom& geo : kGeoms) {
      if (failures >= 5) return;
      ++index;
      GraphBuilder b(p, "wgrad");
      auto x = b.input("x", {geo.n, geo.cin, geo.h, geo.w});
      auto dz = b.input("dz", {geo.n, geo.cout, geo.out(geo.h), geo.out(geo.w)});
      Conv2dOptions o;
      o.stride = {geo.stride, geo.stride};
      o.padding = {geo.pad, geo.pad};
      o.dilation = {geo.dil, geo.dil};
      o.groups = geo.groups;
      b.output("dw", b.conv2d_weight_grad(x, dz, {geo.k, geo.k}, o));
      auto g = b.build();
      ASSERT_TRUE(g) << g.error().str();
      auto kernel = engine.compile(*g, opts);
      if (!kernel) {
        ADD_FAILURE() << label(p, geo, config) << " does not compile: " << kernel.error().str();
        ++failures;
        continue;
      }
      const bool simt = config.find("mainloop=ffma") != std::string::npos;
      EXPECT_EQ((*kernel)->name().find("_mma_" + test_util::mma_kind(p)) != std::string::npos, !simt)
          << label(p, geo, config) << ": kernel " << (*kernel)->name();
      for (uint64_t seed : {1u, 2u}) {
        check.seed = seed * 7919 + static_cast<uint64_t>(index);
        auto r = check_kernel(**kernel, *g, check);
        if (!r || !r->pass) {
          ADD_FAILURE() << label(p, geo, config) << " (" << (*kernel)->name() << ", seed " << check.seed << "):\n"
                        << (r ? r->summary() : r.error().str()) << "\n"
                        << (*kernel)->program().plan_text;
          ++failures;
          break;
        }
      }
    }
}

TEST(GpuConvWgrad, DefaultPlansMatchReference) { run(""); }
TEST(GpuConvWgrad, SmallTileMatchesReference) { run("mma_tile=64x32x3"); }
TEST(GpuConvWgrad, OneSplitMatchesReference) { run("split_k=1"); }
TEST(GpuConvWgrad, UnevenSplitsMatchReference) { run("split_k=7"); }
TEST(GpuConvWgrad, SimtMatchesReference) { run("mainloop=ffma"); }

}  // namespace
}  // namespace fusejit
