// CPU: the wgmma staged epilogue at two adjacent columns a call
// (epilogue_pairs=1, emit_pairs.cpp, fj::tile_pointwise_staged_pairs): where
// it applies, the pair function's one store of two elements per output and
// the one-element fallback; where it does not, today's epilogue; the same from
// the registers (epilogue_direct=1); the kernels compiled by NVRTC for sm_90a
// without spills.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/wgmma_chains.h"

namespace fusejit {
namespace {

using test_util::generate;
using test_util::linear_chain;
using test_util::operand_type;

void expect_compiles(const Program& p, const std::string& label) {
  auto cubin = compile_to_cubin(p.source, p.name, {"sm_90a", false, {"--ptxas-options=-v"}});
  ASSERT_TRUE(cubin.ok()) << label << ": " << cubin.error().str();
  EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << label << "\n" << cubin->log;
}

TEST(CodegenEpiloguePairs, PairsOfColumnsWhereAsked) {
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32, Precision::FP32}) {
    const std::string label(precision_name(p));
    // 168-column tiles (chunks of 56) for 512x4096x11008; tma_store=0 keeps 16-bit 128-wide tiles staged too
    for (const Graph& g : {linear_chain(p, 512, 4096, 11008, "", operand_type(p)),
                           linear_chain(p, 2048, 512, 384, "", operand_type(p))}) {
      const Program off = generate(g, "sm_90a", "tma_store=0");
      EXPECT_EQ(off.source.find("tile_pointwise_staged_pairs"), std::string::npos) << "opt-in";
      const Program on = generate(g, "sm_90a", "tma_store=0,epilogue_pairs=1");
      EXPECT_NE(on.source.find("fj::tile_pointwise_staged_pairs<"), std::string::npos) << label << "\n" << on.source;
      // the bias staged for the tile's columns, read at both; one store of both columns
      EXPECT_NE(on.source.find("cols0[tile_col + 1]"), std::string::npos) << on.source;
      EXPECT_NE(on.source.find("fj::store_pair_from_float(p.out_y, i0 * "), std::string::npos) << on.source;
      // pairs only where the output takes them: its base aligned to two elements, checked in the kernel
      const int pair_bytes = p == Precision::BF16 || p == Precision::F16 ? 4 : 8;
      EXPECT_NE(on.source.find("fj::aligned_to<" + std::to_string(pair_bytes) + ">(p.out_y)"), std::string::npos);
      EXPECT_EQ(on.launches.back().grid, off.launches.back().grid);
      expect_compiles(on, label);
    }
  }
}

// epilogue_direct=1: cheap elementwise epilogues of linear / matmul from the fragment's registers, no staging;
// with pairs, a thread's two adjacent columns a call.
TEST(CodegenEpiloguePairs, DirectFromRegistersWhereAsked) {
  for (Precision p : {Precision::BF16, Precision::TF32}) {
    const std::string label(precision_name(p));
    const Graph g = linear_chain(p, 512, 4096, 11008, "", operand_type(p));
    // (tma_store=0: TMA stores, which 16-bit 168-wide tiles take by default, come first)
    const Program direct = generate(g, "sm_90a", "epilogue_direct=1,tma_store=0");
    EXPECT_NE(direct.source.find("fj::tile_pointwise(frag, m0, n0,"), std::string::npos) << label << direct.source;
    EXPECT_EQ(direct.source.find("tile_pointwise_staged"), std::string::npos) << label;
    expect_compiles(direct, label);
    const Program both = generate(g, "sm_90a", "epilogue_direct=1,epilogue_pairs=1,tma_store=0");
    EXPECT_NE(both.source.find("fj::tile_pointwise_pairs(frag, m0, n0,"), std::string::npos) << label << both.source;
    EXPECT_NE(both.source.find("fj::store_pair_from_float(p.out_y, i0 * "), std::string::npos) << both.source;
    expect_compiles(both, label);
  }
  // costly ops (gelu) keep the staged path, whose functor loop is rolled
  GraphBuilder b(Precision::BF16, "linear_gelu");
  auto x = b.input("x", {512, 4096}, DType::BF16);
  auto w = b.input("w", {11008, 4096}, DType::BF16);
  auto bias = b.input("bias", {11008}, DType::BF16);
  b.output("y", b.linear(x, w).add(bias).gelu());
  auto gelu_graph = b.build();
  ASSERT_TRUE(gelu_graph.ok()) << gelu_graph.error().str();
  const Program gelu = generate(*gelu_graph, "sm_90a", "epilogue_direct=1,tma_store=0");
  EXPECT_NE(gelu.source.find("fj::tile_pointwise_staged<"), std::string::npos) << gelu.source;
}

TEST(CodegenEpiloguePairs, TodaysEpilogueWhereThePairsDoNotApply) {
  // An odd N: rows of odd length leave odd indices at even columns
  const Program odd = generate(linear_chain(Precision::BF16, 512, 256, 1001, "", DType::BF16), "sm_90a",
                               "tma_store=0,epilogue_pairs=1");
  EXPECT_EQ(odd.source.find("tile_pointwise_staged_pairs"), std::string::npos) << odd.source;
  EXPECT_NE(odd.source.find("fj::tile_pointwise_staged<"), std::string::npos);
  // TMA stores (bias + relu on 128-multiple 16-bit tiles) keep their own path
  const Program tma = generate(linear_chain(Precision::BF16, 2048, 512, 384, "", DType::BF16), "sm_90a",
                               "epilogue_pairs=1");
  EXPECT_EQ(tma.source.find("tile_pointwise_staged_pairs"), std::string::npos);
  // A bad value
  auto bad = generate_program(linear_chain(Precision::BF16, 512, 256, 1000, "", DType::BF16),
                              {"sm_90a", "epilogue_pairs=2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("epilogue_pairs must be 0 or 1"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace fusejit
