// conv2d on the sm_90a wgmma mainloop (no GPU needed): which convs take it
// (stride 1, one group, Cin in whole 128-byte blocks; 3xTF32 also K >= 256)
// and why the others do not; the program (a staging kernel writing x in NHWC
// and w as [Cout][KH][KW][Cin], then the persistent anchor reading 4-D TMA
// boxes of pixel patches); conv_patch's geometry; and every epilogue kind
// compiling for sm_90a through NVRTC. GPU: gpu_conv_mma_test.cpp.
#include <gtest/gtest.h>

#include <regex>

#include "compiler/codegen.h"
#include "compiler/plan.h"
#include "fusejit/builder.h"
#include "fusejit/spec.h"
#include "tests/compile_jobs.h"
#include "tests/conv_chains.h"
#include "tests/mma_kinds.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::conv_chain;
using test_util::max_pool2;
using test_util::padded;
using test_util::same;
using test_util::CompileJob;
using test_util::kPrecisions;
using test_util::mma_kind;

int elem_bytes(Precision p) { return p == Precision::BF16 || p == Precision::F16 ? 2 : 4; }

// The BM of the plan's "wgmma <kind> tile BMxBN", or 0.
int wgmma_bm(const Program& prog) {
  std::smatch m;
  return std::regex_search(prog.plan_text, m, std::regex(R"(wgmma \w+ tile (\d+)x)")) ? std::stoi(m[1]) : 0;
}

struct EligibilityCase {
  const char* label;
  Precision p;
  Shape x, w;
  Conv2dOptions o;
  const char* why_not;   // "": wgmma on sm_90a; else the plan's reason
  const char* fallback;  // by default: "mma" (mma.sync) or "ffma" (3xTF32 with a short K)
};

const EligibilityCase kEligibility[] = {
    {"Cin 64 k3 p1", Precision::FP32, {2, 64, 10, 10}, {32, 64, 3, 3}, padded(1), "", ""},
    {"Cin 64 k3 p1", Precision::TF32, {2, 64, 10, 10}, {32, 64, 3, 3}, padded(1), "", ""},
    {"Cin 64 k3 p1", Precision::BF16, {2, 64, 10, 10}, {32, 64, 3, 3}, padded(1), "", ""},
    {"Cin 64 k3 p1", Precision::F16, {2, 64, 10, 10}, {32, 64, 3, 3}, padded(1), "", ""},
    {"Cin 32 k3 (K 288)", Precision::FP32, {2, 32, 10, 10}, {16, 32, 3, 3}, padded(0), "", ""},
    {"Cin 32 1x1 (no K rule for tf32)", Precision::TF32, {2, 32, 8, 8}, {16, 32, 1, 1}, padded(0), "", ""},
    {"Cin 128 k3 dilation 2", Precision::BF16, {1, 128, 12, 12}, {64, 128, 3, 3}, padded(2, 1, 1, 2), "", ""},
    {"Cin 64 k5 p2", Precision::F16, {1, 64, 9, 9}, {16, 64, 5, 5}, padded(2), "", ""},
    {"stride 2", Precision::BF16, {2, 64, 10, 10}, {32, 64, 3, 3}, padded(1, 2),
     "a strided conv2d (the TMA conv path needs stride 1)", "mma"},
    {"groups 2", Precision::BF16, {2, 128, 10, 10}, {32, 64, 3, 3}, padded(1, 1, 2),
     "groups=2 (the TMA conv path takes one group)", "mma"},
    {"Cin 8", Precision::BF16, {2, 8, 10, 10}, {32, 8, 3, 3}, padded(1), "Cin=8 is not a multiple of 64", "mma"},
    {"Cin 48", Precision::BF16, {2, 48, 10, 10}, {32, 48, 3, 3}, padded(1), "Cin=48 is not a multiple of 64", "mma"},
    {"Cin 32", Precision::F16, {2, 32, 10, 10}, {32, 32, 3, 3}, padded(1), "Cin=32 is not a multiple of 64", "mma"},
    {"Cin 16", Precision::TF32, {2, 16, 10, 10}, {32, 16, 3, 3}, padded(1), "Cin=16 is not a multiple of 32", "mma"},
    {"Cin 32 1x1 (K 32)", Precision::FP32, {2, 32, 8, 8}, {64, 32, 1, 1}, padded(0), "3xTF32 with K=32 below 256",
     "ffma"},  // Cout 64: over the halo patches' channel blocks (Cout <= 32), so the im2col gather, where FFMA wins
};

