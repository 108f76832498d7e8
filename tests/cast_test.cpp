// The cast op beyond the reference (reference_ops_test.cpp): its derivative
// and the backward of a 16-bit anchor whose epilogue is f32 (dZ cast to the
// anchor's dtype), against fp64 finite differences; and the CUDA it
// generates, forward and backward, compiled by NVRTC for sm_80 and sm_90a.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/gradient_check.h"

namespace fusejit {
namespace {

Graph parse(const std::string& text) {
  auto g = parse_spec(text, "cast.yaml");
  EXPECT_TRUE(static_cast<bool>(g)) << (g ? "" : g.error().str()) << "\n" << text;
  return g ? *g : Graph{};
}

bool has_cast(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == OpKind::Cast) return true;
  return false;
}

// Every input's gradient (tests/gradient_check.h) within `rel_l2` of central
// finite differences with a step of 1e-3: a cast to f32 rounds the forward to
// float, noise a 1e-6 step would amplify.
void check_gradients(const Graph& g, double rel_l2) {
  testing::GradCheck c;
  c.rel_l2 = rel_l2;
  c.elem = 1e30;  // the relative L2 only: single elements of a rounded forward move more
  c.step = 1e-3;
  c.every_input = true;
  c.input_seed = 3;
  c.grad_seed = 5;
  testing::check_graph_gradients(g, {}, c);
}

// bf16 -> f32 is exact, so finite differences see no rounding; its
// derivative casts the gradient back to bf16 (as PyTorch does).
TEST(Cast, DerivativeMatchesFiniteDifferences) {
  const Graph g = parse(R"(
precision: bf16
inputs:
  - {name: x, shape: [3, 6], init: normal}
  - {name: w, shape: [5, 6], init: normal}
  - {name: b, shape: [5]}
  - {name: s, shape: [5], dtype: f32, init: normal}
ops:
  - {name: z, op: linear, args: [x, w, b]}
  - {name: zf, op: cast, args: [z], dtype: f32}
  - {name: t, op: tanh, args: [zf]}
  - {name: y, op: mul, args: [t, s]}
outputs: [y]
)");
  ASSERT_FALSE(g.nodes.empty());
  auto p = build_backward(g);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
  EXPECT_TRUE(has_cast(p->stages[0].graph)) << print_backward(*p);
  EXPECT_EQ(p->buffer("tmp_dz")->type.dtype, DType::BF16) << print_backward(*p);
  check_gradients(g, tolerance_for(Precision::BF16).rel_l2);
}

// An f32 parameter in a 16-bit epilogue makes dZ f32: the epilogue stage casts
// dZ (and dZ^T) to the anchor's dtype for the GEMMs, and says so in a note.
TEST(Cast, F32ParameterInA16BitEpilogue) {
  const std::string linear = R"(
precision: f16
inputs:
  - {name: x, shape: [4, 7], init: normal}
  - {name: w, shape: [6, 7], init: normal}
  - {name: b, shape: [6]}
  - {name: s, shape: [6], dtype: f32, init: normal}
ops:
  - {name: z, op: linear, args: [x, w, b]}
  - {name: y, op: mul, args: [z, s]}
  - {name: r, op: sigmoid, args: [y]}
outputs: [r]
)";
  const std::string matmul = R"(
precision: bf16
inputs:
  - {name: a, shape: [2, 3, 5], init: normal}
  - {name: m, shape: [5, 4], init: normal}
  - {name: s, shape: [4], dtype: f32, init: normal}
ops:
  - {name: z, op: matmul, args: [a, m]}
  - {name: y, op: mul, args: [z, s]}
outputs: [y]
)";
  const std::string conv = R"(
precision: bf16
inputs:
  - {name: x, shape: [2, 3, 5, 4]}
  - {name: w, shape: [4, 3, 3, 3]}
  - {name: b, shape: [4]}
  - {name: scale, shape: [4, 1, 1], dtype: f32, init: normal}
ops:
  - {name: c, op: conv2d, args: [x, w, b], padding: 1}
  - {name: sp, op: softplus, args: [c], beta: 2, threshold: 10}
  - {name: pooled, op: global_avg_pool, args: [sp]}
  - {name: y, op: mul, args: [pooled, scale]}
