// Pointwise kernels on lanes (emit_pointwise, KernelEmitter::emit_lanes): a
// thread takes up to 16 bytes of consecutive elements along the last dim where
// every buffer it reads or writes whole lanes of is aligned, else the element
// loop. Checks on the emitted source and NVRTC compiles for sm_80 and sm_90a
// (no GPU needed; the GPU runs them in GpuLayout, GpuExamples, test_gpu.py).
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "tests/compile_jobs.h"

namespace fusejit {
namespace {

Program emit(const std::string& yaml, const std::string& config = "") {
  Expected<Graph> g = parse_spec(yaml, "<test>");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  if (!g.ok()) return {};
  Expected<Program> p = generate_program(*g, {"sm_90a", config});
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().str());
  return p.ok() ? p.take() : Program{};
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The linear backward's epilogue stage (seed 2 in bf16): dZ, its column sum, dZ^T.
std::string epilogue_stage(const std::string& precision, int m, int n) {
  const std::string M = std::to_string(m), N = std::to_string(n);
  return "name: lanes_epilogue\nprecision: " + precision + "\ninputs:\n  - {name: grad_y, shape: [" + M + ", " + N +
         "]}\n  - {name: saved, shape: [" + M + ", " + N + "]}\n  - {name: bias, shape: [" + N +
         "]}\nops:\n  - {name: a, op: add, args: [saved, bias]}\n  - {name: m, op: gt, args: [a, 0.0]}\n"
         "  - {name: dz, op: mul, args: [grad_y, m]}\n  - {name: gb, op: sum, args: [dz], dims: [0]}\n"
         "outputs: [gb, dz]\n";
}

TEST(CodegenPointwiseLanes, SixteenBitElementsTakeEightLanesWithAnElementLoopForUnalignedViews) {
  const Program p = emit(epilogue_stage("bf16", 64, 256));
  EXPECT_TRUE(has(p.source, "constexpr int kLanes = 8;")) << p.source;
  for (const char* load : {"load_lanes_as_float<8>(p.in_grad_y, i0 * 256 + i1,",
                           "load_lanes_as_float<8>(p.in_saved, i0 * 256 + i1,", "load_lanes_as_float<8>(p.in_bias, i1,"})
    EXPECT_TRUE(has(p.source, load)) << load << "\n" << p.source;
  EXPECT_TRUE(has(p.source, "store_lanes_from_float<8>(p.out_dz, i0 * 256 + i1,")) << p.source;
  EXPECT_TRUE(has(p.source, "if (fj::aligned_to<16>(p.in_grad_y) && fj::aligned_to<16>(p.in_saved) && "
                            "fj::aligned_to<16>(p.in_bias) && fj::aligned_to<16>(p.out_dz))"))
      << p.source;
  EXPECT_TRUE(has(p.source, "fj_pointwise(p, i0, i1);")) << "the element loop stays for unaligned views";
  // the column sum reads dZ back in a reduce kernel of its own: untouched
  EXPECT_TRUE(has(p.source, "__global__ void __launch_bounds__(512) fj_sum(") ||
              has(p.source, "fj_sum(const __nv_bfloat16*"))
      << p.source;
}

TEST(CodegenPointwiseLanes, Fp32TakesFourLanesAndMixedTypesTheWidest) {
  EXPECT_TRUE(has(emit(epilogue_stage("fp32", 64, 256)).source, "constexpr int kLanes = 4;"));
  // an f32 input cast to the chain's f16: 16 bytes of the widest (f32) type, 8-byte accesses of the f16 ones
  const Program p = emit(R"(name: lanes_mixed
precision: f16
inputs:
  - {name: x, shape: [32, 64], dtype: f32}
  - {name: y, shape: [32, 64]}
ops:
  - {name: x16, op: cast, args: [x], dtype: f16}
  - {name: z, op: add, args: [x16, y]}
outputs: [z]
)");
  EXPECT_TRUE(has(p.source, "constexpr int kLanes = 4;")) << p.source;
  EXPECT_TRUE(has(p.source, "fj::aligned_to<16>(p.in_x)")) << p.source;
  EXPECT_TRUE(has(p.source, "fj::aligned_to<8>(p.in_y)")) << p.source;
}

TEST(CodegenPointwiseLanes, TransposedReadsGoLaneByLaneAndBroadcastsOnce) {
  const Program p = emit(R"(name: lanes_transposed
precision: fp32
inputs:
  - {name: a, shape: [64, 32]}
  - {name: b, shape: [32, 64]}
  - {name: r, shape: [64, 1]}
ops:
  - {name: bt, op: transpose, args: [b], dims: [0, 1]}
  - {name: s, op: add, args: [a, bt]}
  - {name: y, op: mul, args: [s, r]}
outputs: [y]
)");
  ASSERT_TRUE(has(p.source, "fj_pointwise_lanes")) << p.source;
  EXPECT_TRUE(has(p.source, "(i1 + l)")) << "b read at swapped coordinates, once a lane\n" << p.source;
  EXPECT_TRUE(has(p.source, "load_lanes_as_float<4>(p.in_a, i0 * 32 + i1,")) << p.source;
  EXPECT_FALSE(has(p.source, "load_lanes_as_float<4>(p.in_r")) << "r does not depend on the last dim";
  EXPECT_FALSE(has(p.source, "fj::aligned_to<16>(p.in_b)")) << "b is not read whole lanes at a time";
}

TEST(CodegenPointwiseLanes, LanesHalveToDivideTheLastDimOrStayOff) {
  EXPECT_TRUE(has(emit(epilogue_stage("bf16", 8, 12)).source, "constexpr int kLanes = 4;"));
  EXPECT_TRUE(has(emit(epilogue_stage("bf16", 8, 6)).source, "constexpr int kLanes = 2;"));
  EXPECT_FALSE(has(emit(epilogue_stage("bf16", 8, 7)).source, "kLanes"));
  EXPECT_FALSE(has(emit(epilogue_stage("bf16", 64, 256), "pointwise_lanes=0").source, "kLanes"));
  Expected<Graph> g = parse_spec(epilogue_stage("bf16", 8, 8), "<test>");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(generate_program(*g, {"sm_90a", "pointwise_lanes=2"}).ok()) << "0 or 1";
}

TEST(CodegenPointwiseLanes, EveryVariantCompilesForSm80AndSm90a) {
  std::vector<test_util::CompileJob> jobs;
  const std::vector<std::pair<std::string, std::string>> specs = {
      {"bf16 8 lanes", epilogue_stage("bf16", 64, 256)}, {"f16 2 lanes", epilogue_stage("f16", 8, 6)},
      {"fp32 4 lanes", epilogue_stage("fp32", 64, 256)}, {"fp32 odd", epilogue_stage("fp32", 5, 7)}};
  for (const auto& [label, yaml] : specs)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      Expected<Graph> g = parse_spec(yaml, "<test>");
      ASSERT_TRUE(g.ok());
      Expected<Program> p = generate_program(*g, {arch, ""});
      ASSERT_TRUE(p.ok()) << p.error().str();
      jobs.push_back({label, arch, p->name, p->source});
    }
  for (const std::string& f : test_util::compile_all(jobs)) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace fusejit