// Cout <= 8 (dX of a conv with Cin = 8) prefers mma.sync's narrow tiles to a
// 64-column wgmma tile; mainloop=wgmma still runs it on wgmma.
TEST(CodegenConvWgmma, NarrowCoutPrefersMmaSync) {
  const Graph g = conv_chain(Precision::FP32, {2, 64, 10, 10}, {8, 64, 3, 3}, padded(1));
  auto prog = generate_program(g, {"sm_90a", ""});
  ASSERT_TRUE(prog.ok()) << prog.error().str();
  EXPECT_NE(prog->name.find("_mma_f32x3"), std::string::npos) << prog->name;
  EXPECT_NE(prog->plan_text.find("not wgmma: Cout=8 fills a fraction"), std::string::npos) << prog->plan_text;
  auto forced = generate_program(g, {"sm_90a", "mainloop=wgmma"});
  ASSERT_TRUE(forced.ok()) << forced.error().str();
  EXPECT_NE(forced->name.find("_wgmma_f32x3"), std::string::npos) << forced->name;
}

// sm_90a picks wgmma for the eligible convs and says why not for the rest
// (mma.sync, or FFMA for 3xTF32 with a short K); mainloop=wgmma on those is
// a codegen error naming the reason; sm_80 never runs wgmma.
TEST(CodegenConvWgmma, EligibleConvsTakeWgmmaOnSm90a) {
  for (const EligibilityCase& c : kEligibility) {
    const std::string kind = mma_kind(c.p), why = c.why_not;
    const std::string label = std::string(c.label) + " " + std::string(precision_name(c.p));
    const Graph g = conv_chain(c.p, c.x, c.w, c.o);
    auto prog = generate_program(g, {"sm_90a", ""});
    ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
    auto forced = generate_program(g, {"sm_90a", "mainloop=wgmma"});
    if (why.empty()) {
      EXPECT_NE(prog->name.find("_wgmma_" + kind), std::string::npos) << label << ": kernel " << prog->name;
      EXPECT_NE(prog->plan_text.find("wgmma " + kind + " tile"), std::string::npos) << label << "\n" << prog->plan_text;
      EXPECT_NE(prog->plan_text.find("implicit GEMM over patches of output pixels"), std::string::npos)
          << label << "\n" << prog->plan_text;
      EXPECT_TRUE(prog->launches.at(0).operand_staging) << label;
      ASSERT_TRUE(forced.ok()) << label << ": " << forced.error().str();
      EXPECT_EQ(forced->name, prog->name) << label;
    } else {
      EXPECT_EQ(prog->name.find("_wgmma_"), std::string::npos) << label << ": kernel " << prog->name;
      EXPECT_FALSE(prog->launches.at(0).operand_staging) << label;
      if (std::string(c.fallback) == "mma") {
        EXPECT_NE(prog->name.find("_mma_" + kind), std::string::npos) << label << ": kernel " << prog->name;
        EXPECT_NE(prog->plan_text.find("(not wgmma: " + why), std::string::npos) << label << "\n"
                                                                                      << prog->plan_text;
      } else {  // 3xTF32 with K < 256: FFMA, and the plan says why not mma.sync
        EXPECT_EQ(prog->name.find("_mma_"), std::string::npos) << label << ": kernel " << prog->name;
        EXPECT_NE(prog->plan_text.find("not mma.sync 3xTF32: K=32 is below 256"), std::string::npos)
            << label << "\n" << prog->plan_text;
      }
      ASSERT_FALSE(forced.ok()) << label << ": mainloop=wgmma accepted: " << forced->name;
      EXPECT_NE(forced.error().message.find("mainloop=wgmma, but " + why), std::string::npos)
          << label << ": " << forced.error().message;
    }
    auto sm80 = generate_program(g, {"sm_80", ""});
    ASSERT_TRUE(sm80.ok()) << label << ": " << sm80.error().str();
    EXPECT_EQ(sm80->name.find("_wgmma_"), std::string::npos) << label << ": kernel " << sm80->name;
  }
}

