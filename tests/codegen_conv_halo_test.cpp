// conv2d on wgmma from input halos (templates/conv_wgmma_halo.cuh; opt-in, conv_halo=1|2), no GPU needed: which
// convs take the resident filter and why the others do not, the streamed filter for the wider ones, halos written
// from NCHW x (conv_nchw=1), ping-pong consumers; every variant compiles for sm_90a through NVRTC.
// GPU: gpu_conv_mma_test.cpp (GpuConvMma.WgmmaHalo*).
#include <gtest/gtest.h>

#include <regex>

#include "compiler/codegen.h"
#include "compiler/plan.h"
#include "fusejit/builder.h"
#include "tests/compile_jobs.h"
#include "tests/conv_chains.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::CompileJob;
using test_util::conv_chain;
using test_util::max_pool2;
using test_util::padded;
using test_util::same;

// relu(linear(x [256, 128], w [64, 128])).
Graph linear_chain(Precision p) {
  GraphBuilder g(p, "linear_chain");
  g.output("y", g.linear(g.input("x", {256, 128}), g.input("w", {64, 128})).relu());
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.ok() ? built.take() : Graph{};
}

// The resident-filter halo path (conv_wgmma_halo.cuh, conv_halo=1): patches 8 or 64
// pixels wide, the column tile narrowed to 64 where the filter needs it, one
// halo buffer where two do not fit next to the epilogue's 64-column staging; where it does not apply, an error;
// not by default; and NVRTC compiles each form for sm_90a.
TEST(CodegenConvHalo, HaloPatchesFilterResident) {
  cg::AnchorGeometry geo;
  geo.kh = geo.kw = 3;
  geo.oh = geo.ow = 126;
  const cg::ConvPatch wide = cg::conv_patch(geo, 128, 1, 1, 0, true);
  EXPECT_EQ(wide.bw, 64);
  EXPECT_EQ(wide.bh, 2);
  EXPECT_EQ(cg::conv_patch(geo, 128, 2, 2, 0, true).bw, 64);  // 2x2 windows fit
  EXPECT_EQ(cg::conv_patch(geo, 128, 3, 3, 0, true).bh, 0);   // 3x3 windows: no 8 or 64 wide patch
  geo.ow = 23;
  const cg::ConvPatch narrow = cg::conv_patch(geo, 128, 1, 1, 0, true);
  EXPECT_EQ(narrow.bw, 8);
  EXPECT_EQ(narrow.bh, 16);
  geo.cin = 64;  // bf16: one channel block; filter 9 x 128 rows x 128 bytes, halo 18 x 10 pixels
  EXPECT_EQ(cg::conv_halo_ring_bytes(geo, narrow, 128, 2, 2), 9 * 128 * 128 + 2 * 23552);

  struct Case {
    const char* label;
    Precision p;
    Shape x, w;
    int pad;
    const char* config;
    const char* plan_says;  // "" : an error, `error_says`
    const char* error_says;
  };
  const Case cases[] = {
      {"bf16 2x64 patches", Precision::BF16, {2, 64, 20, 130}, {128, 64, 3, 3}, 0, "conv_halo=1",
       "filter resident, input halo per patch (2 buffers)", ""},
      {"tf32: 64 columns", Precision::TF32, {2, 64, 20, 130}, {128, 64, 3, 3}, 0, "conv_halo=1", "x64, filter resident",
       ""},
      {"f16 8-wide patches, 2 consumers", Precision::F16, {2, 64, 19, 23}, {72, 64, 3, 3}, 1,
       "conv_halo=1,wgmma_tile=128x128x2", "patch of 16x8 pixels", ""},
      {"bf16 128x128: one buffer", Precision::BF16, {2, 64, 20, 130}, {128, 64, 3, 3}, 0,
       "conv_halo=1,wgmma_tile=128x128x2", "tile 128x128, filter resident, input halo per patch (1 buffer)", ""},
      {"bf16 5x5: too large", Precision::BF16, {1, 64, 13, 14}, {40, 64, 5, 5}, 2, "conv_halo=1",
       "", "conv_halo=1, but the filter (204800 bytes for 64 columns)"},
      {"bf16 Cin 256: too large", Precision::BF16, {2, 256, 10, 10}, {256, 256, 3, 3}, 1, "conv_halo=1",
       "", "conv_halo=1, but the filter"},
      {"bf16 default: per-tap boxes", Precision::BF16, {2, 64, 20, 130}, {128, 64, 3, 3}, 0, "",
       "implicit GEMM over patches", ""},
      {"fp32 forced", Precision::FP32, {2, 64, 10, 10}, {32, 64, 3, 3}, 1, "conv_halo=1",
       "", "conv_halo=1, but 3xTF32"},
      {"ping-pong: alternate patches", Precision::BF16, {2, 64, 10, 16}, {32, 64, 3, 3}, 1,
       "conv_halo=1,wgmma_schedule=pingpong", "x64, filter resident, input halo per patch", ""},
      {"ping-pong 128-row tiles, NCHW halos", Precision::BF16, {2, 64, 20, 16}, {64, 64, 3, 3}, 1,
       "conv_halo=1,conv_nchw=1,wgmma_tile=128x64x2,wgmma_schedule=pingpong", "filter resident", ""},
      {"ping-pong, streamed filter", Precision::TF32, {2, 256, 10, 16}, {64, 256, 3, 3}, 1,
       "conv_halo=2,conv_nchw=1,wgmma_schedule=pingpong", "filter streamed", ""},
      {"mma.sync forced", Precision::BF16, {2, 64, 10, 10}, {32, 64, 3, 3}, 1, "conv_halo=1,mainloop=mma",
       "", "conv_halo=1 applies to conv2d on wgmma"},
  };
  std::vector<CompileJob> jobs;
  for (const Case& c : cases) {
    auto prog = generate_program(conv_chain(c.p, c.x, c.w, padded(c.pad)), {"sm_90a", c.config});
    if (*c.error_says) {
      ASSERT_FALSE(prog.ok()) << c.label << ": accepted\n" << prog->plan_text;
      EXPECT_NE(prog.error().message.find(c.error_says), std::string::npos) << c.label << ": " << prog.error().message;
      continue;
    }
    ASSERT_TRUE(prog.ok()) << c.label << ": " << prog.error().str();
    EXPECT_NE(prog->plan_text.find(c.plan_says), std::string::npos) << c.label << "\n" << prog->plan_text;
    const bool halo = prog->plan_text.find("filter resident") != std::string::npos ||
                      prog->plan_text.find("filter streamed") != std::string::npos;
    EXPECT_EQ(prog->source.find("fj::conv_halo_mainloop<") != std::string::npos, halo) << c.label;
    jobs.push_back({c.label, "sm_90a", prog->name, prog->source});
  }
  auto linear = generate_program(linear_chain(Precision::BF16), {"sm_90a", "conv_halo=1"});
  ASSERT_FALSE(linear.ok());
  EXPECT_NE(linear.error().message.find("conv_halo=1 applies to conv2d on wgmma"), std::string::npos)
      << linear.error().message;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// conv_halo=2: the filter streamed through a TMA ring (each channel block's taps in turn) with a halo per patch
// and channel block, where conv_halo=1 cannot keep it resident (Cin 256: 2.4 MB in tf32); from NHWC boxes and
// from NCHW x; compiles for sm_90a.
TEST(CodegenConvHalo, StreamedFilterHaloTakesWideConvs) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::TF32}) {
    const Graph g = conv_chain(p, {2, 256, 8, 56}, {256, 256, 3, 3}, padded(1));
    const std::string label(precision_name(p));
    auto resident = generate_program(g, {"sm_90a", "conv_halo=1"});
    ASSERT_FALSE(resident.ok()) << label;
    EXPECT_NE(resident.error().message.find("do not fit in shared memory"), std::string::npos)
        << resident.error().message;
    for (const char* config : {"conv_halo=2", "conv_halo=2,conv_nchw=1", "conv_halo=2,wgmma_tile=128x128x4"}) {
      auto prog = generate_program(g, {"sm_90a", config});
      ASSERT_TRUE(prog.ok()) << label << " " << config << ": " << prog.error().str();
      EXPECT_NE(prog->plan_text.find("filter streamed ("), std::string::npos) << prog->plan_text;
      EXPECT_NE(prog->plan_text.find("streamed by TMA, each channel block's taps in turn"), std::string::npos)
          << prog->plan_text;
      EXPECT_TRUE(std::regex_search(prog->source, std::regex(R"(fj::ConvHalo<Tile, ConvShape, Pixels, \d+, \d+, \d, (true|false), \d>)")))
          << label << " " << config;
      jobs.push_back({std::string("conv_halo=2 ") + label + " " + config, "sm_90a", prog->name, prog->source});
    }
  }
  auto bad = generate_program(conv_chain(Precision::BF16, {2, 64, 8, 16}, {32, 64, 3, 3}, padded(1)),
                              {"sm_90a", "conv_halo=3"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("conv_halo must be 0, 1"), std::string::npos) << bad.error().message;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// conv_halo=1 with conv_nchw=1: the producer warpgroup's threads write each patch's halo from NCHW x
// (fj::ConvHalo<..., true>::fill_halo_nchw) — no NHWC copy of x, w alone staged and mapped, x's 16-byte
// alignment checked at launch; 16-bit and tf32, padded (the halo's rows start 7 or 3 pixels before the
// patch's aligned column) or not, 8- and 64-pixel patches, with a fused pool; compiles for sm_90a.
TEST(CodegenConvHalo, NchwHaloProducerWritesEachPatchHalo) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32})
    for (int64_t pad : {0, 1})
      for (const Shape& x : {Shape{2, 64, 20, 16}, Shape{2, 64, 6, 72}})
        for (Value (*tail)(Value) : {same, max_pool2}) {
          const std::string label = std::string(precision_name(p)) + " pad " + std::to_string(pad) + " W " +
                                    std::to_string(x[3]) + (tail == same ? "" : " pool");
          const Graph g = conv_chain(p, x, {32, 64, 3, 3}, padded(pad), tail);
          auto prog = generate_program(g, {"sm_90a", "conv_halo=1,conv_nchw=1"});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          EXPECT_NE(prog->source.find(", true>;  // the filter resident, each patch's halo written from NCHW x"),
                    std::string::npos) << label;
          EXPECT_NE(prog->source.find("fj::GemmMaps{nullptr, &tma_b}"), std::string::npos) << label;
          EXPECT_NE(prog->plan_text.find("write the input halo (from NCHW x"), std::string::npos) << prog->plan_text;
          EXPECT_EQ(prog->plan_text.find("x in NHWC"), std::string::npos) << label << ": x staged\n" << prog->plan_text;
          ASSERT_EQ(prog->launches.size(), 2u) << label;
          EXPECT_TRUE(prog->launches[0].operand_staging) << label;  // w reordered
          EXPECT_EQ(prog->launches[1].tensor_maps.size(), 1u) << label;
          bool x_aligned = false;
          for (const AlignedBuffer& a : prog->launches[1].aligned) x_aligned = x_aligned || a.bytes == 16;
          EXPECT_TRUE(x_aligned) << label << ": x's 16-byte alignment is not checked at launch";
          jobs.push_back({"conv_halo nchw " + label, "sm_90a", prog->name, prog->source});
          auto boxes = generate_program(g, {"sm_90a", "conv_halo=1"});  // the TMA halo box keeps x staged
          ASSERT_TRUE(boxes.ok()) << label << ": " << boxes.error().str();
          EXPECT_NE(boxes->plan_text.find("x in NHWC"), std::string::npos) << label;
          EXPECT_NE(boxes->source.find(">(maps, order, ring, nullptr, "), std::string::npos) << label;
        }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace fusejit
