// GPU: scratch_dtype=graph (16-bit values held in their type between kernels)
// against the fp64 reference: the 16-bit examples with a second kernel, and a
// linear + softmax whose bf16 / f16 scratch a wgmma epilogue writes by TMA.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include "compiler/program.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"

namespace fusejit {
namespace {

void expect_pass(Engine& engine, const Graph& g, const std::string& name, bool want_tma) {
  CompileOptions opts;
  opts.config = "scratch_dtype=graph";
  auto kernel = engine.compile(g, opts);
  ASSERT_TRUE(kernel) << name << ": " << kernel.error().str();
  if (want_tma) EXPECT_NE((*kernel)->program().plan_text.find("TMA bulk stores"), std::string::npos) << name;
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  for (uint64_t seed : {1u, 2u}) {
    check.seed = seed;
    auto r = check_kernel(**kernel, g, check);
    ASSERT_TRUE(r) << name << ": " << r.error().str();
    EXPECT_TRUE(r->pass) << name << ":\n" << r->summary();
  }
}

TEST(GpuScratchDtype, SixteenBitChainsMatchReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  Engine engine;
  for (const char* name : {"matmul_attention_softmax_bf16", "matmul_log_softmax_f16", "conv_strided_mish_avgpool_f16",
                           "conv_softplus_global_pool_bf16"}) {
    auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + name + ".yaml");
    ASSERT_TRUE(g) << name << ": " << g.error().str();
    expect_pass(engine, *g, name, false);
  }
  auto arch = Engine::device_arch();
  for (const auto& [p, dt] : {std::pair{Precision::BF16, DType::BF16}, std::pair{Precision::F16, DType::F16}}) {
    GraphBuilder b(p, "linear_softmax");
    auto y = b.linear(b.input("x", {1000, 520}, dt), b.input("w", {2056, 520}, dt));  // ragged rows and columns
    b.output("out", y.softmax(-1));
    auto g = b.build();
    ASSERT_TRUE(g) << g.error().str();
    expect_pass(engine, *g, "linear_softmax " + std::string(precision_name(p)), arch && *arch == "sm_90a");
  }
}

}  // namespace
}  // namespace fusejit