// The launches, tensor maps and scratch of a conv on wgmma, per precision:
// staging first (3xTF32: with the residuals), then the persistent anchor.
// By default x's map boxes are patch-sized, one per kernel tap
// (conv_wgmma.cuh); conv_halo=1 (every mode but 3xTF32): the filter stays
// resident and the boxes are a patch's halo (conv_wgmma_halo.cuh).
TEST(CodegenConvWgmma, StagingThenPersistentAnchorWithImageTensorMaps) {
  const int64_t n = 2, cin = 64, h = 12, w = 20, cout = 48, k = cin * 9;  // OH x OW = 12 x 20 (padding 1)
  for (const char* config : {"", "conv_halo=1"})
  for (Precision p : kPrecisions) {
    const std::string label = std::string(precision_name(p)) + " '" + config + "'";
    const bool split = p == Precision::FP32;
    const bool halo = !std::string(config).empty();
    if (split && halo) continue;  // 3xTF32: an error (HaloPatchesFilterResident)
    const int eb = elem_bytes(p);
    auto made = generate_program(conv_chain(p, {n, cin, h, w}, {cout, cin, 3, 3}, padded(1)), {"sm_90a", config});
    ASSERT_TRUE(made.ok()) << label << ": " << made.error().str();
    const Program& prog = *made;
    ASSERT_EQ(prog.launches.size(), 2u) << label << "\n" << prog.plan_text;
    EXPECT_EQ(testing::chain_launches(prog), 1u);
    EXPECT_TRUE(testing::chain_scratch(prog).empty()) << label << ": only staging scratch\n" << prog.plan_text;

    const LaunchSpec& staging = prog.launches[0];
    EXPECT_TRUE(staging.operand_staging);
    EXPECT_EQ(staging.kernel, split ? "fj_split_tf32_conv_operands_nhwc" : "fj_conv_operands_nhwc");
    const std::string transpose = std::string("fj::transpose_batched<") + (split ? "true" : "false") + ", " +
                                  (p == Precision::BF16 ? "__nv_bfloat16" : p == Precision::F16 ? "__half" : "float") +
                                  ">(";
    for (const char* batches : {", kCout, kCin, kTaps, blockIdx.x, kWeightBlocks);",  // w: Cout batches of [Cin][taps]
                                ", kBatch, kCin, kPixels, blockIdx.x - kWeightBlocks, gridDim.x - kWeightBlocks);"}) {
      const size_t at = prog.source.find(batches);
      ASSERT_NE(at, std::string::npos) << label << ": " << batches;
      EXPECT_NE(prog.source.rfind(transpose, at), std::string::npos) << label << ": " << transpose;
    }

    // x NHWC, w as [Cout][KH][KW][Cin] (the operands' dtype; 3xTF32: then their f32 residuals).
    ASSERT_EQ(prog.scratch.size(), split ? 4u : 2u) << label << "\n" << prog.plan_text;
    EXPECT_EQ(prog.scratch[0].bytes, n * h * w * cin * eb);
    EXPECT_EQ(prog.scratch[0].what.rfind("x in NHWC for wgmma", 0), 0u) << prog.scratch[0].what;
    EXPECT_EQ(prog.scratch[1].bytes, cout * k * eb);
    EXPECT_EQ(prog.scratch[1].what.rfind("w as [Cout][KH][KW][Cin] for wgmma", 0), 0u) << prog.scratch[1].what;
    if (split) {
      EXPECT_EQ(prog.scratch[2].bytes, n * h * w * cin * 4);
      EXPECT_EQ(prog.scratch[3].bytes, cout * k * 4);
    }

    const LaunchSpec& anchor = prog.launches[1];
    EXPECT_FALSE(anchor.operand_staging);
    EXPECT_TRUE(anchor.persistent);
    const int bm = wgmma_bm(prog);
    cg::AnchorGeometry geo;
    geo.oh = h;
    geo.ow = w;
    geo.kh = geo.kw = 3;
    const cg::ConvPatch patch = cg::conv_patch(geo, bm, 1, 1, 0, halo);
    ASSERT_GT(patch.bh, 0) << label << ": BM " << bm;
    EXPECT_EQ(prog.plan_text.find("filter resident") != std::string::npos, halo) << label << "\n" << prog.plan_text;
    EXPECT_EQ(anchor.grid[0], n * patch.tiles_per_image) << label << ": one column tile (Cout 48)";
    EXPECT_NE(prog.source.find("fj::PatchPixels<ConvShape, Tile::BM, " + std::to_string(patch.bh) + ", " +
                               std::to_string(patch.bw) + ">"),
              std::string::npos)
        << label;
    EXPECT_EQ(prog.source.find("fj::ConvHalo<Tile, ConvShape, Pixels, " + std::to_string(patch.bh) + ", " +
                               std::to_string(patch.bw) + ", ") != std::string::npos,
              halo)
        << label;
    const auto& maps = anchor.tensor_maps;
    ASSERT_EQ(maps.size(), split ? 4u : 2u) << label;
    for (size_t i = 0; i < maps.size(); ++i) {
      EXPECT_EQ(maps[i].buffer, (BufferRef{BufferKind::Scratch, static_cast<int>(i)})) << label << " map " << i;
      EXPECT_EQ(maps[i].elem_bytes, eb);
      EXPECT_EQ(maps[i].bf16, p == Precision::BF16);
      if (i % 2 == 0) {  // x NHWC as {C, W, H, N}: 128 bytes of channels x the patch
        EXPECT_EQ(maps[i].image, (std::array<int64_t, 4>{cin, w, h, n})) << label << " map " << i;
        const int halo_rows = halo ? 2 : 0;  // a 3x3 filter's halo around the patch
        EXPECT_EQ(maps[i].image_box, (std::array<int, 4>{128 / eb, patch.bw + halo_rows, patch.bh + halo_rows, 1}))
            << label << " map " << i;
        if (!halo) EXPECT_EQ(maps[i].image_box[1] * maps[i].image_box[2], bm);
      } else {  // w [Cout][K], K-major like linear's W
        EXPECT_EQ(maps[i].image[0], 0) << "2-D";
        EXPECT_EQ(maps[i].rows, cout);
        EXPECT_EQ(maps[i].cols, k);
        EXPECT_EQ(maps[i].box_cols, 128 / eb);
      }
    }
  }
}

