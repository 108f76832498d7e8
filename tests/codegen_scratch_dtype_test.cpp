// CPU: scratch_dtype=graph (opt-in) holds a bf16 / f16 value another kernel
// reads in its own type instead of f32: half the scratch bytes, the kernels'
// parameters in that type, TMA bulk stores of it from a wgmma epilogue; fp32
// graphs and f32-typed values are unchanged, and the default keeps f32.
#include <gtest/gtest.h>

#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/wgmma_chains.h"

namespace fusejit {
namespace {

Graph softmax_chain(Precision p, DType dt, int64_t m, int64_t k, int64_t n) {
  GraphBuilder g(p, "linear_softmax");
  auto y = g.linear(g.input("x", {m, k}, dt), g.input("w", {n, k}, dt));
  g.output("out", y.softmax(-1));
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.take();
}

TEST(CodegenScratchDtype, SixteenBitValuesKeepTheirTypeInScratch) {
  for (const auto& [p, dt, ctype] : {std::tuple{Precision::BF16, DType::BF16, "__nv_bfloat16"},
                                     std::tuple{Precision::F16, DType::F16, "__half"}}) {
    const Graph g = softmax_chain(p, dt, 4096, 1024, 2048);  // N wider than a tile: a row kernel reads y
    const Program plain = test_util::generate(g, "sm_90a", "");
    ASSERT_EQ(plain.scratch.size(), 1u) << plain.plan_text;
    EXPECT_EQ(plain.scratch[0].bytes, 4096 * 2048 * 4);
    EXPECT_NE(plain.scratch[0].what.find("(f32["), std::string::npos) << plain.scratch[0].what;
    EXPECT_EQ(plain.plan_text.find("TMA bulk stores"), std::string::npos) << plain.plan_text;

    const Program typed = test_util::generate(g, "sm_90a", "scratch_dtype=graph");
    ASSERT_EQ(typed.scratch.size(), 1u) << typed.plan_text;
    EXPECT_EQ(typed.scratch[0].bytes, 4096 * 2048 * 2);
    EXPECT_NE(typed.scratch[0].what.find("(" + std::string(dtype_name(dt)) + "["), std::string::npos)
        << typed.scratch[0].what;
    EXPECT_NE(typed.source.find(std::string(ctype) + "* __restrict__ scratch0"), std::string::npos) << typed.source;
    EXPECT_NE(typed.source.find(std::string("const ") + ctype + "* __restrict__ scratch0"), std::string::npos)
        << "the row kernel reads it in its type\n" << typed.source;
    EXPECT_NE(typed.plan_text.find("TMA bulk stores"), std::string::npos) << typed.plan_text;
    for (const char* arch : {"sm_90a", "sm_80"}) {
      const Program prog = test_util::generate(g, arch, "scratch_dtype=graph");
      auto cubin = compile_to_cubin(prog.source, prog.name, {arch, false, {}});
      EXPECT_TRUE(cubin.ok()) << arch << ": " << cubin.error().str();
    }
  }
}

TEST(CodegenScratchDtype, Fp32ValuesStayF32AndBadValuesAreRefused) {
  const Graph g = softmax_chain(Precision::TF32, DType::F32, 512, 256, 2048);
  const Program typed = test_util::generate(g, "sm_90a", "scratch_dtype=graph");
  ASSERT_EQ(typed.scratch.size(), 1u);
  EXPECT_EQ(typed.scratch[0].bytes, 512 * 2048 * 4);
  EXPECT_NE(typed.scratch[0].what.find("(f32["), std::string::npos) << typed.scratch[0].what;
  auto bad = generate_program(g, {"sm_90a", "scratch_dtype=bf16"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("scratch_dtype must be f32 or graph"), std::string::npos) << bad.error().message;
}

// Every bf16 / f16 example under scratch_dtype=graph plans and compiles for sm_90a.
TEST(CodegenScratchDtype, SixteenBitExamplesCompile) {
  for (const char* name : {"matmul_attention_softmax_bf16", "matmul_log_softmax_f16", "conv_strided_mish_avgpool_f16",
                           "conv_softplus_global_pool_bf16"}) {
    auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + name + ".yaml");
    ASSERT_TRUE(g) << name << ": " << g.error().str();
    auto prog = generate_program(*g, {"sm_90a", "scratch_dtype=graph"});
    ASSERT_TRUE(prog) << name << ": " << prog.error().str();
    auto cubin = compile_to_cubin(prog->source, prog->name, {"sm_90a", false, {}});
    EXPECT_TRUE(cubin.ok()) << name << ": " << cubin.error().str();
  }
}

}  // namespace
}  // namespace fusejit
