// CPU backend: scratch_dtype=graph (16-bit values held in their type between
// kernels) against the fp64 reference, on the 16-bit examples with a second
// kernel, within each precision's tolerance. Built only with LLVM.
#include <gtest/gtest.h>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "compiler/cpu_program.h"
#include "runtime/kernel_check.h"

namespace fusejit {
namespace {

TEST(CpuScratchDtype, SixteenBitExamplesMatchReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "no LLVM in this build";
  Engine engine;
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  opts.config = "scratch_dtype=graph";
  CheckOptions check;
  check.time = false;
  check.samples = 4000;
  for (const char* name : {"matmul_attention_softmax_bf16", "matmul_log_softmax_f16", "conv_strided_mish_avgpool_f16",
                           "conv_softplus_global_pool_bf16"}) {
    auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + name + ".yaml");
    ASSERT_TRUE(g) << name << ": " << g.error().str();
    auto kernel = engine.compile(*g, opts);
    ASSERT_TRUE(kernel) << name << ": " << kernel.error().str();
    auto r = check_kernel(**kernel, *g, check);
    ASSERT_TRUE(r) << name << ": " << r.error().str();
    EXPECT_TRUE(r->pass) << name << ":\n" << r->summary();
  }
}

}  // namespace
}  // namespace fusejit