// Patches of bh x bw output pixels: bw a power of two in [8, 128], bh * bw ==
// bm, a fused pool's windows dividing the patch; no patch for 3x3 windows.
TEST(CodegenConvWgmma, ConvPatchTilesTheImage) {
  for (int bm : {64, 128, 256})
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{126, 126}, {56, 56}, {12, 20}, {7, 300}, {1, 9}, {200, 3}})
      for (auto [qh, qw] : {std::pair<int, int>{1, 1}, {2, 2}, {4, 4}, {2, 1}, {1, 4}}) {
        cg::AnchorGeometry geo;
        geo.oh = oh;
        geo.ow = ow;
        const cg::ConvPatch c = cg::conv_patch(geo, bm, qh, qw);
        const std::string label = "bm " + std::to_string(bm) + ", " + std::to_string(oh) + "x" + std::to_string(ow) +
                                  ", window " + std::to_string(qh) + "x" + std::to_string(qw);
        ASSERT_GT(c.bh, 0) << label;
        EXPECT_EQ(c.bh * c.bw, bm) << label;
        EXPECT_TRUE(c.bw >= 8 && c.bw <= 128 && (c.bw & (c.bw - 1)) == 0) << label << ": bw " << c.bw;
        EXPECT_EQ(c.bw % qw, 0) << label;
        EXPECT_EQ(c.bh % qh, 0) << label;
        EXPECT_EQ(c.tiles_per_image, ((oh + c.bh - 1) / c.bh) * ((ow + c.bw - 1) / c.bw)) << label;
        EXPECT_EQ(cg::conv_patch(geo, bm, 3, 3).bh, 0) << label << ": 3x3 windows";
      }
  cg::AnchorGeometry seed1;  // seed 1: 126 x 126 output pixels
  seed1.oh = seed1.ow = 126;
  const cg::ConvPatch rows = cg::conv_patch(seed1, 128);
  EXPECT_EQ(rows.bw, 128);
  EXPECT_EQ(rows.bh, 1);
  EXPECT_EQ(rows.tiles_per_image, 126);
  EXPECT_EQ(cg::conv_patch(seed1, 128, 2, 2).bw, 64);  // 2x2 windows need two rows
  cg::AnchorGeometry r56;
  r56.oh = r56.ow = 56;
  const cg::ConvPatch half = cg::conv_patch(r56, 128);
  EXPECT_EQ(half.bw, 64);
  EXPECT_EQ(half.bh, 2);
  EXPECT_EQ(half.tiles_per_image, 28);
}

struct EpilogueCase {
  const char* label;
  Value (*tail)(Value);
  const char* config;
  const char* plan_says;    // in the plan text
  const char* source_says;  // in the CUDA source
};

Value avg_pool2(Value v) { return v.avg_pool2d({}); }
Value channel_min_tanh(Value v) { return v.min({1}, true).tanh(); }
Value channel_sum(Value v) { return v.sum({1}); }
Value global_avg(Value v) { return v.global_avg_pool(); }

