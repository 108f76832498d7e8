// The conv2d mma.sync mainloop (no GPU needed): conv anchors for sm_80, and
// for sm_90a where the TMA conv path cannot run (strided, grouped, Cin not in
// 128-byte blocks: codegen_conv_wgmma_test.cpp), pick it by default in every
// precision (3xTF32 "f32x3" in fp32 mode); mainloop=mma forces it and
// mainloop=ffma keeps SIMT, mma_tile= reaches the plan and its bad values are
// config errors naming the key, and the CUDA sources NVRTC makes of it
// compile to CUBINs for both archs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/compile_jobs.h"
#include "tests/mma_kinds.h"

namespace fusejit {
namespace {

using test_util::kPrecisions;
using test_util::mma_kind;

using test_util::compile_all;
using test_util::CompileJob;

Graph finish(GraphBuilder& g) {
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.ok() ? built.take() : Graph{};
}

// Seed 1, smaller: relu(conv(x)) + bias[C,1,1].
Graph seed1_like(Precision p) {
  GraphBuilder g(p, "seed1_like");
  auto x = g.input("x", {2, 16, 18, 18});
  auto w = g.input("conv_w", {32, 16, 3, 3});
  auto b = g.input("conv_b", {32});
  auto bias = g.input("bias", {32, 1, 1});
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output("y", g.conv2d(x, w, b, o).relu().add(bias));
  return finish(g);
}

// Seed 3, smaller: MaxPool2d(4)(tanh(conv(x)) * 2 + bias[C,1,1]).
Graph seed3_like(Precision p) {
  GraphBuilder g(p, "seed3_like");
  auto x = g.input("x", {2, 8, 34, 34});
  auto w = g.input("conv_w", {64, 8, 3, 3});
  auto b = g.input("conv_b", {64});
  auto bias = g.input("bias", {64, 1, 1});
  Pool2dOptions pool;
  pool.kernel = {4, 4};
  g.output("y", g.conv2d(x, w, b).tanh().mul(2.0).add(bias).max_pool2d(pool));
  return finish(g);
}

// Grouped (4), dilated (2) conv without bias; hardswish; overlapping max pool.
Graph grouped_dilated(Precision p) {
  GraphBuilder g(p, "grouped_dilated");
  auto x = g.input("x", {2, 32, 20, 20});
  auto w = g.input("w", {64, 8, 3, 3});
  Conv2dOptions o;
  o.padding = {2, 2};
  o.dilation = {2, 2};
  o.groups = 4;
  Pool2dOptions pool;
  pool.kernel = {3, 3};
  pool.stride = {2, 2};
  pool.padding = {1, 1};
  g.output("y", g.conv2d(x, w, std::nullopt, o).hardswish().max_pool2d(pool));
  return finish(g);
}

// tanh(min over channels, keepdim).
Graph channel_min(Precision p) {
  GraphBuilder g(p, "channel_min");
  auto x = g.input("x", {2, 16, 16, 16});
  auto w = g.input("w", {32, 16, 3, 3});
  auto b = g.input("b", {32});
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output("y", g.conv2d(x, w, b, o).min({1}, true).tanh());
  return finish(g);
}

// Seed 1's K (64 x 3 x 3 = 576) on a small image: relu(conv(x)) + bias.
Graph seed1_deep_k(Precision p) {
  GraphBuilder g(p, "seed1_deep_k");
  auto x = g.input("x", {2, 64, 10, 10});
  auto w = g.input("conv_w", {32, 64, 3, 3});
  auto b = g.input("conv_b", {32});
  auto bias = g.input("bias", {32, 1, 1});
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output("y", g.conv2d(x, w, b, o).relu().add(bias));
  return finish(g);
}

// A conv's input gradient (dX) shape: Cin 64 -> Cout 8, padding 2: halo
// patches in blocks of channels (conv_patch.cuh with CCB).
Graph narrow_deep(Precision p) {
  GraphBuilder g(p, "narrow_deep");
  auto x = g.input("x", {2, 64, 12, 12});
  auto w = g.input("w", {8, 64, 3, 3});
  Conv2dOptions o;
  o.padding = {2, 2};
  g.output("y", g.conv2d(x, w, std::nullopt, o));
  return finish(g);
}

// Uneven channel blocks: 2 groups of 24 channels, 5x5 (25 taps per chunk).
Graph narrow_grouped_5x5(Precision p) {
  GraphBuilder g(p, "narrow_grouped_5x5");
  auto x = g.input("x", {2, 48, 11, 11});
  auto w = g.input("w", {12, 24, 5, 5});
  auto b = g.input("b", {12});
  Conv2dOptions o;
  o.padding = {2, 2};
  o.groups = 2;
  g.output("y", g.conv2d(x, w, b, o).gelu());
  return finish(g);
}

struct GraphMaker {
  const char* name;
  Graph (*make)(Precision);
  bool wgmma_on_sm90a;  // stride 1, one group, Cin = 64 (128-byte blocks in every precision), K >= 256
};
const GraphMaker kGraphs[] = {{"seed1_like", seed1_like, false},       {"seed3_like", seed3_like, false},
                              {"grouped_dilated", grouped_dilated, false}, {"channel_min", channel_min, false},
                              {"seed1_deep_k", seed1_deep_k, true},   {"narrow_deep", narrow_deep, false},
                              {"narrow_grouped_5x5", narrow_grouped_5x5, false}};

// Every conv graph in every precision picks mma.sync for sm_80 and, when
// forced, for sm_90a; by default sm_90a runs the TMA-eligible one on wgmma
// and says why not for the others. Every source compiles for its arch.
TEST(CodegenConvMma, ConvAnchorsRunMmaOnSm80AndSm90a) {
  std::vector<CompileJob> jobs;
  for (const GraphMaker& maker : kGraphs)
    for (Precision p : kPrecisions) {
      const Graph g = maker.make(p);
      const std::string kind = mma_kind(p);
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mainloop=mma"}) {
          const std::string label = std::string(maker.name) + " " + std::string(precision_name(p)) + " " + arch +
                                    " config '" + config + "'";
          auto prog = generate_program(g, {arch, config});
          if (!prog) {
            ADD_FAILURE() << label << ": codegen: " << prog.error().str();
            continue;
          }
          if (maker.wgmma_on_sm90a && std::string(arch) == "sm_90a" && *config == '\0') {
            EXPECT_NE(prog->name.find("_wgmma_" + kind), std::string::npos) << label << ": kernel " << prog->name;
            EXPECT_NE(prog->plan_text.find("wgmma " + kind + " tile"), std::string::npos) << label << "\n"
                                                                                       << prog->plan_text;
            jobs.push_back({label, arch, prog->name, prog->source});
            continue;
          }
          // By default fp32 (3xTF32) may keep FFMA where the plan says why
          // (a short K, where FFMA is faster); mainloop=mma forces it.
          if (p == Precision::FP32 && *config == '\0' && prog->name.find("_mma_") == std::string::npos) {
            EXPECT_NE(prog->plan_text.find("not mma.sync"), std::string::npos) << label << "\n" << prog->plan_text;
            continue;
          }
          EXPECT_NE(prog->name.find("_mma_" + kind), std::string::npos) << label << ": kernel " << prog->name;
          EXPECT_NE(prog->plan_text.find("mma " + kind + " tile"), std::string::npos) << label << "\n"
                                                                                     << prog->plan_text;
          if (std::string(arch) == "sm_90a")
            EXPECT_NE(prog->plan_text.find("(not wgmma: "), std::string::npos) << label << "\n" << prog->plan_text;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
    }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// Many input channels into few output channels (a dX conv's shape): halo
// patches in blocks of channels, on both archs, in every precision.
TEST(CodegenConvMma, NarrowDeepConvsTakeHaloPatchesInChannelBlocks) {
  for (Precision p : kPrecisions)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const std::string label = std::string(precision_name(p)) + " " + arch;
      auto prog = generate_program(narrow_deep(p), {arch, ""});
      ASSERT_TRUE(prog) << label << ": " << prog.error().str();
      EXPECT_NE(prog->plan_text.find("from halo patches"), std::string::npos) << label << "\n" << prog->plan_text;
      const char* blocks = p == Precision::FP32 || p == Precision::TF32 ? "blocks of 16 channels" : "blocks of 32 channels";
      EXPECT_NE(prog->plan_text.find(blocks), std::string::npos) << label << "\n" << prog->plan_text;
      // 16-column tiles: 64 pixels (3xTF32: no spills; tf32 / 16-bit: more blocks, measured faster).
      const char* tile = "tile 64x16 from halo patches";
      EXPECT_NE(prog->plan_text.find(tile), std::string::npos) << label << "\n" << prog->plan_text;
      auto wide = generate_program(seed1_like(p), {arch, "mainloop=mma"});  // Cout 32: one block of 16 channels
      ASSERT_TRUE(wide) << label << ": " << wide.error().str();
      EXPECT_EQ(wide->plan_text.find("blocks of"), std::string::npos) << label << "\n" << wide->plan_text;
    }
}

// A forced tile reaches the plan, and compiles.
TEST(CodegenConvMma, MmaTileConfigReachesThePlan) {
  std::vector<CompileJob> jobs;
  for (Precision p : kPrecisions) {
    const Graph g = seed1_like(p);
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const std::string label = std::string("seed1_like ") + std::string(precision_name(p)) + " " + arch;
      auto prog = generate_program(g, {arch, "mainloop=mma,mma_tile=64x32x3"});
      ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
      EXPECT_NE(prog->name.find("_mma_" + mma_kind(p)), std::string::npos) << prog->name;
      EXPECT_NE(prog->plan_text.find("mma " + mma_kind(p) + " tile 64x32"), std::string::npos) << prog->plan_text;
      jobs.push_back({label + " mma_tile=64x32x3", arch, prog->name, prog->source});
    }
  }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// fp32 mode runs 3xTF32 by default where K is long (seed 1's 576): mma.sync
// on sm_80 (and on sm_90a when forced), wgmma on sm_90a.
TEST(CodegenConvMma, Fp32DefaultsTo3xTf32ForSeed1K) {
  const struct {
    const char *arch, *config, *mainloop;
  } cases[] = {{"sm_80", "", "mma"}, {"sm_90a", "mainloop=mma", "mma"}, {"sm_90a", "", "wgmma"}};
  for (const auto& c : cases) {
    auto prog = generate_program(seed1_deep_k(Precision::FP32), {c.arch, c.config});
    ASSERT_TRUE(prog.ok()) << prog.error().str();
    const std::string mainloop = c.mainloop;
    EXPECT_NE(prog->name.find("_" + mainloop + "_f32x3"), std::string::npos) << c.arch << " '" << c.config
                                                                             << "': " << prog->name << "\n"
                                                                             << prog->plan_text;
    EXPECT_NE(prog->plan_text.find(" " + mainloop + " f32x3 tile"), std::string::npos) << prog->plan_text;
  }
}

TEST(CodegenConvMma, FfmaConfigKeepsTheSimtConv) {
  for (const GraphMaker& maker : kGraphs)
    for (Precision p : kPrecisions)
      for (const char* arch : {"sm_80", "sm_90a"}) {
        const std::string label = std::string(maker.name) + " " + std::string(precision_name(p)) + " " + arch;
        auto prog = generate_program(maker.make(p), {arch, "mainloop=ffma"});
        ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
        EXPECT_EQ(prog->name.find("_mma_"), std::string::npos) << label << ": kernel " << prog->name;
        EXPECT_EQ(prog->plan_text.find("mma " + mma_kind(p) + " tile"), std::string::npos) << label << "\n"
                                                                                         << prog->plan_text;
        EXPECT_NE(prog->plan_text.find("mainloop=ffma"), std::string::npos) << label << "\n" << prog->plan_text;
      }
}

TEST(CodegenConvMma, BadMmaTilesAreConfigErrors) {
  const Graph g = seed1_like(Precision::BF16);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (const char* bad : {"mma_tile=100x64x3", "mma_tile=128x64x9", "mainloop=mma,mma_tile=100x64x3",
                            "mainloop=mma,mma_tile=128x64x9", "mma_tile=128x64", "mma_tile=128x48x3",
                            "mma_tile=128x64x1", "mma_tile=128x64x3x48", "mma_tile=128x32x3x64",
                            "mma_tile=128x64x3x32x2"}) {
      auto p = generate_program(g, {arch, bad});
      EXPECT_FALSE(p.ok()) << bad << " (" << arch << ") was accepted";
      if (p.ok()) continue;
      EXPECT_NE(p.error().message.find("codegen config"), std::string::npos) << bad << ": " << p.error().message;
      EXPECT_NE(p.error().message.find("mma_tile"), std::string::npos) << bad << ": " << p.error().message;
    }
    // The bounds themselves are valid.
    for (const char* good : {"mma_tile=64x16x2", "mma_tile=128x128x3", "mma_tile=64x64x6"}) {
      auto p = generate_program(g, {arch, good});
      EXPECT_TRUE(p.ok()) << good << " (" << arch << "): " << p.error().str();
    }
    // A warp's columns on request (4th field): 128x64 as 2x2 warps of 64x32.
    auto wide = generate_program(g, {arch, "mma_tile=128x64x3x32"});
    ASSERT_TRUE(wide.ok()) << wide.error().str();
    EXPECT_NE(wide->source.find("fj::MmaTile<128, 64, "), std::string::npos);
    EXPECT_NE(wide->source.find(", 64, 32, 3>"), std::string::npos) << "warp tile 64x32";
    EXPECT_NE(wide->plan_text.find("128 threads (warps 64x32)"), std::string::npos) << wide->plan_text;
  }
}

// halo_pipeline=1: two cp.async halo buffers where the halo takes several
// channel blocks of 4-byte elements; elsewhere the same source as without it.
// The default: on for 3xTF32 only; halo_pipeline=0 turns it off.
TEST(CodegenConvMma, HaloPipelineDoubleBuffersMultiBlockFp32Halos) {
  std::vector<CompileJob> jobs;
  for (Precision p : kPrecisions)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const std::string label = std::string(precision_name(p)) + " " + arch;
      auto piped = generate_program(narrow_deep(p), {arch, "halo_pipeline=1"});
      auto plain = generate_program(narrow_deep(p), {arch, ""});
      ASSERT_TRUE(piped && plain) << label;
      const bool four_byte = p == Precision::FP32 || p == Precision::TF32;
      EXPECT_EQ(piped->source.find(", 4, 2>;") != std::string::npos, four_byte) << label << "\n" << piped->source;
      EXPECT_EQ(piped->plan_text.find("two buffers filled by cp.async") != std::string::npos, four_byte)
          << label << "\n" << piped->plan_text;
      if (!four_byte) EXPECT_EQ(piped->source, plain->source) << label;
      EXPECT_EQ(plain->source.find(", 4, 2>;") != std::string::npos, p == Precision::FP32) << label << ": default";
      auto off = generate_program(narrow_deep(p), {arch, "halo_pipeline=0"});
      ASSERT_TRUE(off) << label;
      EXPECT_EQ(off->source.find(", 4, 2>;"), std::string::npos) << label;
      if (four_byte) jobs.push_back({"narrow_deep halo_pipeline=1 " + label, arch, piped->name, piped->source});
      auto one_block = generate_program(seed3_like(p), {arch, "halo_pipeline=1"});
      auto one_block_plain = generate_program(seed3_like(p), {arch, ""});
      ASSERT_TRUE(one_block && one_block_plain) << label;
      EXPECT_EQ(one_block->source, one_block_plain->source) << label << ": one channel block, nothing to overlap";
    }
  auto bad = generate_program(narrow_deep(Precision::FP32), {"sm_90a", "halo_pipeline=2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("halo_pipeline"), std::string::npos) << bad.error().message;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// halo_prefetch=1: halo patches of one channel block load the next tile's halo into registers during the MMAs
// (ConvPatchMma::accumulate_prefetched; 4-byte elements by vectors too, the template's VF); every tile and pool
// path compiles for sm_80 and sm_90a; several channel blocks are a config error naming it; by default on for
// 3xTF32 and 16-bit (where eligible), not tf32, and halo_prefetch=0 turns that off.
TEST(CodegenConvMma, HaloPrefetchCompilesAndNamesWhereItCannotApply) {
  std::vector<CompileJob> jobs;
  for (Precision p : kPrecisions)
    for (const char* arch : {"sm_80", "sm_90a"})
      for (const char* tile : {"", ",mma_tile=64x32x3", ",pool_registers=0", ",mma_tile=64x16x2"}) {
        const std::string config = std::string("halo_prefetch=1") + tile;
        const std::string label = std::string(precision_name(p)) + " " + arch + " '" + config + "'";
        auto prog = generate_program(seed3_like(p), {arch, config});
        if (!prog && std::string(tile) == ",mma_tile=64x16x2" &&
            prog.error().message.find("halo_prefetch=1, but") != std::string::npos)
          continue;  // 64 threads: more than two vector units a thread
        ASSERT_TRUE(prog) << label << ": " << prog.error().str();
        EXPECT_NE(prog->source.find("conv.accumulate_prefetched<Pixels>("), std::string::npos) << label;
        EXPECT_NE(prog->source.find("conv.prefetch_halo<Pixels>(blockIdx.x, halo);"), std::string::npos) << label;
        const bool four_byte = p == Precision::FP32 || p == Precision::TF32;
        EXPECT_EQ(prog->source.find(", 1, true>;") != std::string::npos, four_byte) << label;
        jobs.push_back({"seed3_like " + label, arch, prog->name, prog->source});
      }
  for (Precision p : kPrecisions) {
    auto deep = generate_program(narrow_deep(p), {"sm_90a", "halo_prefetch=1"});
    if (!deep) EXPECT_NE(deep.error().message.find("halo_prefetch=1, but"), std::string::npos) << deep.error().message;
  }
  auto sixteen = generate_program(seed3_like(Precision::BF16), {"sm_90a", ""});
  ASSERT_TRUE(sixteen) << sixteen.error().str();
  EXPECT_NE(sixteen->source.find("conv.accumulate_prefetched<Pixels>("), std::string::npos) << "16-bit's default";
  auto plain = generate_program(seed3_like(Precision::TF32), {"sm_90a", ""});
  ASSERT_TRUE(plain) << plain.error().str();
  EXPECT_EQ(plain->source.find("prefetch"), std::string::npos) << "tf32 halos: halo_prefetch is opt-in";
  auto accurate = generate_program(seed3_like(Precision::FP32), {"sm_90a", ""});
  ASSERT_TRUE(accurate) << accurate.error().str();
  EXPECT_NE(accurate->source.find("conv.accumulate_prefetched<Pixels>("), std::string::npos) << "3xTF32's default";
  auto off = generate_program(seed3_like(Precision::FP32), {"sm_90a", "halo_prefetch=0"});
  ASSERT_TRUE(off) << off.error().str();
  EXPECT_EQ(off->source.find("prefetch"), std::string::npos);
  for (Precision p : kPrecisions)  // where it cannot apply, the default quietly does without
    EXPECT_TRUE(generate_program(narrow_deep(p), {"sm_90a", ""})) << precision_name(p);
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// mma_min_blocks reaches __launch_bounds__ (a register cap), compiles, and
// bad values (or more threads than an SM holds) are config errors naming it.
TEST(CodegenConvMma, MinBlocksConfigReachesTheLaunchBounds) {
  const Graph g = narrow_deep(Precision::FP32);  // 128x16 halo tiles: 64 threads
  std::vector<CompileJob> jobs;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto prog = generate_program(g, {arch, "mma_min_blocks=6"});
    ASSERT_TRUE(prog.ok()) << prog.error().str();
    EXPECT_NE(prog->source.find("__launch_bounds__(64, 6)"), std::string::npos) << prog->source;
    jobs.push_back({std::string("narrow_deep mma_min_blocks=6 ") + arch, arch, prog->name, prog->source});
    auto plain = generate_program(g, {arch, ""});
    ASSERT_TRUE(plain.ok()) << plain.error().str();
    EXPECT_NE(plain->source.find("__launch_bounds__(64, 1)"), std::string::npos) << "3xTF32's default";
  }
  for (const char* bad : {"mma_min_blocks=0", "mma_min_blocks=33", "mma_min_blocks=x", "mma_min_blocks=1.5"}) {
    auto p = generate_program(g, {"sm_90a", bad});
    ASSERT_FALSE(p.ok()) << bad << " was accepted";
    EXPECT_NE(p.error().message.find("mma_min_blocks"), std::string::npos) << bad << ": " << p.error().message;
  }
  auto over = generate_program(seed1_like(Precision::BF16), {"sm_80", "mma_tile=128x128x3,mma_min_blocks=16"});
  ASSERT_FALSE(over.ok()) << "16 blocks of 256 threads accepted";
  EXPECT_NE(over.error().message.find("mma_min_blocks=16"), std::string::npos) << over.error().message;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// mainloop=mma where mma.sync cannot run: a linear anchor (accepted or a clear
// error, never a crash), and a conv for an arch older than sm_80 (an error).
TEST(CodegenConvMma, ForcedMmaElsewhereWorksOrIsAClearError) {
  for (Precision p : kPrecisions) {
    GraphBuilder b(p, "linear_forced_mma");
    auto x = b.input("x", {64, 64});
    auto w = b.input("w", {64, 64});
    auto bias = b.input("b", {64});
    b.output("y", b.linear(x, w, bias).relu());
    const Graph g = finish(b);
    auto prog = generate_program(g, {"sm_80", "mainloop=mma"});
    const std::string label = std::string("linear ") + std::string(precision_name(p));
    if (prog.ok()) {
      EXPECT_NE(prog->name.find("_mma_" + mma_kind(p)), std::string::npos) << label << ": kernel " << prog->name;
      auto cubin = compile_to_cubin(prog->source, prog->name, {"sm_80", false, {}});
      EXPECT_TRUE(cubin.ok()) << label << ": " << cubin.error().str().substr(0, 4000);
    } else {
      EXPECT_NE(prog.error().message.find("mainloop=mma"), std::string::npos) << label << ": " << prog.error().message;
    }
  }
  auto old = generate_program(seed1_like(Precision::BF16), {"sm_75", "mainloop=mma"});
  ASSERT_FALSE(old.ok()) << "mainloop=mma accepted for sm_75: " << old->name;
  EXPECT_NE(old.error().message.find("mainloop=mma"), std::string::npos) << old.error().message;
}

}  // namespace
}  // namespace fusejit
