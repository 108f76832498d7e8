// The sm_90a wgmma mainloop (no GPU needed): when the planner picks it and
// why not, its configs and their errors, and the CUBINs NVRTC makes of it
// (no spills in the default configs; HGMMA in the SASS where cuobjdump exists).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/compile_jobs.h"

namespace fusejit {
namespace {

// y = relu(x @ w.T + b), with an optional row reduction of y.
Graph linear_chain(Precision p, int64_t m, int64_t k, int64_t n, const std::string& tail = "",
                   DType operands = DType::F32) {
  GraphBuilder g(p, "linear_chain");
  auto x = g.input("x", {m, k}, operands);
  auto w = g.input("w", {n, k}, operands);
  auto b = g.input("b", {n}, operands);
  auto y = g.linear(x, w).add(b).relu();
  if (tail == "logsumexp") y = y.logsumexp({-1});
  if (tail == "sum") y = y.sum({-1}, true);
  g.output("y", y);
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.take();
}

DType operand_type(Precision p) { return p == Precision::BF16 ? DType::BF16 : p == Precision::F16 ? DType::F16 : DType::F32; }

Program generate(const Graph& g, const std::string& arch = "sm_90a", const std::string& config = "") {
  auto p = generate_program(g, {arch, config});
  EXPECT_TRUE(p.ok()) << p.error().str();
  return p.ok() ? p.take() : Program{};
}

TEST(CodegenWgmma, PlannerPicksWgmmaPerPrecision) {
  const std::pair<Precision, std::string> modes[] = {
      {Precision::BF16, "bf16"}, {Precision::F16, "f16"}, {Precision::TF32, "tf32"}, {Precision::FP32, "f32x3"}};
  for (const auto& [p, kind] : modes) {
    Program prog = generate(linear_chain(p, 2048, 512, 384, "", operand_type(p)));  // enough tiles: no split-K
    EXPECT_NE(prog.plan_text.find("wgmma " + kind), std::string::npos) << prog.plan_text;
    EXPECT_EQ(prog.name, "fj_linear_wgmma_" + kind + "_add_relu");
    ASSERT_EQ(prog.launches.size(), 1u);
    const LaunchSpec& l = prog.launches[0];
    EXPECT_EQ(l.tensor_maps.size(), 2u);
    EXPECT_GT(l.shared_bytes, 48u * 1024);
    EXPECT_EQ(l.block[0] % 128, 0u);
    EXPECT_NE(prog.source.find("__grid_constant__ fj::TmaDescriptor"), std::string::npos);
  }
}

TEST(CodegenWgmma, TensorMapsDescribeTheOperands) {
  Program prog = generate(linear_chain(Precision::BF16, 100, 1000, 500, "", DType::BF16), "sm_90a", "wgmma_tile=64x128x3");
  ASSERT_EQ(prog.launches.size(), 1u);
  const auto& maps = prog.launches[0].tensor_maps;
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].buffer, (BufferRef{BufferKind::Input, 0}));
  EXPECT_EQ(maps[0].rows, 100);
  EXPECT_EQ(maps[0].cols, 1000);
  EXPECT_EQ(maps[0].box_rows, 64);
  EXPECT_EQ(maps[0].box_cols, 64);  // 128 bytes of bf16
  EXPECT_TRUE(maps[0].bf16);
  EXPECT_EQ(maps[1].buffer, (BufferRef{BufferKind::Input, 1}));
  EXPECT_EQ(maps[1].rows, 500);
  EXPECT_EQ(maps[1].box_rows, 128);
  EXPECT_EQ(prog.launches[0].grid[0], 2u * 4u);  // ceil(100/64) * ceil(500/128)
  EXPECT_EQ(prog.launches[0].block[0], 256u);    // producer + one consumer warpgroup
}

TEST(CodegenWgmma, SaysWhyNotWgmma) {
  auto plan_of = [](const Graph& g, const std::string& arch, const std::string& config = "") {
    return generate(g, arch, config).plan_text;
  };
  const Graph bf16 = linear_chain(Precision::BF16, 64, 64, 64, "", DType::BF16);
  EXPECT_NE(plan_of(bf16, "sm_80").find("not wgmma: the target is sm_80"), std::string::npos);
  EXPECT_NE(plan_of(bf16, "sm_90a", "mainloop=ffma").find("mainloop=ffma in the config"), std::string::npos);
  const std::string odd_k = plan_of(linear_chain(Precision::BF16, 64, 37, 64, "", DType::BF16), "sm_90a");
  EXPECT_NE(odd_k.find("TMA needs rows of a multiple of 16 bytes and K=37"), std::string::npos) << odd_k;
  const std::string matmul = plan_of(*[] {
    GraphBuilder g(Precision::BF16, "matmul");
    auto a = g.input("a", {64, 64});
    auto b = g.input("b", {64, 64});
    g.output("y", g.matmul(a, b).relu());
    return g.build();
  }(), "sm_90a");
  EXPECT_NE(matmul.find("not wgmma: matmul reads B as [K, N]"), std::string::npos) << matmul;
}