// Every epilogue kind on the wgmma conv, in every precision, compiles for
// sm_90a (small shapes: x [2, 64, 8, 16], w [32, 64, 3, 3], padding 1).
TEST(CodegenConvWgmma, EveryEpilogueCompilesForSm90a) {
  const EpilogueCase cases[] = {
      {"bias + relu", same, "", "implicit GEMM over patches", "fj::PatchPixels<"},
      {"max pool 2x2", max_pool2, "", "fused into the conv epilogue", "fj::PatchPoolPixels<"},
      {"avg pool 2x2", avg_pool2, "", "fused into the conv epilogue", "fj::PatchPoolPixels<"},
      {"channel min keepdim + tanh", channel_min_tanh, "", "fused into the epilogue: one tile spans N",
       "fj::tile_row_reduce<"},
      {"channel sum", channel_sum, "", "fused into the epilogue: one tile spans N", "fj::tile_row_reduce<"},
      {"global_avg_pool", global_avg, "", "partly fused: each tile (pixels of one image)",
       "(m0 / Tile::BM) / Pixels::kTilesPerImage"},
      {"ping-pong", same, "wgmma_schedule=pingpong", "tile 64x", "/*kPingPong=*/true"},
      {"ping-pong max pool 2x2", max_pool2, "wgmma_schedule=pingpong", "fused into the conv epilogue",
       "/*kPingPong=*/true"},
  };
  std::vector<CompileJob> jobs;
  for (const EpilogueCase& c : cases)
    for (Precision p : kPrecisions) {
      const std::string label = std::string(c.label) + " " + std::string(precision_name(p)) + " '" + c.config + "'";
      auto prog = generate_program(conv_chain(p, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1), c.tail), {"sm_90a", c.config});
      if (p == Precision::FP32 && std::string(c.config) == "wgmma_schedule=pingpong") {  // as for linear
        ASSERT_FALSE(prog.ok()) << label << ": accepted";
        EXPECT_NE(prog.error().message.find("3xTF32 runs the cooperative schedule only"), std::string::npos)
            << label << ": " << prog.error().message;
        continue;
      }
      ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
      EXPECT_NE(prog->name.find("_wgmma_" + mma_kind(p)), std::string::npos) << label << ": kernel " << prog->name;
      EXPECT_TRUE(prog->launches.at(0).operand_staging) << label;
      EXPECT_NE(prog->plan_text.find(c.plan_says), std::string::npos) << label << "\n" << prog->plan_text;
      EXPECT_NE(prog->source.find(c.source_says), std::string::npos) << label << ": " << c.source_says;
      // One chain kernel, two with the spatial partials' finish; the conv output never in scratch.
      const bool spatial = c.tail == global_avg;
      EXPECT_EQ(testing::chain_launches(*prog), spatial ? 2u : 1u) << label << "\n" << prog->plan_text;
      EXPECT_EQ(testing::chain_scratch(*prog).size(), spatial ? 1u : 0u) << label << "\n" << prog->plan_text;
      jobs.push_back({label, "sm_90a", prog->name, prog->source});
    }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// conv_nchw=1: the producer warpgroup's threads write A from NCHW x (fj::ConvNchwOperands): no NHWC copy of x
