// Swap-AB (templates/wgmma_swap_ab.cuh): when the planner reads an fp32 matmul's
// B [K, N] as wgmma's register operand, when it keeps the transposed copy and
// says why, the config's errors, and the CUBINs NVRTC makes (no GPU needed;
// the GPU runs are gpu_gemm_mma_test.cpp's MatmulWgmmaSwapAb* tests).
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "compiler/plan.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/wgmma_chains.h"

namespace fusejit {
namespace {

using test_util::generate;
using test_util::matmul_chain;
using test_util::operand_type;

// tf32 matmul with B [K, N] whose rows TMA can read: B is wgmma's register
// operand (swap-AB: C^T = B^T A^T), no staging kernel, no scratch. Where
// that cannot run (odd N, a fused reduction, clusters) the transposed copy
// stays; asking for it there is a clear error.
TEST(CodegenSwapAb, Tf32MatmulTakesBAsTheRegisterOperand) {
  Program prog = generate(matmul_chain(Precision::TF32, 2, 1024, 512, 300, "", DType::F32));
  ASSERT_EQ(prog.launches.size(), 1u) << prog.plan_text;
  EXPECT_TRUE(prog.scratch.empty()) << prog.plan_text;
  EXPECT_NE(prog.plan_text.find("swap-AB"), std::string::npos) << prog.plan_text;
  EXPECT_NE(prog.plan_text.find("B [K, N] as wgmma's register operand"), std::string::npos) << prog.plan_text;
  EXPECT_NE(prog.source.find("/*kSwapAB=*/true"), std::string::npos);
  EXPECT_NE(prog.source.find("using Frag = fj::WgmmaSwapFragment<Tile>;"), std::string::npos);
  EXPECT_NE(prog.source.find("fj::tile_pointwise(frag"), std::string::npos) << "stored from registers";
  const auto& maps = prog.launches[0].tensor_maps;
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].rows, 2 * 1024);
  EXPECT_EQ(maps[1].buffer, (BufferRef{BufferKind::Input, 1}));  // B as stored, [K, N]
  EXPECT_EQ(maps[1].rows, 512);
  EXPECT_EQ(maps[1].cols, 300);
  EXPECT_EQ(maps[1].box_rows, 32);
  EXPECT_EQ(maps[1].box_cols, 32);
  auto cubin = compile_to_cubin(prog.source, prog.name, {"sm_90a", false, {}});
  EXPECT_TRUE(cubin.ok()) << (cubin.ok() ? "" : cubin.error().str());

  const std::pair<const char*, std::string> transposed[] = {{"", "odd"}, {"", "sum"}, {"wgmma_cluster=2", ""},
                                                            {"wgmma_swap_ab=0", ""}, {"wgmma_tile=128x128x4", ""}};
  for (const auto& [config, what] : transposed) {
    Program t = generate(matmul_chain(Precision::TF32, 0, 512, 256, what == "odd" ? 301 : 256, what == "odd" ? "" : what,
                                      DType::F32),
                         "sm_90a", config);
    EXPECT_EQ(t.plan_text.find(" swap-AB,"), std::string::npos) << config << " " << what << "\n" << t.plan_text;  // the tile
    EXPECT_NE(t.plan_text.find("transposed to [N, K] in scratch first: tf32 wgmma reads K-major B only (not swap-AB: "),
              std::string::npos) << t.plan_text;  // and why
  }
  const std::pair<Precision, std::string> refused[] = {
      {Precision::TF32, "wgmma_swap_ab=1,wgmma_cluster=2"}, {Precision::BF16, "wgmma_swap_ab=1"},
      {Precision::TF32, "wgmma_swap_ab=1,wgmma_tile=128x256x3"}, {Precision::TF32, "wgmma_swap_ab=2"}};
  for (const auto& [p, config] : refused) {
    auto r = generate_program(matmul_chain(p, 0, 512, 256, 256, "", operand_type(p)), {"sm_90a", config});
    ASSERT_FALSE(r.ok()) << config;
    EXPECT_NE(r.error().str().find("swap"), std::string::npos) << config << ": " << r.error().str();
  }
  // fp32 (3xTF32): swap-AB with both operands' residuals split as stored (no transposed copy).
  Program fp32 = generate(matmul_chain(Precision::FP32, 0, 1024, 512, 300, "", DType::F32));
  EXPECT_NE(fp32.plan_text.find("swap-AB"), std::string::npos) << fp32.plan_text;
  ASSERT_EQ(fp32.launches.size(), 2u) << fp32.plan_text;
  EXPECT_EQ(fp32.launches[0].kernel, "fj_split_tf32_operands");
  ASSERT_EQ(fp32.scratch.size(), 2u) << fp32.plan_text;  // the residuals only
  const auto& fp32_maps = fp32.launches[1].tensor_maps;
  ASSERT_EQ(fp32_maps.size(), 4u);
  EXPECT_EQ(fp32_maps[3].buffer, (BufferRef{BufferKind::Scratch, 1}));  // B's residual, [K, N] as B
  EXPECT_EQ(fp32_maps[3].rows, 512);
  EXPECT_EQ(fp32_maps[3].box_cols, 32);
  EXPECT_TRUE(compile_to_cubin(fp32.source, fp32.name, {"sm_90a", false, {}}).ok());
  EXPECT_FALSE(generate_program(matmul_chain(Precision::FP32, 0, 1024, 512, 300, "", DType::F32),
                                {"sm_90a", "wgmma_swap_ab=1,wgmma_tile=256x128x3"})
                   .ok()) << "3xTF32 swap-AB tiles have at most 128 rows";
  // A costly epilogue: swap-AB too, staged through shared memory (a rolled loop over the staged chunks).
  GraphBuilder gb(Precision::TF32, "matmul_gelu");
  auto gelu_out = gb.matmul(gb.input("a", {512, 256}), gb.input("b", {256, 256})).gelu();
  gb.output("y", gelu_out);
  auto gelu_graph = gb.build();
  ASSERT_TRUE(gelu_graph.ok()) << gelu_graph.error().str();
  Program gelu = generate(*gelu_graph);
  EXPECT_NE(gelu.plan_text.find("swap-AB"), std::string::npos) << gelu.plan_text;
  EXPECT_NE(gelu.source.find("fj::tile_pointwise_staged<"), std::string::npos) << gelu.source;
  EXPECT_TRUE(compile_to_cubin(gelu.source, gelu.name, {"sm_90a", false, {}}).ok());
  auto sum = generate_program(matmul_chain(Precision::TF32, 0, 512, 256, 256, "sum", DType::F32), {"sm_90a", "wgmma_swap_ab=1"});
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.error().str().find("wgmma_swap_ab=1, but a reduction"), std::string::npos) << sum.error().str();
}

}  // namespace
}  // namespace fusejit