TEST(CodegenWgmma, ConfigErrorsAreClear) {
  const Graph g = linear_chain(Precision::BF16, 64, 37, 64, "", DType::BF16);
  auto forced = generate_program(g, {"sm_90a", "mainloop=wgmma"});
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.error().message.find("mainloop=wgmma, but TMA needs rows"), std::string::npos);
  const Graph ok = linear_chain(Precision::BF16, 64, 64, 64, "", DType::BF16);
  for (const char* bad : {"wgmma_tile=96x128x4", "wgmma_tile=128x512x4", "wgmma_tile=128x128x1", "wgmma_tile=128x128",
                          "wgmma_tile=128x256x8"}) {
    auto p = generate_program(ok, {"sm_90a", bad});
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) EXPECT_NE(p.error().message.find("codegen config"), std::string::npos) << p.error().message;
  }
  auto mma = generate_program(ok, {"sm_90a", "mainloop=mma"});  // forced: the cp.async path
  ASSERT_TRUE(mma.ok()) << mma.error().message;
  EXPECT_NE(mma->name.find("_mma_bf16"), std::string::npos) << mma->name;
  // 3xTF32 keeps a second accumulator: at most 128 columns; and two lo tiles.
  auto wide = generate_program(linear_chain(Precision::FP32, 64, 64, 64), {"sm_90a", "wgmma_tile=128x256x2"});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("bn must be at most 128"), std::string::npos) << wide.error().message;
  auto deep = generate_program(linear_chain(Precision::FP32, 64, 64, 64), {"sm_90a", "wgmma_tile=128x128x6"});
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("3xTF32 adds two lo tiles"), std::string::npos) << deep.error().message;
}

TEST(CodegenWgmma, RowReductionsFuseUpTo256Columns) {
  Program whole = generate(linear_chain(Precision::BF16, 300, 128, 200, "logsumexp", DType::BF16));
  EXPECT_NE(whole.plan_text.find("fused into the epilogue: one tile spans N=200"), std::string::npos) << whole.plan_text;
  EXPECT_NE(whole.plan_text.find("x256,"), std::string::npos) << whole.plan_text;  // a tile as wide as N
  EXPECT_EQ(whole.launches.size(), 1u);
  Program partial = generate(linear_chain(Precision::BF16, 300, 128, 1000, "sum", DType::BF16));
  EXPECT_NE(partial.plan_text.find("partly fused"), std::string::npos) << partial.plan_text;
  EXPECT_EQ(partial.launches.size(), 2u);  // the anchor's partials, then the row finish
}

// The default configs compile without spills, and (where cuobjdump exists)
// the CUBIN holds HGMMA instructions.
TEST(CodegenWgmma, DefaultConfigsCompileWithoutSpills) {
  bool have_cuobjdump = false;
  struct Case {
    Precision p;
    int64_t m, k, n;
    std::string tail;
    std::string config = "";
  };
  const Case cases[] = {{Precision::BF16, 1024, 8192, 8192, ""},  {Precision::F16, 512, 4096, 11008, ""},
                        {Precision::TF32, 4096, 4096, 4096, ""},  {Precision::FP32, 4096, 4096, 4096, ""},
                        {Precision::BF16, 100, 1000, 500, ""},    {Precision::BF16, 4096, 1024, 256, "logsumexp"},
                        {Precision::FP32, 1024, 1024, 4096, "sum"},
                        // the deepest 3xTF32 ring of 128x64 the tuner tries
                        {Precision::FP32, 512, 256, 4096, "", "wgmma_tile=128x64x6x8"}};
  for (const Case& c : cases) {
    const Graph g = linear_chain(c.p, c.m, c.k, c.n, c.tail, operand_type(c.p));
    Program prog = generate(g, "sm_90a", c.config);
    const std::string label = prog.name + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                              std::to_string(c.n);
    auto cubin = compile_to_cubin(prog.source, prog.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << label << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << label << "\n" << cubin->log;
    EXPECT_EQ(cubin->log.find("C7514"), std::string::npos) << label << ": wgmma serialized\n" << cubin->log;
    // The launch's dynamic shared memory and the kernel's static (mbarriers)
    // within sm_90's 227 KiB per block, or cuFuncSetAttribute refuses it.
    const size_t smem_at = cubin->log.find(" bytes smem");
    ASSERT_NE(smem_at, std::string::npos) << cubin->log;
    const size_t digits = cubin->log.find_last_not_of("0123456789", smem_at - 1) + 1;
    const long static_smem = std::stol(cubin->log.substr(digits, smem_at - digits));
    ASSERT_FALSE(prog.launches.empty());
    EXPECT_LE(prog.launches[0].shared_bytes + static_smem, 227 * 1024) << label;
    const auto sass = test_util::sass_of(cubin->cubin, ::testing::TempDir(), prog.name);
    have_cuobjdump = sass.has_value();
    if (!sass) continue;
    EXPECT_NE(sass->find("HGMMA"), std::string::npos) << label << ": no HGMMA in the SASS";
  }
  if (!have_cuobjdump) GTEST_SKIP() << "spills checked; no cuobjdump here for the HGMMA check";
}

}  // namespace
}  // namespace fusejit