// (the staging kernel reorders w only), B's tensor map alone; bf16 / f16 / tf32 compile for sm_90a in the
// cooperative and ping-pong schedules, pools included, and 3xTF32 (x split in registers); conv_halo=1 is a
// config error naming it.
TEST(CodegenConvWgmma, NchwProducerReadsXInPlace) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32})
    for (const char* config : {"conv_nchw=1", "conv_nchw=2,wgmma_schedule=pingpong", "conv_nchw=1,wgmma_tile=64x64x4",
                               "conv_nchw=2,wgmma_tile=64x64x4"})
      for (Value (*tail)(Value) : {same, max_pool2}) {
        const std::string label = std::string(precision_name(p)) + " '" + config + "'" + (tail == same ? "" : " pool");
        auto prog = generate_program(conv_chain(p, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1), tail), {"sm_90a", config});
        ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
        EXPECT_NE(prog->source.find("fj::ConvNchwOperands<Tile, ConvShape, Pixels, "), std::string::npos) << label;
        EXPECT_NE(prog->source.find("fj::GemmMaps{nullptr, &tma_b}"), std::string::npos) << label;
        EXPECT_NE(prog->plan_text.find("write A from NCHW x per kernel tap"), std::string::npos) << prog->plan_text;
        EXPECT_EQ(prog->plan_text.find("x in NHWC"), std::string::npos) << label << ": x staged\n" << prog->plan_text;
        ASSERT_GE(prog->launches.size(), 2u) << label;
        EXPECT_TRUE(prog->launches[0].operand_staging) << label;  // w reordered
        EXPECT_EQ(prog->launches[1].tensor_maps.size(), 1u) << label;
        jobs.push_back({"conv_nchw " + label, "sm_90a", prog->name, prog->source});
      }
  {
    // Halos from NCHW x load 16 bytes of a channel's row: W = 12 is not a multiple of 8 bf16 pixels.
    auto bad = generate_program(conv_chain(Precision::BF16, {2, 64, 8, 12}, {32, 64, 3, 3}, padded(1)),
                                {"sm_90a", "conv_nchw=1,conv_halo=1"});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("conv_nchw=1, but"), std::string::npos) << bad.error().message;
  }
  // 3xTF32: the producer splits x in registers (no residual of x in scratch); w's residual keeps its map.
  for (const char* config : {"conv_nchw=1", "conv_nchw=2", "conv_nchw=1,wgmma_tile=64x64x4"}) {
    auto prog = generate_program(conv_chain(Precision::FP32, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)),
                                 {"sm_90a", config});
    ASSERT_TRUE(prog.ok()) << config << ": " << prog.error().str();
    EXPECT_NE(prog->source.find("fj::GemmMaps{nullptr, &tma_b, nullptr, &tma_b_lo}"), std::string::npos) << config;
    EXPECT_EQ(prog->plan_text.find("residual of input 'x'"), std::string::npos) << prog->plan_text;
    EXPECT_EQ(prog->launches.back().tensor_maps.size(), 2u) << config;
    jobs.push_back({std::string("conv_nchw fp32 ") + config, "sm_90a", prog->name, prog->source});
  }
  auto plain = generate_program(conv_chain(Precision::BF16, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)), {"sm_90a", ""});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->source.find("ConvNchwOperands"), std::string::npos) << "conv_nchw is opt-in";
  auto two = generate_program(conv_chain(Precision::BF16, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)),
                              {"sm_90a", "conv_nchw=2"});
  ASSERT_TRUE(two.ok());
  EXPECT_NE(two->source.find("fj::ConvNchwOperands<Tile, ConvShape, Pixels, __nv_bfloat16, 2>"), std::string::npos);
  auto three = generate_program(conv_chain(Precision::BF16, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)),
                                {"sm_90a", "conv_nchw=3"});
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.error().message.find("conv_nchw must be 0, 1 or 2"), std::string::npos) << three.error().message;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// Ping-pong's deep rings (8 stages of 64x128, 5 of 64x256) leave each
// consumer less than the 32 KiB a staged pool or per-channel partial takes
// elsewhere: the staged chunks shrink to what is left (found on the H200: a
// channel min next to a global average pool, Cout 72 and 130, did not compile).
TEST(CodegenConvWgmma, PingPongStagedEpiloguesFitWhatTheRingLeaves) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::F16})
    for (int64_t cout : {72, 130, 256})
      for (bool channel_min : {false, true}) {
        const std::string label = std::string(precision_name(p)) + " Cout " + std::to_string(cout) +
                                  (channel_min ? " channel min + global avg pool" : " max pool");
        GraphBuilder g(p, "conv_pingpong");
        auto y = g.conv2d(g.input("x", {2, 64, 19, 23}), g.input("w", {cout, 64, 3, 3}), g.input("b", {cout}), padded(1));
        if (channel_min) g.output("z", y.min({1}, true).tanh());
        g.output("y", channel_min ? y.relu().global_avg_pool() : y.relu().max_pool2d({}));
        auto built = g.build();
        ASSERT_TRUE(built.ok()) << built.error().str();
        auto prog = generate_program(*built, {"sm_90a", "wgmma_schedule=pingpong"});
        ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
        EXPECT_NE(prog->source.find("/*kPingPong=*/true"), std::string::npos) << label;
        jobs.push_back({label, "sm_90a", prog->name, prog->source});
      }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The runs epilogue's sanitizer specs (tests/specs/conv_runs_*.yaml: bf16 4-byte stores, f16 16-byte stores and a
