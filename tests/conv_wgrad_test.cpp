// conv2d_weight_grad (no GPU needed): its shape, the fp64 reference against a
// scatter-order sum written here, the plan (mma.sync implicit GEMM over the
// output pixels, split-K, rows past M skipped), NVRTC CUBINs of every
// precision and geometry for sm_80 and sm_90a (and SIMT), and the backward
// program: one conv2d_weight_grad stage by default, im2col + linear for the
// CPU backend (ConvWgrad::Im2col), the same gradient in fp64 either way.
#include <gtest/gtest.h>

#include <tuple>

#include <cmath>

#include "compiler/codegen.h"
#include "fusejit/backward.h"
#include "fusejit/builder.h"
#include "fusejit/reference.h"
#include "tests/compile_jobs.h"
#include "tests/gradient_check.h"
#include "tests/wgrad_cases.h"
#include "tests/mma_kinds.h"

namespace fusejit {
namespace {

using test_util::wgrad_geoms;
using test_util::wgrad_graph;
using test_util::WgradGeom;

TEST(ConvWgrad, ShapeIsTheWeights) {
  for (const WgradGeom& g : wgrad_geoms()) {
    auto graph = wgrad_graph(g, Precision::FP32);
    ASSERT_TRUE(graph) << graph.error().str();
    EXPECT_EQ(graph->node(graph->outputs[0].value).type.shape, (Shape{g.cout, g.cin / g.groups, g.kh, g.kw}));
  }
}

// dW by scattering each product to its weight (the reference gathers per weight).
std::vector<double> scatter_wgrad(const WgradGeom& g, const std::vector<float>& x, const std::vector<float>& dz) {
  const int64_t cg = g.cin / g.groups, og = g.cout / g.groups;
  std::vector<double> dw(static_cast<size_t>(g.cout * cg * g.kh * g.kw), 0.0);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t o = 0; o < g.cout; ++o)
      for (int64_t y = 0; y < g.oh(); ++y)
        for (int64_t xo = 0; xo < g.ow(); ++xo) {
          const double d = dz[static_cast<size_t>(((b * g.cout + o) * g.oh() + y) * g.ow() + xo)];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t iy = y * g.sh - g.ph + i * g.dh, ix = xo * g.sw - g.pw + j * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const int64_t ci = o / og * cg + c;
                dw[static_cast<size_t>(((o * cg + c) * g.kh + i) * g.kw + j)] +=
                    d * x[static_cast<size_t>(((b * g.cin + ci) * g.h + iy) * g.w + ix)];
              }
        }
  return dw;
}

