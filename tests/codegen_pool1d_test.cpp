// CPU (no GPU): max / avg pool1d along a linear's or matmul's N fused into
// the anchor epilogue on every mainloop (FFMA, mma.sync, wgmma): tiles of
// whole windows, or overlapping column tiles for windows that cross tile
// edges and for two pools of one value; one kernel, nothing anchor-sized
// stored, and every variant compiles for sm_80 and sm_90a. Windows wider than
// 8 columns, fuse_pool=0 and pools whose input is also an output stay a pool
// kernel of their own, with a note. GPU: gpu_pool1d_test.cpp.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "tests/compile_jobs.h"
#include "tests/pool1d_cases.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::CompileJob;

TEST(CodegenPool1d, FusedIntoEveryMainloop) {
  std::vector<CompileJob> jobs;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::Pool1dCase& c : testing::pool1d_cases())
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "mainloop=wgmma"}) {
          const bool wgmma = std::string(config) == "mainloop=wgmma";
          // wgmma: sm_90a, linear rows TMA can read (16-byte multiples)
          if (wgmma && (std::string(arch) != "sm_90a" || c.matmul || c.x.back() * (p == Precision::BF16 || p == Precision::F16 ? 2 : 4) % 16))
            continue;
          if (std::string(config) == "mainloop=ffma" && p != Precision::FP32) continue;  // FFMA is the fp32 mode's
          const std::string label = c.label + " " + std::string(precision_name(p)) + " " + arch + " '" + config + "'";
          auto g = testing::pool1d_chain(p, c);
          ASSERT_TRUE(g) << label << ": " << g.error().str();
          auto prog = generate_program(*g, {arch, testing::pool1d_config(c, config)});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          EXPECT_EQ(testing::chain_launches(*prog), 1u) << label << "\n" << prog->plan_text;
          const std::string note = c.whole_windows()
                                       ? "fused into the epilogue: tiles hold whole windows of " + std::to_string(c.k)
                                       : "fused into the epilogue: column tiles overlap by " +
                                             std::to_string(std::max(c.k, c.second_k) - 1) + " columns";
          EXPECT_NE(prog->plan_text.find(note), std::string::npos) << label << "\n" << prog->plan_text;
          for (const ScratchSpec& s : testing::chain_scratch(*prog))  // split-K's slabs only, never the unpooled output
            EXPECT_NE(s.what.find("split-K"), std::string::npos) << label << ": " << s.what;
          EXPECT_NE(prog->name.find(std::string(c.is_max ? "maxpool1d" : "avgpool1d") + std::to_string(c.k)),
                    std::string::npos)
              << label << ": " << prog->name;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenPool1d, UnfusedWindowsSayWhy) {
  struct Case {
    int64_t k, stride;
    std::string config, why;
    bool output_unpooled = false;
  };
  const Case cases[] = {{9, 4, "pool1d_overlap=1", "a window of 9 columns is wider than overlapping tiles take (at most 8)"},
                        {4, 4, "fuse_pool=0", "disabled by the codegen config (fuse_pool=0)"},
                        {4, 2, "pool1d_overlap=0",
                         "its windows overlap, leave gaps or are padded; overlapping column tiles are off (pool1d_overlap=0)"},
                        {4, 2, "pool1d_overlap=1", "other consumers need the full anchor-shaped result", true}};
  for (const Case& c : cases) {
    GraphBuilder g(Precision::FP32, "pool1d_unfused");
    auto x = g.input("x", {16, 32});
    Pool1dOptions po;
    po.kernel = c.k;
    po.stride = c.stride;
    auto h = g.linear(x, g.input("w", {48, 32})).relu();
    g.output("y", h.max_pool1d(po));
    if (c.output_unpooled) g.output("h", h);
    auto graph = g.build();
    ASSERT_TRUE(graph) << graph.error().str();
    auto prog = generate_program(*graph, {"sm_90a", c.config});
    ASSERT_TRUE(prog.ok()) << prog.error().str();
    EXPECT_EQ(testing::chain_launches(*prog), 2u) << prog->plan_text;
    EXPECT_NE(prog->plan_text.find("not fused: " + c.why), std::string::npos) << prog->plan_text;
  }
}