// ragged column tile, tf32 one-element stores) take it, cooperative and ping-pong, and compile for sm_90a.
TEST(CodegenConvWgmma, RunsEpilogueSpecsCompileForSm90a) {
  std::vector<CompileJob> jobs;
  for (const char* name : {"conv_runs_bf16", "conv_runs_f16_ragged", "conv_runs_tf32_odd"})
    for (const char* config : {"", "wgmma_schedule=pingpong"}) {
      const std::string label = std::string(name) + " '" + config + "'";
      auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/" + name + ".yaml");
      ASSERT_TRUE(g) << label << ": " << g.error().str();
      auto prog = generate_program(*g, {"sm_90a", config});
      ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
      EXPECT_NE(prog->plan_text.find("stored in runs of a channel's pixels"), std::string::npos) << label << "\n"
                                                                                                  << prog->plan_text;
      EXPECT_NE(prog->source.find("fj::tile_nchw_store<Pixels, "), std::string::npos) << label;
      jobs.push_back({label, "sm_90a", prog->name, prog->source});
    }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// staging_prefetch=1: the 16-bit NHWC staging loads a block's next tile during the current one's stores
// (transpose16_wide<VL, VS, true>; the element-wide fallback for an unaligned x keeps the plain form); compiles.
TEST(CodegenConvWgmma, StagingPrefetchOnRequest) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::F16}) {
    auto prog = generate_program(conv_chain(p, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)), {"sm_90a", "staging_prefetch=1"});
    ASSERT_TRUE(prog.ok()) << prog.error().str();
    EXPECT_NE(prog->source.find("fj::transpose16_wide<8, 8, true>("), std::string::npos) << precision_name(p);
    EXPECT_NE(prog->source.find("fj::transpose16_wide<1, 8>("), std::string::npos) << precision_name(p);
    jobs.push_back({"staging_prefetch " + std::string(precision_name(p)), "sm_90a", prog->name, prog->source});
    auto plain = generate_program(conv_chain(p, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)), {"sm_90a", ""});
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->source.find(", true>("), std::string::npos) << "staging_prefetch is opt-in";
  }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// 2-block clusters sharing the filter's k-tiles (wgmma_cluster=2, opt-in): cooperative tiles, pairs of patches a
// unit (an odd count: a zero-filled partner patch), B multicast in halves; compiled for sm_90a. Not with the
// halo or NCHW producers, not 3xTF32: errors that say so.
TEST(CodegenConvWgmma, ClustersShareTheFilterOnRequest) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::TF32, Precision::BF16, Precision::F16}) {
    for (const char* config : {"wgmma_cluster=2", "wgmma_tile=128x256x3,wgmma_cluster=2"}) {
      const std::string label = std::string(precision_name(p)) + " '" + config + "'";
      // 3 images of 128 pixels (128-row tiles: 3, an odd count)
      auto prog = generate_program(conv_chain(p, {3, 64, 8, 16}, {96, 64, 3, 3}, padded(1)), {"sm_90a", config});
      ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
      EXPECT_NE(prog->plan_text.find("2-block clusters sharing B"), std::string::npos) << label << "\n" << prog->plan_text;
      EXPECT_NE(prog->source.find("__cluster_dims__(2, 1, 1)"), std::string::npos) << label;
      EXPECT_NE(prog->source.find("fj::ConvOperands<"), std::string::npos) << label;
      const auto& conv = prog->launches.back();  // (the staging kernel first)
      ASSERT_EQ(conv.tensor_maps.size(), 2u) << label;
      EXPECT_EQ(conv.cluster, 2) << label;
      std::smatch tile;
      ASSERT_TRUE(std::regex_search(prog->plan_text, tile, std::regex(R"(wgmma \w+ tile \d+x(\d+))"))) << label;
      const int bn = std::stoi(tile[1]);
      EXPECT_EQ(conv.tensor_maps[1].box_rows, bn / 2) << label << ": each block multicasts half of B's rows";
      EXPECT_EQ(conv.grid[0] % 2, 0u) << label << ": whole clusters";
      EXPECT_EQ(prog->plan_text.find("ping-pong"), std::string::npos) << label << ": cooperative tiles";
      if (std::string(config).find("128x256") != std::string::npos) EXPECT_EQ(wgmma_bm(*prog), 128) << label;
      jobs.push_back({label, "sm_90a", prog->name, prog->source});
    }
  }
  const auto g = conv_chain(Precision::BF16, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1));
  for (const char* config : {"wgmma_cluster=2,conv_halo=1", "wgmma_cluster=2,conv_nchw=1"}) {
    auto prog = generate_program(g, {"sm_90a", config});
    ASSERT_FALSE(prog.ok()) << config;
    EXPECT_NE(prog.error().message.find("wgmma_cluster=2 on conv2d takes the per-tap TMA path"), std::string::npos)
        << config << ": " << prog.error().message;
  }
  auto pp = generate_program(g, {"sm_90a", "wgmma_cluster=2,wgmma_schedule=pingpong"});
  ASSERT_FALSE(pp.ok());
  EXPECT_NE(pp.error().message.find("runs the cooperative schedule"), std::string::npos) << pp.error().message;
  auto fp32 = generate_program(conv_chain(Precision::FP32, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)),
                               {"sm_90a", "wgmma_cluster=2"});
  ASSERT_FALSE(fp32.ok());
  EXPECT_NE(fp32.error().message.find("not 3xTF32"), std::string::npos) << fp32.error().message;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The sanitizer specs of this session's opt-in paths compile under them: the runs specs with the NCHW producer
