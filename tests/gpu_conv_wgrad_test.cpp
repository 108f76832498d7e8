// GPU: conv2d_weight_grad (templates/conv_wgrad.cuh; conv_wgmma.cuh's
// WgradOperands on wgmma) against fp64 in every precision, on the default plan (split-K; wgmma where it applies on
// sm_90a, else mma.sync), a small forced tile,
// without split-K, with an uneven split, and on the SIMT mainloop (every other
// case with an epilogue, tanh(dW * s) * 2, as a second output); outputs
// NaN-poisoned, two seeds each (check_kernel). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "compiler/program.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "tests/mma_kinds.h"
#include "tests/wgrad_cases.h"

namespace fusejit {
namespace {

using test_util::WgradGeom;

std::string label(Precision p, const WgradGeom& g, const std::string& config) {
  return std::string(precision_name(p)) + " " + g.str() + " '" + config + "'";
}

void run(const std::string& config, const std::vector<WgradGeom>& geoms = test_util::wgrad_geoms()) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  CompileOptions opts;
  opts.config = config;
  CheckOptions check;
  check.time = false;
  int failures = 0, index = 0;
  const bool wgmma = config.find("mainloop=wgmma") != std::string::npos;
  for (Precision p : test_util::kPrecisions)
    for (const WgradGeom& geo : geoms) {
      if (failures >= 5) return;
      ++index;
      auto g = test_util::wgrad_graph(geo, p, /*epilogue=*/index % 2 == 0);
      ASSERT_TRUE(g) << g.error().str();
      auto kernel = engine.compile(*g, opts);
      if (!kernel && kernel.error().message.find("wgrad_nhwc=1, but") != std::string::npos) continue;  // not eligible
      if (!kernel && wgmma && (kernel.error().message.find("16-bit only") != std::string::npos ||
                               kernel.error().message.find("wgmma_swap_ab=1, but") != std::string::npos ||
                               kernel.error().message.find("x's rows of") != std::string::npos ||
                               kernel.error().message.find("wgrad_flat=1 takes") != std::string::npos))
        continue;  // not the precision (or x's rows) the config's wgmma dW takes
      if (!kernel) {
        ADD_FAILURE() << label(p, geo, config) << " does not compile: " << kernel.error().str();
        ++failures;
        continue;
      }
      const bool simt = config.find("mainloop=ffma") != std::string::npos;
      const std::string& name = (*kernel)->name();
      const bool on_wgmma = name.find("_wgmma_" + test_util::mma_kind(p)) != std::string::npos;
      const bool on_mma = name.find("_mma_" + test_util::mma_kind(p)) != std::string::npos;
      // (the default: wgmma where the dW takes it on sm_90a, else mma.sync)
      EXPECT_TRUE(simt ? !on_wgmma && !on_mma : wgmma ? on_wgmma : on_wgmma || on_mma)
          << label(p, geo, config) << ": kernel " << name;
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
// The other B of each precision: 16-bit gathered from NCHW, fp32 from x in NHWC (the defaults: 16-bit from
// NHWC where Cin / groups is whole 16-byte chunks, fp32 gathered).
TEST(GpuConvWgrad, NchwGatherMatchesReference) { run("wgrad_nhwc=0"); }
TEST(GpuConvWgrad, NhwcMatchesReference) { run("wgrad_nhwc=1"); }
// The wgmma dW (the default on sm_90a where it applies; 16-bit, the geometries it takes): grad's 4-D boxes (in
// place, or copied to rows padded with zeros), x in NHWC as N-major B, split-K over the pixels (the default split
// and an uneven one).
TEST(GpuConvWgrad, WgmmaMatchesReference) { run("mainloop=wgmma", test_util::wgrad_wgmma_geoms()); }
TEST(GpuConvWgrad, WgmmaUnevenSplitsMatchReference) { run("mainloop=wgmma,split_k=5", test_util::wgrad_wgmma_geoms()); }
// The tf32 dW on the swap-AB tile (wgmma_swap_ab=1, opt-in): x read in place into registers at each tap's shift
// (Cin 64, KW 3 unpadded or dilated: 192 columns over one box of x; else, and with 128-column tiles, a box per
// consumer).
TEST(GpuConvWgrad, SwapAbTf32MatchesReference) {
  run("mainloop=wgmma,wgmma_swap_ab=1", test_util::wgrad_wgmma_geoms());
}
TEST(GpuConvWgrad, SwapAbTf32UnevenSplitsMatchReference) {
  run("mainloop=wgmma,wgmma_swap_ab=1,split_k=5", test_util::wgrad_wgmma_geoms());
}
TEST(GpuConvWgrad, SwapAbTf32BoxPerConsumerMatchesReference) {
  run("mainloop=wgmma,wgmma_swap_ab=1,wgmma_tile=128x128x6", test_util::wgrad_wgmma_geoms());
}
// ... and over grad's planes flattened (wgrad_flat=1, opt-in: k-tiles that cross rows, x's second box, no copy).
TEST(GpuConvWgrad, SwapAbTf32FlatPlanesMatchReference) {
  run("mainloop=wgmma,wgmma_swap_ab=1,wgrad_flat=1", test_util::wgrad_wgmma_geoms());
}

}  // namespace
}  // namespace fusejit
