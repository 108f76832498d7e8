// CPU (no GPU): linear and (batched) matmul anchors on the mma.sync mainloop.
// matmul (B read as [K, N]) and batched matmul with broadcast batch dims run
// mma.sync on sm_80 and sm_90a; linear runs it on sm_80, and on sm_90a where
// TMA cannot read its rows (K * element size not a multiple of 16 bytes) or
// when forced. Every variant (precision x arch x ragged shape x tile) compiles
// with NVRTC; config errors are clear; the default configs do not spill and
// (where cuobjdump exists) hold HMMA. The GPU side is gpu_gemm_mma_test.cpp.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/cubin.h"
#include "fusejit/builder.h"
#include "tests/compile_jobs.h"
#include "tests/mma_kinds.h"

namespace fusejit {
namespace {

using test_util::kPrecisions;
using test_util::mma_kind;

using test_util::compile_all;
using test_util::CompileJob;

// gelu(a @ b + bias), its row sum too: a [3, 1, M, K] @ b [4, K, N].
Graph batched_matmul(Precision p, int64_t m, int64_t k, int64_t n) {
  GraphBuilder g(p, "batched_matmul");
  auto a = g.input("a", {3, 1, m, k});
  auto b = g.input("b", {4, k, n});
  auto bias = g.input("bias", {n});
  auto y = g.matmul(a, b).add(bias).gelu();
  g.output("y", y);
  g.output("s", y.sum({-1}, true));
  auto built = g.build();
  EXPECT_TRUE(built) << built.error().str();
  return built.take();
}

// relu(linear(x, w, b)) and its row max.
Graph linear_chain(Precision p, int64_t m, int64_t k, int64_t n) {
  GraphBuilder g(p, "linear_chain");
  auto x = g.input("x", {m, k});
  auto w = g.input("w", {n, k});
  auto b = g.input("b", {n});
  auto y = g.linear(x, w, b).relu();
  g.output("y", y);
  g.output("m", y.max({-1}));
  auto built = g.build();
  EXPECT_TRUE(built) << built.error().str();
  return built.take();
}

void expect_mma(const Program& prog, Precision p, const std::string& label) {
  EXPECT_NE(prog.name.find("_mma_" + mma_kind(p)), std::string::npos) << label << ": kernel " << prog.name;
  EXPECT_NE(prog.plan_text.find("mma " + mma_kind(p) + " tile"), std::string::npos) << label << "\n"
                                                                                     << prog.plan_text;
}

// Ragged shapes: M = 1, odd N and K (16-bit rows of odd length: element-wise
// staging; fp32 rows of odd length: 4-byte cp.async), aligned ones (16-byte).
const int64_t kShapes[][3] = {{1, 64, 64}, {100, 72, 45}, {33, 37, 130}, {129, 256, 96}};

TEST(CodegenGemmMma, MatmulRunsMmaOnSm80AndSm90a) {
  std::vector<CompileJob> jobs;
  for (Precision p : kPrecisions)
    for (const auto& s : kShapes)
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mma_tile=64x32x4", "mma_tile=128x256x3"}) {
          const Graph g = batched_matmul(p, s[0], s[1], s[2]);
          const std::string label = "matmul " + std::string(precision_name(p)) + " " + std::to_string(s[0]) + "x" +
                                    std::to_string(s[1]) + "x" + std::to_string(s[2]) + " " + arch + " '" + config +
                                    "'";
          auto prog = generate_program(g, {arch, config});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          expect_mma(*prog, p, label);
          EXPECT_NE(prog->plan_text.find("B [K, N]"), std::string::npos) << label << "\n" << prog->plan_text;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenGemmMma, LinearRunsMmaOnSm80AndWhereTmaCannot) {
  std::vector<CompileJob> jobs;
  for (Precision p : kPrecisions)
    for (const auto& s : kShapes) {
      const Graph g = linear_chain(p, s[0], s[1], s[2]);
      const int elem = p == Precision::BF16 || p == Precision::F16 ? 2 : 4;
      const bool tma_rows = (s[1] * elem) % 16 == 0;
      const std::string shape = std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mainloop=mma", "mainloop=mma,mma_tile=64x16x2"}) {
          const std::string label = "linear " + std::string(precision_name(p)) + " " + shape + " " + arch + " '" +
                                    config + "'";
          auto prog = generate_program(g, {arch, config});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          // sm_90a runs wgmma where TMA reads the rows, except 3xTF32 small grids (mma.sync split-K).
          if (std::string(arch) == "sm_90a" && tma_rows && *config == '\0' &&
              (p != Precision::FP32 || prog->plan_text.find("split-K") == std::string::npos)) {
            EXPECT_NE(prog->name.find("_wgmma_"), std::string::npos) << label << ": " << prog->name;
            continue;
          }
          expect_mma(*prog, p, label);
          if (std::string(arch) == "sm_90a" && !tma_rows && *config == '\0')
            EXPECT_NE(prog->plan_text.find("TMA needs rows of a multiple of 16 bytes"), std::string::npos)
                << label << "\n" << prog->plan_text;
          jobs.push_back({label, arch, prog->name, prog->source});
        }
    }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// Operands the kernel copies in 16- or 4-byte pieces are listed with the
// alignment their address needs (the runtime checks it before launching).
TEST(CodegenGemmMma, LaunchListsTheAlignmentOfCopiedOperands) {
  auto aligned = [](const Program& prog, int input) {
    for (const AlignedBuffer& a : prog.launches[0].aligned)
      if (a.buffer == BufferRef{BufferKind::Input, input}) return a.bytes;
    return 0;
  };
  auto bf16_even = generate_program(batched_matmul(Precision::BF16, 100, 72, 45), {"sm_80", ""});
  ASSERT_TRUE(bf16_even.ok()) << bf16_even.error().str();
  EXPECT_EQ(aligned(*bf16_even, 0), 16);  // rows of 72 bf16: 144 bytes
  EXPECT_EQ(aligned(*bf16_even, 1), 2);   // rows of 45 bf16: element-wise
  auto f32_odd = generate_program(linear_chain(Precision::TF32, 33, 37, 130), {"sm_80", ""});
  ASSERT_TRUE(f32_odd.ok()) << f32_odd.error().str();
  EXPECT_EQ(aligned(*f32_odd, 0), 4);
  EXPECT_EQ(aligned(*f32_odd, 1), 4);
  auto ffma = generate_program(linear_chain(Precision::TF32, 33, 64, 130), {"sm_80", "mainloop=ffma"});
  ASSERT_TRUE(ffma.ok()) << ffma.error().str();
  EXPECT_TRUE(ffma->launches[0].aligned.empty());
}

// A GEMM whose tiles leave most SMs idle and whose K is long runs split-K on
// mma.sync (zeroed arrival counters, one accumulator slab per split): on
// sm_80 in every mode, on sm_90a in fp32 mode (3xTF32; the other modes split
// on wgmma); split_k= forces it; every variant compiles.
TEST(CodegenGemmMma, SplitKForSmallGrids) {
  std::vector<CompileJob> jobs;
  for (Precision p : kPrecisions)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const std::string label = "linear 100x1000x500 " + std::string(precision_name(p)) + " " + arch;
      auto prog = generate_program(linear_chain(p, 100, 1000, 500), {arch, ""});
      ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
      for (const char* config : {"split_k=3", "mainloop=mma,split_k=2,mma_tile=128x128x4"}) {
        auto forced = generate_program(batched_matmul(p, 100, 520, 45), {arch, config});
        ASSERT_TRUE(forced.ok()) << label << " " << config << ": " << forced.error().str();
        EXPECT_NE(forced->plan_text.find("split-K"), std::string::npos) << forced->plan_text;
        jobs.push_back({label + " matmul " + config, arch, forced->name, forced->source});
      }
      if (std::string(arch) == "sm_90a" && p != Precision::FP32) {  // wgmma is faster there (H100)
        EXPECT_NE(prog->name.find("_wgmma_"), std::string::npos) << label << ": " << prog->name;
        // split-K from 32 k-tiles: tf32 (K = 1000: 32 of 32 elements) but not 16-bit (16 of 64)
        EXPECT_EQ(prog->plan_text.find("split-K") != std::string::npos, p == Precision::TF32)
            << label << "\n" << prog->plan_text;
        continue;
      }
      expect_mma(*prog, p, label);
      EXPECT_NE(prog->plan_text.find("split-K"), std::string::npos) << label << "\n" << prog->plan_text;
      EXPECT_GT(prog->launches[0].grid[2], 1u) << label;
      bool zeroed_counters = false;
      for (const ScratchSpec& sc : prog->scratch) zeroed_counters = zeroed_counters || (sc.zeroed && sc.what.find("counters") != std::string::npos);
      EXPECT_TRUE(zeroed_counters) << label;
      jobs.push_back({label, arch, prog->name, prog->source});
    }
  auto big = generate_program(linear_chain(Precision::BF16, 4096, 4096, 4096), {"sm_90a", ""});
  ASSERT_TRUE(big.ok()) << big.error().str();
  EXPECT_NE(big->name.find("_wgmma_"), std::string::npos) << big->plan_text;
  auto short_k = generate_program(linear_chain(Precision::BF16, 100, 64, 500), {"sm_80", ""});
  ASSERT_TRUE(short_k.ok()) << short_k.error().str();
  EXPECT_EQ(short_k->plan_text.find("split-K"), std::string::npos) << "K = 64 is one k tile\n" << short_k->plan_text;
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// Long K (128 to 4095 k tiles) keeps the wide default tile and splits it for
// one wave of resident blocks (3xTF32: one block an SM): a second, partial
// wave costs as much as the first (H200, session 59, docs/perf-notes.md).
TEST(CodegenGemmMma, LongKSplitsTheWideTileForOneWave) {
  struct Case {
    int64_t m, k, n;
    const char* plan;
    unsigned tiles, splits;
  };
  for (const Case& c : {Case{64, 8192, 2048, "mma f32x3 tile 64x128, 3 stages, 256 threads, split-K 8", 16, 8},
                        Case{48, 4096, 4096, "mma f32x3 tile 64x128, 3 stages, 256 threads, split-K 4", 32, 4}}) {
    auto prog = generate_program(linear_chain(Precision::FP32, c.m, c.k, c.n), {"sm_90a", ""});
    ASSERT_TRUE(prog.ok()) << prog.error().str();
    EXPECT_NE(prog->plan_text.find(c.plan), std::string::npos) << prog->plan_text;
    ASSERT_FALSE(prog->launches.empty());
    EXPECT_EQ(prog->launches[0].grid[1], c.tiles) << prog->plan_text;
    EXPECT_EQ(prog->launches[0].grid[2], c.splits) << prog->plan_text;
    EXPECT_LE(c.tiles * c.splits, 132u) << "one wave on an H100's 132 SMs";
  }
}

// The default configs of the mma.sync GEMMs (the bench shapes, a split-K
// one, batched matmul with its row sum) compile without spills in any of
// their kernels, and (where cuobjdump exists) the anchor's SASS holds HMMA.
TEST(CodegenGemmMma, DefaultConfigsCompileWithoutSpillsAndHoldHmma) {
  bool have_cuobjdump = false;
  struct Case {
    std::string label, arch;
    Graph graph;
  };
  std::vector<Case> cases;
  for (Precision p : kPrecisions) {
    const std::string prec(precision_name(p));
    cases.push_back({"matmul 4096^3 " + prec, "sm_90a", batched_matmul(p, 4096, 4096, 4096)});
    cases.push_back({"linear 4096^3 " + prec, "sm_80", linear_chain(p, 4096, 4096, 4096)});
    cases.push_back({"linear 1024x8192x8192 " + prec, "sm_80", linear_chain(p, 1024, 8192, 8192)});
  }
  cases.push_back({"linear 100x1000x500 fp32 (split-K)", "sm_90a", linear_chain(Precision::FP32, 100, 1000, 500)});
  cases.push_back({"linear 256x16384x16384 bf16 (split-K)", "sm_80", linear_chain(Precision::BF16, 256, 16384, 16384)});
  for (const Case& c : cases) {
    auto prog = generate_program(c.graph, {c.arch, ""});
    ASSERT_TRUE(prog.ok()) << c.label << ": " << prog.error().str();
    ASSERT_NE(prog->name.find("_mma_"), std::string::npos) << c.label << "\n" << prog->plan_text;
    auto cubin = compile_to_cubin(prog->source, prog->name, {c.arch, false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << c.label << ": " << cubin.error().str();
    const auto kernels = parse_ptxas_info(cubin->log);
    EXPECT_FALSE(kernels.empty()) << c.label << "\n" << cubin->log;
    for (const KernelResources& k : kernels)
      EXPECT_EQ(k.spill_stores + k.spill_loads, 0) << c.label << ": " << k.function << " spills\n" << cubin->log;
    const auto sass = test_util::sass_of(cubin->cubin, ::testing::TempDir(), prog->name + "_" + c.arch);
    have_cuobjdump = sass.has_value();
    if (!sass) continue;
    EXPECT_NE(sass->find("HMMA"), std::string::npos) << c.label << ": no HMMA in the SASS";
  }
  if (!have_cuobjdump) GTEST_SKIP() << "spills checked; no cuobjdump here for the HMMA check";
}

TEST(CodegenGemmMma, ConfigErrorsSayWhy) {
  const Graph mm = batched_matmul(Precision::TF32, 64, 64, 64);
  auto wgmma = generate_program(mm, {"sm_90a", "mainloop=wgmma"});
  ASSERT_FALSE(wgmma.ok());
  EXPECT_NE(wgmma.error().str().find("matmul's B has batch dims"), std::string::npos) << wgmma.error().str();
  auto narrow = generate_program(mm, {"sm_80", "mma_tile=128x16x3"});
  ASSERT_FALSE(narrow.ok());
  EXPECT_NE(narrow.error().str().find("bn >= 32"), std::string::npos) << narrow.error().str();
  auto old_arch = generate_program(mm, {"sm_75", "mainloop=mma"});
  ASSERT_FALSE(old_arch.ok());
  EXPECT_NE(old_arch.error().str().find("sm_80 or newer"), std::string::npos) << old_arch.error().str();
  for (const char* bad : {"split_k=0", "split_k=1025", "split_k=x"}) {
    auto r = generate_program(mm, {"sm_80", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().str().find("split_k must be an integer in [1, 1024]"), std::string::npos) << r.error().str();
  }
  GraphBuilder cb(Precision::BF16, "conv");
  auto cx = cb.input("x", {2, 16, 12, 12});
  auto cw = cb.input("w", {32, 16, 3, 3});
  cb.output("y", cb.conv2d(cx, cw));
  auto conv = cb.build();
  ASSERT_TRUE(conv.ok()) << conv.error().str();
  auto conv_split = generate_program(*conv, {"sm_80", "split_k=2"});
  ASSERT_FALSE(conv_split.ok());
  EXPECT_NE(conv_split.error().str().find("split_k applies to linear, matmul and conv2d_weight_grad"), std::string::npos)
      << conv_split.error().str();
  // 16-bit B [K, N] takes any tile width (ldmatrix.trans).
  EXPECT_TRUE(generate_program(batched_matmul(Precision::BF16, 64, 64, 64), {"sm_80", "mma_tile=128x16x3"}).ok());
}

}  // namespace
}  // namespace fusejit