// (both depths), the reduced seed 3 (fp32 and bf16) with halo_prefetch=1 on sm_80 and sm_90a.
TEST(CodegenConvWgmma, SanitizerSpecsCompileUnderTheOptInPaths) {
  std::vector<CompileJob> jobs;
  auto add = [&](const std::string& name, const std::string& arch, const std::string& config, const char* says) {
    const std::string label = name + " " + arch + " '" + config + "'";
    auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/" + name + ".yaml");
    ASSERT_TRUE(g) << label << ": " << g.error().str();
    auto prog = generate_program(*g, {arch, config});
    ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
    EXPECT_NE(prog->source.find(says), std::string::npos) << label << ": " << says;
    jobs.push_back({label, arch, prog->name, prog->source});
  };
  for (const char* name : {"conv_runs_bf16", "conv_runs_tf32_odd"})
    for (const char* config : {"conv_nchw=1", "conv_nchw=2"}) add(name, "sm_90a", config, "fj::ConvNchwOperands<");
  for (const char* name : {"seed3_small", "seed3_small_bf16"})
    for (const char* arch : {"sm_80", "sm_90a"}) add(name, arch, "halo_prefetch=1", "conv.accumulate_prefetched<");
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// Several NCHW outputs (a training forward's saved conv output next to the chain's): the runs epilogue takes
// two by default (conv_runs=2), one tile_nchw_store each; conv_runs=1 gives the second to the fp32-staged
// epilogue; out-of-range values are errors.
TEST(CodegenConvWgmma, RunsEpilogueTakesTwoOutputsByDefault) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::TF32}) {
    GraphBuilder g(p, "conv_two_outputs");
    auto c = g.conv2d(g.input("x", {2, 64, 18, 20}), g.input("w", {128, 64, 3, 3}), g.input("b", {128}), padded(0));
    g.output("y", c.relu().add(g.input("bias", {128, 1, 1})));
    g.output("c", c);
    const Graph graph = g.build().take();
    auto one = generate_program(graph, {"sm_90a", "conv_runs=1"});
    ASSERT_TRUE(one.ok()) << one.error().str();
    EXPECT_EQ(one->source.find("fj::tile_nchw_store<"), std::string::npos) << one->plan_text;
    for (const char* config : {"", "conv_runs=2,wgmma_schedule=pingpong"}) {
      const std::string label = std::string(precision_name(p)) + " '" + config + "'";
      auto prog = generate_program(graph, {"sm_90a", config});
      ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
      EXPECT_NE(prog->source.find("fj_epilogue_value_0("), std::string::npos) << label;
      EXPECT_NE(prog->source.find("fj_epilogue_value_1("), std::string::npos) << label;
      EXPECT_NE(prog->source.find("p.out_c, reinterpret_cast<char*>(smem),"), std::string::npos) << label;
      EXPECT_NE(prog->source.find("p.out_y, reinterpret_cast<char*>(smem),"), std::string::npos) << label;
      jobs.push_back({label, "sm_90a", prog->name, prog->source});
    }
    auto bad = generate_program(graph, {"sm_90a", "conv_runs=5"});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("conv_runs must be the most outputs the runs epilogue takes, 0 to 4"),
              std::string::npos)
        << bad.error().message;
  }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// 3x3 windows fit no power-of-two patch: the pool gets its own kernel.
TEST(CodegenConvWgmma, PoolWindowsThatTileNoPatchAreNotFused) {
  auto prog = generate_program(
      conv_chain(Precision::BF16, {2, 64, 12, 12}, {32, 64, 3, 3}, padded(1), [](Value v) {
        Pool2dOptions o;
        o.kernel = {3, 3};
        return v.max_pool2d(o);
      }),
      {"sm_90a", ""});
  ASSERT_TRUE(prog.ok()) << prog.error().str();
  EXPECT_NE(prog->name.find("_wgmma_bf16"), std::string::npos) << prog->name;
  EXPECT_NE(prog->plan_text.find("(power-of-two sides) holds whole 3x3 windows"), std::string::npos)
      << prog->plan_text;
  EXPECT_EQ(testing::chain_launches(*prog), 2u) << prog->plan_text;  // the conv, then the pool kernel
}

}  // namespace
}  // namespace fusejit