TEST(ConvWgrad, ReferenceMatchesAScatterSum) {
  for (const WgradGeom& g : wgrad_geoms()) {
    auto graph = wgrad_graph(g, Precision::FP32);
    ASSERT_TRUE(graph) << graph.error().str();
    const std::vector<HostTensor> in = make_random_inputs(*graph, 11);
    auto ref = evaluate_reference(*graph, in);
    ASSERT_TRUE(ref) << ref.error().str();
    const std::vector<double> want = scatter_wgrad(g, in[0].data, in[1].data);
    ASSERT_EQ((*ref)[0].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR((*ref)[0][i], want[i], 1e-9 * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

TEST(ConvWgrad, PlansAnImplicitGemmOnMmaSync) {
  auto graph = wgrad_graph(wgrad_geoms()[0], Precision::FP32);
  ASSERT_TRUE(graph) << graph.error().str();
  auto bf16 = wgrad_graph(wgrad_geoms()[0], Precision::BF16);
  ASSERT_TRUE(bf16) << bf16.error().str();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    // fp32 operands: x's im2col rows gathered from NCHW: no staging kernel, no im2col buffer.
    auto prog = generate_program(*graph, {arch, ""});
    ASSERT_TRUE(prog) << prog.error().str();
    EXPECT_EQ(prog->launches.size(), 1u) << prog->plan_text;
    EXPECT_NE(prog->plan_text.find("fj_conv2d_weight_grad_mma_f32x3_k3"), std::string::npos) << prog->plan_text;
    EXPECT_NE(prog->plan_text.find("no im2col buffer"), std::string::npos) << prog->plan_text;
    EXPECT_NE(prog->plan_text.find("split-K"), std::string::npos) << prog->plan_text;
    EXPECT_NE(prog->source.find("fj::MmaWgradCols<"), std::string::npos);
    // 16-bit with Cin = 8 (whole 16-byte chunks of channels), or fp32 with wgrad_nhwc=1: x staged to NHWC first.
    for (auto [g, config, name] : {std::tuple{&*bf16, "", "fj_conv2d_weight_grad_mma_bf16_nhwc_k3"},
                                   std::tuple{&*graph, "wgrad_nhwc=1", "fj_conv2d_weight_grad_mma_f32x3_nhwc_k3"}}) {
      auto staged = generate_program(*g, {arch, config});
      ASSERT_TRUE(staged) << staged.error().str();
      ASSERT_EQ(staged->launches.size(), 2u) << staged->plan_text;
      EXPECT_TRUE(staged->launches[0].operand_staging) << staged->plan_text;
      EXPECT_EQ(staged->launches[0].kernel, "fj_x_nhwc");
      EXPECT_NE(staged->plan_text.find(name), std::string::npos) << staged->plan_text;
      EXPECT_NE(staged->plan_text.find("x in NHWC for the dW gather"), std::string::npos) << staged->plan_text;
      EXPECT_NE(staged->source.find("fj::MmaWgradNhwc<"), std::string::npos);
    }
    auto gather = generate_program(*bf16, {arch, "wgrad_nhwc=0"});
    ASSERT_TRUE(gather) << gather.error().str();
    EXPECT_EQ(gather->launches.size(), 1u) << gather->plan_text;
    EXPECT_NE(gather->source.find("fj::MmaWgradCols<"), std::string::npos) << gather->plan_text;
  }
  auto simt = generate_program(*graph, {"sm_80", "mainloop=ffma"});
  ASSERT_TRUE(simt) << simt.error().str();
  EXPECT_NE(simt->source.find("fj::WgradCols<"), std::string::npos) << simt->plan_text;
  auto wgmma = generate_program(*graph, {"sm_90a", "mainloop=wgmma"});
  ASSERT_FALSE(wgmma);
  // (fp32: the wgmma dW takes 16-bit dWs only; WgmmaCompilesForSm90a has the rest)
  EXPECT_NE(wgmma.error().message.find("16-bit only"), std::string::npos) << wgmma.error().str();
}

// Where x in NHWC cannot be read in 16-byte chunks of one tap's channels: the gather, and a clear error if forced.
TEST(ConvWgrad, NhwcNeedsWholeChunksOfChannels) {
  const WgradGeom geo = wgrad_geoms()[3];  // 2 groups of 4 channels: whole fp32 chunks, half a 16-bit one
  auto bf16 = wgrad_graph(geo, Precision::BF16);
  ASSERT_TRUE(bf16) << bf16.error().str();
  auto prog = generate_program(*bf16, {"sm_90a", ""});
  ASSERT_TRUE(prog) << prog.error().str();
  EXPECT_EQ(prog->launches.size(), 1u) << prog->plan_text;
  EXPECT_NE(prog->plan_text.find("not from x in NHWC: Cin/groups=4 is not a multiple of 8"), std::string::npos)
      << prog->plan_text;
  auto forced = generate_program(*bf16, {"sm_90a", "wgrad_nhwc=1"});
  ASSERT_FALSE(forced);
  EXPECT_NE(forced.error().message.find("wgrad_nhwc=1, but Cin/groups=4"), std::string::npos) << forced.error().str();
  auto fp32 = wgrad_graph(geo, Precision::FP32);
  ASSERT_TRUE(fp32) << fp32.error().str();
  auto staged = generate_program(*fp32, {"sm_90a", "wgrad_nhwc=1"});
  ASSERT_TRUE(staged) << staged.error().str();
  EXPECT_NE(staged->source.find("fj::MmaWgradNhwc<"), std::string::npos) << staged->plan_text;
  auto narrow = generate_program(*fp32, {"sm_90a", "mma_tile=64x16x3,wgrad_nhwc=1"});
  ASSERT_FALSE(narrow);
  EXPECT_NE(narrow.error().message.find("narrower than 32 columns"), std::string::npos) << narrow.error().str();
}

// The split fills whole waves of the blocks an SM holds (a partial last wave takes a full one's time): seed 1's dW
// (5 tiles of 128x128 at one 128 KiB block an SM in fp32 / tf32) and seed 3's (one 64x128 tile, 2 blocks an SM in
// tf32 / bf16, 1 in 3xTF32).
TEST(ConvWgrad, SplitKFillsWholeWaves) {
  const WgradGeom seed1{128, 64, 128, 128, 128, 3, 3, 1, 1, 0, 0, 1, 1, 1};
  const WgradGeom seed3{128, 8, 256, 256, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1};
  for (const auto& [geo, name] : {std::pair{seed1, "seed 1"}, std::pair{seed3, "seed 3"}})
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16}) {
      SCOPED_TRACE(::testing::Message() << name << " " << precision_name(p));
      auto graph = wgrad_graph(geo, p);
      ASSERT_TRUE(graph) << graph.error().str();
      auto prog = generate_program(*graph, {"sm_90a", "mainloop=mma"});  // (seed 1's 16-bit / tf32: wgmma by default)
      ASSERT_TRUE(prog) << prog.error().str();
      const auto& l = prog->launches.back();  // the GEMM (after the NHWC staging kernel)
      const int64_t blocks = int64_t{l.grid[0]} * l.grid[1] * l.grid[2];
      const int64_t per_sm = std::min<int64_t>(228 * 1024 / (l.shared_bytes + 1024), 2048 / l.block[0]);
      const int64_t slots = 132 * std::min<int64_t>(per_sm, p == Precision::FP32 || l.block[0] > 256 ? 1 : 2);
      EXPECT_GE(l.grid[2], 16u) << prog->plan_text;  // split-K
      EXPECT_GE(blocks % slots == 0 ? slots : blocks % slots, slots * 9 / 10)
          << blocks << " blocks, " << slots << " a wave\n" << prog->plan_text;
    }
}

TEST(ConvWgrad, EveryPrecisionAndGeometryCompilesWithNvrtc) {
  std::vector<test_util::CompileJob> jobs;
  for (Precision p : test_util::kPrecisions)
    for (const WgradGeom& g : wgrad_geoms()) {
      auto graph = wgrad_graph(g, p, /*epilogue=*/(&g - wgrad_geoms().data()) % 2 == 1);
      ASSERT_TRUE(graph) << graph.error().str();
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "wgrad_nhwc=0", "wgrad_nhwc=1", "mainloop=mma,mma_tile=64x32x3", "mainloop=ffma"}) {
          if (std::string(config) == "mainloop=ffma" && std::string(arch) == "sm_90a") continue;
          auto prog = generate_program(*graph, {arch, config});
          if (!prog && std::string(config) == "wgrad_nhwc=1" &&
              prog.error().message.find("Cin/groups") != std::string::npos)
            continue;  // channels not in whole 16-byte chunks (NhwcNeedsWholeChunksOfChannels)
          ASSERT_TRUE(prog) << precision_name(p) << " " << arch << " '" << config << "': " << prog.error().str();
          jobs.push_back({std::string(precision_name(p)) + " " + g.str() + " '" + config + "'",
                          arch, prog->launches.back().kernel, prog->source});
        }
    }
  const std::vector<std::string> failures = test_util::compile_all(std::move(jobs));
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// The wgmma dW (the default on sm_90a where it applies): grad's 4-D boxes (in place, or from a copy with rows
// padded with zeros to 16 bytes), x in NHWC as N-major B; every eligible geometry compiles for sm_90a in bf16 and
// f16; the others get errors that say why on request and mma.sync by default.
TEST(ConvWgrad, WgmmaCompilesForSm90a) {
  std::vector<test_util::CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::F16})
    for (const WgradGeom& g : test_util::wgrad_wgmma_geoms()) {
      auto graph = wgrad_graph(g, p, /*epilogue=*/(&g - test_util::wgrad_wgmma_geoms().data()) % 2 == 1);
      ASSERT_TRUE(graph) << graph.error().str();
      const std::string label = std::string(precision_name(p)) + " " + g.str();
      auto prog = generate_program(*graph, {"sm_90a", ""});
      ASSERT_TRUE(prog) << label << ": " << prog.error().str();
      const bool padded = g.ow() % 8 != 0;
      EXPECT_NE(prog->source.find("fj::WgradOperands<Tile, ConvShape>"), std::string::npos) << label;
      EXPECT_NE(prog->source.find("/*kBNMajor=*/true"), std::string::npos) << label;
      const auto& maps = prog->launches.back().tensor_maps;
      ASSERT_EQ(maps.size(), 1u + static_cast<size_t>(g.kw)) << label << ": grad, then a view of x per kernel column";
      const int64_t pitch = (g.ow() + 7) / 8 * 8;  // (the copy's padding is zeros: no extent on TMA's inner dim)
      EXPECT_EQ(maps[0].image, (std::array<int64_t, 4>{pitch, g.oh(), g.cout, g.n})) << label;
      EXPECT_EQ(maps[0].image_extent, (std::array<int64_t, 4>{})) << label;
      EXPECT_EQ(maps[0].buffer.kind, padded ? BufferKind::Scratch : BufferKind::Input) << label;
      EXPECT_EQ(maps[0].image_box[2], g.cout <= 64 ? 64 : 128) << label << ": BM channels";
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const TensorMapSpec& x = maps[static_cast<size_t>(1 + kw)];
        EXPECT_EQ(x.image, (std::array<int64_t, 4>{g.cin, g.w, g.h, g.n})) << label << ": x in NHWC";
        EXPECT_EQ(x.buffer.kind, BufferKind::Scratch) << label;
        // W ends after the last pixel output column OW - 1 reads through kernel column kw
        EXPECT_EQ(x.image_extent[1], std::min(g.w, g.ow() + kw * g.dw - g.pw)) << label << " kw " << kw;
      }
      ASSERT_EQ(prog->launches.size(), 2u) << label << ": the staging (x in NHWC, grad's rows), then the dW";
      EXPECT_EQ(prog->launches[0].kernel, padded ? "fj_x_nhwc_grad_rows_padded" : "fj_x_nhwc") << label;
      jobs.push_back({label + " wgmma", "sm_90a", prog->launches.back().kernel, prog->source});
      jobs.push_back({label + " staging", "sm_90a", prog->launches[0].kernel, prog->source});
    }
  for (const auto& [what, geo, p, config] : std::vector<std::tuple<std::string, WgradGeom, Precision, std::string>>{
           {"16-bit only", {2, 128, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}, Precision::TF32, ""},  // (Cin 64: swap-AB)
           {"16-bit only", {2, 64, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}, Precision::FP32, ""},
           {"wgrad_nhwc=0 (the wgmma dW reads x in NHWC)", {2, 64, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
            Precision::BF16, "wgrad_nhwc=0"},
           {"strided", {2, 64, 16, 128, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1}, Precision::BF16, ""},
           {"is not a multiple of 64 (B's", {2, 32, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}, Precision::BF16, ""},
           {"one group", {2, 128, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2}, Precision::BF16, ""}}) {
    auto graph = wgrad_graph(geo, p);
    ASSERT_TRUE(graph) << graph.error().str();
    const std::string on_request = "mainloop=wgmma" + (config.empty() ? "" : "," + config);
    auto prog = generate_program(*graph, {"sm_90a", on_request});
    ASSERT_FALSE(prog.ok()) << what;
    EXPECT_NE(prog.error().message.find("mainloop=wgmma, but"), std::string::npos) << prog.error().message;
    EXPECT_NE(prog.error().message.find(what), std::string::npos) << prog.error().message;
    auto dflt = generate_program(*graph, {"sm_90a", config});  // by default: mma.sync
    ASSERT_TRUE(dflt.ok()) << dflt.error().str();
    EXPECT_EQ(dflt->source.find("WgradOperands"), std::string::npos) << what;
  }
  const std::vector<std::string> failures = test_util::compile_all(std::move(jobs));
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// The tf32 dW on the swap-AB wgmma tile (wgmma_swap_ab=1, the default where one box of x serves a kernel row's taps;
// templates/wgrad_swap_ab.cuh): grad's boxes of 32 pixels as wgmma's B, x read in place (rows of 36 pixels,
// unswizzled) into registers as wgmma's A; every eligible geometry compiles for sm_90a; the others get errors that
// say why.
TEST(ConvWgrad, SwapAbTf32CompilesForSm90a) {
  std::vector<test_util::CompileJob> jobs;
  for (const WgradGeom& g : test_util::wgrad_wgmma_geoms()) {
    if (g.w % 4) continue;  // x's rows not a TMA stride (below)
    auto graph = wgrad_graph(g, Precision::TF32, /*epilogue=*/(&g - test_util::wgrad_wgmma_geoms().data()) % 2 == 1);
    ASSERT_TRUE(graph) << graph.error().str();
    const std::string label = "tf32 " + g.str();
    auto prog = generate_program(*graph, {"sm_90a", "wgmma_swap_ab=1,wgrad_flat=0"});
    ASSERT_TRUE(prog) << label << ": " << prog.error().str();
    EXPECT_NE(prog->source.find("fj::WgradSwapOperands<Tile, ConvShape>{maps}"), std::string::npos) << label;
    // one kernel row's taps (Cin 64, KW 3, shifts within a box's 4 extra pixels): 192 columns over one box of x
    // (a box's rows: 36 pixels where the taps' shifts reach at most 4 past its start, 44 up to 12)
    const int first = -static_cast<int>(g.pw), aligned = first >= 0 ? first & ~3 : -((3 - first) & ~3);
    const int reach = first + 2 * static_cast<int>(g.dw) - aligned;
    const bool shared = g.cin == 64 && g.kw == 3 && reach <= 12 && g.cout <= 128;
    const int box = shared && reach > 4 ? 44 : 36;
    EXPECT_NE(prog->source.find(shared ? "/*kSwapAB=*/true, /*kBRowBytes=*/" + std::to_string(4 * box) +
                                             ", /*kBRows=*/64>"
                                       : "/*kSwapAB=*/true, /*kBRowBytes=*/144>"),
              std::string::npos)
        << label << (shared ? ": one box of x" : ": a box per consumer");
    EXPECT_NE(prog->plan_text.find("swap-AB"), std::string::npos) << prog->plan_text;
    const auto& maps = prog->launches.back().tensor_maps;
    ASSERT_EQ(maps.size(), 2u) << label << ": grad and x";
    const bool padded = g.ow() % 4 != 0;
    EXPECT_EQ(maps[0].image, (std::array<int64_t, 4>{(g.ow() + 3) / 4 * 4, g.oh(), g.cout, g.n})) << label;
    EXPECT_EQ(maps[0].image_box[0], 32) << label;
    EXPECT_EQ(maps[0].buffer.kind, padded ? BufferKind::Scratch : BufferKind::Input) << label;
    EXPECT_EQ(maps[1].image, (std::array<int64_t, 4>{g.w, g.h, g.cin, g.n})) << label << ": x in place";
    EXPECT_EQ(maps[1].image_box, (std::array<int, 4>{box, 1, 64, 1})) << label;
    EXPECT_EQ(maps[1].buffer.kind, BufferKind::Input) << label;
    EXPECT_FALSE(maps[1].swizzle128) << label;
    ASSERT_EQ(prog->launches.size(), padded ? 2u : 1u) << label << ": grad's padded rows (where OW needs them), the dW";
    if (padded) EXPECT_EQ(prog->launches[0].kernel, "fj_grad_rows_padded") << label;
    jobs.push_back({label + " swap-AB", "sm_90a", prog->launches.back().kernel, prog->source});
    const bool flat_fits = shared && (g.oh() * g.ow()) % 4 == 0 && g.dw <= 4;
    if (shared) {  // the default (measured; mma.sync elsewhere, below): grad's planes flattened where its rows need a copy
      auto dflt = generate_program(*graph, {"sm_90a", ""});
      ASSERT_TRUE(dflt) << label << ": " << dflt.error().str();
      const bool flat = flat_fits && padded;
      EXPECT_NE(dflt->source.find(flat ? std::string("/*kBRowBytes=*/176, /*kBRows=*/128>")
                                       : "/*kBRowBytes=*/" + std::to_string(4 * box) + ", /*kBRows=*/64>"),
                std::string::npos)
          << label << ": " << dflt->plan_text;
      EXPECT_EQ(dflt->launches.size(), padded && !flat ? 2u : 1u) << label;
    }
    if (flat_fits) {  // grad's planes flattened (wgrad_flat=1): no padded copy
      auto flat = generate_program(*graph, {"sm_90a", "wgmma_swap_ab=1,wgrad_flat=1"});
      ASSERT_TRUE(flat) << label << ": " << flat.error().str();
      EXPECT_NE(flat->source.find("fj::WgradFlatSwapOperands<Tile, ConvShape>{maps}"), std::string::npos) << label;
      EXPECT_NE(flat->source.find("/*kBRowBytes=*/176, /*kBRows=*/128>"), std::string::npos) << label;
      ASSERT_EQ(flat->launches.size(), 1u) << label << ": grad read in place";
      const auto& fm = flat->launches[0].tensor_maps;
      ASSERT_EQ(fm.size(), 2u) << label;
      EXPECT_EQ(fm[0].image, (std::array<int64_t, 4>{g.oh() * g.ow(), 1, g.cout, g.n})) << label;
      EXPECT_EQ(fm[0].buffer.kind, BufferKind::Input) << label;
      EXPECT_EQ(fm[1].image_box, (std::array<int, 4>{44, 1, 64, 1})) << label;
      jobs.push_back({label + " swap-AB, flattened grad", "sm_90a", flat->launches[0].kernel, flat->source});
    }
    if (shared) {  // the same geometry on 128-column tiles: a box of x per consumer
      auto boxes = generate_program(*graph, {"sm_90a", "wgmma_swap_ab=1,wgmma_tile=128x128x6"});
      ASSERT_TRUE(boxes) << label << ": " << boxes.error().str();
      EXPECT_NE(boxes->source.find("/*kSwapAB=*/true, /*kBRowBytes=*/144>"), std::string::npos) << label;
      jobs.push_back({label + " swap-AB, a box per consumer", "sm_90a", boxes->launches.back().kernel, boxes->source});
    }
    if (padded) jobs.push_back({label + " staging", "sm_90a", prog->launches[0].kernel, prog->source});
  }
  for (const auto& [what, geo, p, config] : std::vector<std::tuple<std::string, WgradGeom, Precision, std::string>>{
           {"W=66: x's rows of 264 bytes", {2, 64, 16, 66, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}, Precision::TF32, ""},
           {"wgrad_nhwc=1 (the swap-AB dW reads x in place)", {2, 64, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
            Precision::TF32, ",wgrad_nhwc=1"},
           {"or a tf32 conv2d_weight_grad", {2, 64, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}, Precision::BF16, ""},
           {"strided", {2, 64, 16, 128, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1}, Precision::TF32, ""},
           {"takes cooperative tiles", {2, 64, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1}, Precision::TF32,
            ",wgmma_schedule=pingpong"},
           {"192 columns takes one kernel row's taps", {2, 128, 6, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
            Precision::TF32, ",wgmma_tile=128x192x4"},
           {"wgrad_flat=1 takes a 192-column swap-AB dW", {2, 64, 7, 8, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1},
            Precision::TF32, ",wgrad_flat=1"}}) {
    auto graph = wgrad_graph(geo, p);
    ASSERT_TRUE(graph) << graph.error().str();
    auto prog = generate_program(*graph, {"sm_90a", "mainloop=wgmma,wgmma_swap_ab=1" + config});
    ASSERT_FALSE(prog.ok()) << what;
    EXPECT_NE(prog.error().message.find(what), std::string::npos) << prog.error().message;
  }
  auto dflt = wgrad_graph(test_util::wgrad_wgmma_geoms()[2], Precision::TF32);  // Cin 128: mma.sync by default
  ASSERT_TRUE(dflt) << dflt.error().str();
  auto mma = generate_program(*dflt, {"sm_90a", ""});
  ASSERT_TRUE(mma) << mma.error().str();
  EXPECT_EQ(mma->source.find("WgradSwapOperands"), std::string::npos) << mma->plan_text;
  const std::vector<std::string> failures = test_util::compile_all(std::move(jobs));
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// The default wgmma dWs at the seed models' sizes (seed 1's own, OW 126: the 16-bit dW over grad's padded rows,
// the tf32 one over its planes flattened; padded 1, OW 128: the 16-bit dW in place, the tf32 one on 44-pixel rows
// of x) compile for sm_90a without spills or serialized wgmma, and (where cuobjdump exists: the GPU machine) their
// SASS holds HGMMA.
TEST(ConvWgrad, DefaultWgmmaDwCompilesWithoutSpills) {
  bool have_cuobjdump = false;
  const WgradGeom seed1{128, 64, 128, 128, 128, 3, 3, 1, 1, 0, 0, 1, 1, 1};
  const WgradGeom padded{128, 64, 128, 128, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  for (const auto& [g, p, form] : std::vector<std::tuple<WgradGeom, Precision, std::string>>{
           {seed1, Precision::BF16, "fj::WgradOperands"},
           {seed1, Precision::TF32, "fj::WgradFlatSwapOperands"},
           {padded, Precision::BF16, "fj::WgradOperands"},
           {padded, Precision::TF32, "fj::WgradSwapOperands"}}) {
    auto graph = wgrad_graph(g, p);
    ASSERT_TRUE(graph) << graph.error().str();
    const std::string label = std::string(precision_name(p)) + " " + g.str();
    auto prog = generate_program(*graph, {"sm_90a", ""});
    ASSERT_TRUE(prog) << label << ": " << prog.error().str();
    EXPECT_NE(prog->source.find(form + "<Tile, ConvShape>{maps"), std::string::npos) << label << "\n" << prog->plan_text;
    auto cubin = compile_to_cubin(prog->source, prog->name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << label << ": " << cubin.error().str();
    const std::string& log = cubin->log;
    int functions = 0;  // every kernel of the module (a staging kernel too): no spill stores
    for (size_t at = log.find("bytes spill stores"); at != std::string::npos;
         at = log.find("bytes spill stores", at + 1), ++functions)
      EXPECT_EQ(log.compare(log.rfind(',', at) + 1, at - log.rfind(',', at) - 1, " 0 "), 0) << label << "\n" << log;
    EXPECT_GE(functions, static_cast<int>(prog->launches.size())) << label << "\n" << log;
    EXPECT_EQ(log.find("C7514"), std::string::npos) << label << ": wgmma serialized\n" << log;
    const auto sass = test_util::sass_of(cubin->cubin, ::testing::TempDir(), prog->name);
    have_cuobjdump = sass.has_value();
    if (sass) EXPECT_NE(sass->find("HGMMA"), std::string::npos) << label << ": no HGMMA in the SASS";
  }
  if (!have_cuobjdump) GTEST_SKIP() << "spills checked; no cuobjdump here for the HGMMA check";
}

// A conv chain's backward: the dW stage.
Graph conv_chain() {
  GraphBuilder g(Precision::FP32, "conv_chain");
  auto x = g.input("x", {2, 4, 9, 8});
  auto w = g.input("w", {6, 2, 3, 3});
  auto b = g.input("b", {6});
  Conv2dOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  o.groups = 2;
  g.output("y", g.conv2d(x, w, b, o).tanh());
  auto built = g.build();
  EXPECT_TRUE(built) << built.error().str();
  return built.ok() ? built.take() : Graph{};
}

// The values of every input gradient of `p` for the forward's inputs `in`, in fp64, through the stages.
std::map<std::string, std::vector<double>> run_reference(const BackwardProgram& p, const std::vector<HostTensor>& in,
                                                         const Graph& fwd) {
  std::map<std::string, HostTensor> env;
  const std::vector<ValueId> ids = fwd.inputs();
  for (size_t i = 0; i < ids.size(); ++i) env[fwd.node(ids[i]).name] = in[i];
  auto run = [&](const Graph& g) {
    std::vector<HostTensor> args;
    for (ValueId i : g.inputs()) {
      HostTensor t = env.at(g.node(i).name);
      t.type = g.node(i).type;  // a stage may view a buffer with another shape
      args.push_back(t);
    }
    auto out = evaluate_reference(g, args);
    EXPECT_TRUE(out) << out.error().str();
    if (!out) return;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      HostTensor t{g.node(g.outputs[k].value).type, {}};
      for (double v : (*out)[k]) t.data.push_back(static_cast<float>(v));
      env[g.outputs[k].name] = t;
    }
  };
  run(p.forward);
  for (const BackwardBuffer& b : p.buffers)  // d(sum(y * 1))/dy = 1
    if (b.role == BufferRole::OutputGrad) env[b.name] = HostTensor{b.type, std::vector<float>(b.type.numel(), 1.f)};
  for (const BackwardStage& s : p.stages) run(s.graph);
  std::map<std::string, std::vector<double>> grads;
  for (const auto& [input, buffer] : p.input_grads)
    grads[input] = std::vector<double>(env.at(buffer).data.begin(), env.at(buffer).data.end());
  return grads;
}

TEST(ConvWgrad, BackwardProgramTakesItByDefaultAndIm2colForTheCpu) {
  Graph fwd = conv_chain();
  auto implicit = build_backward(fwd);
  ASSERT_TRUE(implicit) << implicit.error().str();
  const std::string text = print_backward(*implicit);
  EXPECT_NE(text.find("conv2d_weight_grad("), std::string::npos) << text;
  EXPECT_EQ(text.find("im2col("), std::string::npos) << text;
  EXPECT_EQ(implicit->buffer("tmp_dz_t"), nullptr) << text;
  BackwardOptions cpu;
  cpu.conv_wgrad = ConvWgrad::Im2col;
  auto im2col = build_backward(fwd, cpu);
  ASSERT_TRUE(im2col) << im2col.error().str();
  const std::string cpu_text = print_backward(*im2col);
  EXPECT_EQ(cpu_text.find("conv2d_weight_grad("), std::string::npos) << cpu_text;
  EXPECT_NE(cpu_text.find("im2col("), std::string::npos) << cpu_text;
  // The same gradients (fp64 reference through every stage; the forms differ only in summation order).
  const std::vector<HostTensor> in = make_random_inputs(fwd, 5);
  auto a = run_reference(*implicit, in, fwd), b = run_reference(*im2col, in, fwd);
  ASSERT_EQ(a.size(), 3u);
  for (const auto& [name, values] : a) {
    ASSERT_EQ(values.size(), b.at(name).size()) << name;
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_NEAR(values[i], b.at(name)[i], 1e-5 * (1 + std::fabs(values[i]))) << name << " element " << i;
  }
}

// conv2d_weight_grad differentiates: dX is conv2d's dX with dZ := grad and W := U (the gradient of dW), d(grad) is
// conv2d(x, U). Small geometries (finite differences evaluate the graph twice per input element).
TEST(ConvWgrad, OwnGradientsMatchFiniteDifferences) {
  const WgradGeom small[] = {
      {2, 3, 6, 5, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},  // plain
      {2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 2, 1, 2, 2},  // strided (extra rows), padded, dilated, 2 groups
      {1, 3, 5, 5, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1},  // padding > dilation*(k-1): dX crops grad
      {1, 2, 9, 8, 3, 2, 3, 3, 2, 2, 0, 1, 1, 1},  // stride 3 x 2, padding only on the rows
  };
  for (const WgradGeom& geo : small) {
    SCOPED_TRACE(geo.str());
    auto g = wgrad_graph(geo, Precision::FP32, /*epilogue=*/true);
    ASSERT_TRUE(g) << g.error().str();
    testing::GradCheck every;
    every.every_input = true;
    testing::check_graph_gradients(*g, {}, every);
    auto p = build_backward(*g);
    ASSERT_TRUE(p) << p.error().str();
    int convs = 0;
    for (const auto& st : p->stages)
      for (const Node& n : st.graph.nodes) convs += n.op == OpKind::Conv2d;
    EXPECT_EQ(convs, 2) << print_backward(*p);  // dX and d(dz)
  }
}

}  // namespace
}  // namespace fusejit