outputs: [y]
)";
  for (const auto& [text, precision] : {std::pair{linear, Precision::F16}, std::pair{matmul, Precision::BF16},
                                        std::pair{conv, Precision::BF16}}) {
    SCOPED_TRACE(text);
    const Graph g = parse(text);
    ASSERT_FALSE(g.nodes.empty());
    auto p = build_backward(g);
    ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
    EXPECT_TRUE(has_cast(p->stages[0].graph)) << print_backward(*p);
    bool noted = false;
    for (const std::string& n : p->notes) noted |= n.find("casts it to") != std::string::npos;
    EXPECT_TRUE(noted) << print_backward(*p);
    for (const BackwardBuffer& buf : p->buffers)
      if (buf.name.rfind("tmp_dz", 0) == 0) EXPECT_EQ(buf.type.dtype, anchor_dtype(precision)) << buf.name;
    check_gradients(g, tolerance_for(precision).rel_l2);
  }
}

// The example the cast was made for: its whole backward builds (it was an error).
TEST(Cast, BackwardOfTheBf16ConvExampleBuilds) {
  auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/conv_softplus_global_pool_bf16.yaml");
  ASSERT_TRUE(g.ok()) << g.error().str();
  auto p = build_backward(*g);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
  for (const char* in : {"x", "w", "b", "scale"}) EXPECT_TRUE(p->input_grads.count(in)) << in;
  ASSERT_NE(p->buffer("tmp_dz"), nullptr) << print_backward(*p);
  EXPECT_EQ(p->buffer("tmp_dz")->type.dtype, DType::BF16);  // read by dX and by conv2d_weight_grad (dW)
  BackwardOptions cpu;  // the CPU backend's form: dZ transposed and im2col(x), for a linear
  cpu.conv_wgrad = ConvWgrad::Im2col;
  auto q = build_backward(*g, cpu);
  ASSERT_TRUE(static_cast<bool>(q)) << q.error().str();
  ASSERT_NE(q->buffer("tmp_dz_t"), nullptr) << print_backward(*q);
  EXPECT_EQ(q->buffer("tmp_dz_t")->type.dtype, DType::BF16);
}

// Casts in an anchor's epilogue, in a pointwise program, and the backward
// stages above generate CUDA that NVRTC compiles for sm_80 and sm_90a.
TEST(Cast, GeneratedCudaCompiles) {
  std::vector<std::pair<std::string, Graph>> jobs;
  jobs.emplace_back("epilogue casts", parse(R"(
precision: fp32
inputs:
  - {name: x, shape: [64, 96]}
  - {name: w, shape: [128, 96]}
ops:
  - {name: z, op: linear, args: [x, w]}
  - {name: zb, op: cast, args: [z], dtype: bf16}
  - {name: g, op: gelu, args: [zb]}
  - {name: y, op: cast, args: [g], dtype: f16}
  - {name: r, op: cast, args: [zb], dtype: f32}
outputs: [y, r]
)"));
  jobs.emplace_back("pointwise casts", parse(R"(
inputs:
  - {name: x, shape: [33, 70]}
ops:
  - {name: h, op: cast, args: [x], dtype: f16}
  - {name: e, op: exp, args: [h]}
  - {name: y, op: cast, args: [e], dtype: bf16}
outputs: [y]
)"));
  auto ex = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/conv_softplus_global_pool_bf16.yaml");
  ASSERT_TRUE(ex.ok()) << ex.error().str();
  auto p = build_backward(*ex);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
  jobs.emplace_back("forward with saved Z", p->forward);
  for (const BackwardStage& st : p->stages) jobs.emplace_back(st.what, st.graph);
  bool bf16 = false, f16 = false;
  for (const auto& [label, g] : jobs) {
    ASSERT_FALSE(g.nodes.empty()) << label;
    for (const char* arch : {"sm_80", "sm_90a"}) {
      SCOPED_TRACE(label + " (" + arch + ")");
      Expected<Program> prog = generate_program(g, {arch, ""});
      ASSERT_TRUE(prog.ok()) << prog.error().str();
      bf16 |= prog->source.find("fj::op::to_bf16(") != std::string::npos;
      f16 |= prog->source.find("fj::op::to_f16(") != std::string::npos;
      Expected<CubinResult> c = compile_to_cubin(prog->source, prog->name, {arch, false, {}});
      ASSERT_TRUE(c.ok()) << c.error().str().substr(0, 4000);
      EXPECT_EQ(std::string(c->cubin.data() + 1, 3), "ELF");
    }
  }
  EXPECT_TRUE(bf16 && f16) << "the casts should call the op library's conversions";
}

}  // namespace
}  // namespace fusejit