// Overlapping tiles: tile_n - overlap columns apart, as many as cover the last window, every split-K slab and
// counter sized for them (the grid's column tiles).
TEST(CodegenPool1d, OverlappingTilesCoverEveryWindow) {
  GraphBuilder g(Precision::FP32, "pool1d_overlap");
  auto x = g.input("x", {256, 1024});
  Pool1dOptions po;
  po.kernel = 4;
  po.stride = 2;
  po.padding = 1;
  g.output("y", g.linear(x, g.input("w", {512, 1024})).max_pool1d(po));  // 256 windows, the last starting at 509
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  for (const char* config : {"pool1d_overlap=1,mainloop=mma,mma_tile=64x16x3,split_k=2", "pool1d_overlap=1,mainloop=ffma",
                             "pool1d_overlap=1,mainloop=wgmma,wgmma_tile=64x64x4"}) {
    auto prog = generate_program(*graph, {"sm_90a", config});
    ASSERT_TRUE(prog.ok()) << config << ": " << prog.error().str();
    const std::string& src = prog->source;
    const size_t at = src.find("constexpr int kColumnStep = ");
    ASSERT_NE(at, std::string::npos) << config;
    const int step = std::stoi(src.substr(at + 28));
    const size_t tile = prog->plan_text.find(" tile ");
    ASSERT_NE(tile, std::string::npos);
    const size_t x_at = prog->plan_text.find('x', tile + 6);
    const int tile_n = std::stoi(prog->plan_text.substr(x_at + 1));
    EXPECT_EQ(step, tile_n - 3) << config << "\n" << prog->plan_text;
    const int tiles = 509 / step + 1;
    if (std::string(config).find("split_k=2") != std::string::npos)
      EXPECT_NE(prog->plan_text.find("split-K arrival counters (i32[" + std::to_string(4 * tiles) + "])"),
                std::string::npos)
          << config << "\n" << prog->plan_text;
    if (std::string(config).find("wgmma") == std::string::npos)
      EXPECT_EQ(prog->launches.back().grid[1], static_cast<unsigned>(tiles)) << config << "\n" << prog->plan_text;
    else
      EXPECT_NE(src.find("constexpr int kNTiles = " + std::to_string(tiles) + ";"), std::string::npos) << config;
  }
}

// A matmul's B [K, N] copied 16 bytes at a time (mma.sync): overlapping tiles start on 8-column boundaries.
TEST(CodegenPool1d, MatmulTilesStartAligned) {
  GraphBuilder g(Precision::BF16, "pool1d_matmul_overlap");
  auto x = g.input("x", {2, 64, 96});
  Pool1dOptions po;
  po.kernel = 4;
  po.stride = 2;
  po.padding = 1;
  g.output("y", g.matmul(x, g.input("w", {96, 200})).max_pool1d(po));
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  for (const char* config : {"pool1d_overlap=1,mainloop=mma", "pool1d_overlap=1,mainloop=ffma"}) {
    auto prog = generate_program(*graph, {"sm_90a", config});
    ASSERT_TRUE(prog.ok()) << config << ": " << prog.error().str();
    const size_t at = prog->source.find("constexpr int kColumnStep = ");
    ASSERT_NE(at, std::string::npos) << config;
    const int step = std::stoi(prog->source.substr(at + 28));
    EXPECT_GT(step, 0) << config;
    EXPECT_EQ(step % 8, 0) << config << ": step " << step;
    const int tiles = (99 * 2 - 1) / step + 1;  // the last window starts at column 197
    EXPECT_EQ(prog->launches.back().grid[1], static_cast<unsigned>(tiles)) << config << "\n" << prog->plan_text;
  }
}

}  // namespace
}  // namespace fusejit
