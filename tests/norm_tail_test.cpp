// A 2-D pool or a reduction of a norm's result done by the norm kernel
// (compiler/pass_fuse_norm_tail.cpp): the plans (kernel counts, the norm
// kernel's tail, why it is not taken), and the generated CUDA's last pass.
// The chains' values against fp64: tests/norm_chains.h (CpuNorm, GpuNorm).
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/norm_chains.h"
#include "tests/norm_tail_cases.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

// conv [2, 6, 9, 11] -> 12 channels, then `tail` on it.
template <class TailF>
Expected<Graph> conv_then(const TailF& tail) {
  GraphBuilder g(Precision::FP32, "norm_tail");
  auto x = g.input("x", {2, 6, 9, 11});
  auto c = g.conv2d(x, g.input("w", {12, 6, 3, 3}));
  tail(g, c);
  return g.build();
}

Expected<Program> plan(const Graph& g, const std::string& config = "") { return generate_program(g, {"sm_90a", config}); }

TEST(NormTail, PooledByTheNormKernel) {
  for (const char* kind : {"instance_norm_maxpool", "group_norm_swish_avgpool", "layer_norm_maxpool"}) {
    auto g = testing_norm::conv_chain(Precision::FP32, kind);
    ASSERT_TRUE(g) << kind << ": " << g.error().str();
    auto p = plan(*g);
    ASSERT_TRUE(p) << kind << ": " << p.error().str();
    EXPECT_EQ(testing::chain_launches(*p), 2u) << kind << "\n" << p->plan_text;  // the conv, the norm kernel
    EXPECT_NE(p->plan_text.find("its last pass normalizes each window's elements"), std::string::npos) << p->plan_text;
    EXPECT_NE(p->source.find("fj::norm_rows<"), std::string::npos) << kind;
    EXPECT_NE(p->source.find("fj::pool2d_window<"), std::string::npos) << kind;
    // norm_tail=0: the normalized tensor goes to scratch and a pool kernel reads it.
    auto q = plan(*g, "norm_tail=0");
    ASSERT_TRUE(q) << q.error().str();
    EXPECT_EQ(testing::chain_launches(*q), 3u) << kind << "\n" << q->plan_text;
    EXPECT_NE(q->plan_text.find("not done by the norm kernel: norm_tail=0"), std::string::npos) << q->plan_text;
  }
  // Kernel names say what they do; group / instance norm scale each window by its channel's weight once.
  auto g = testing_norm::conv_chain(Precision::FP32, "group_norm_swish_avgpool");
  ASSERT_TRUE(g);
  auto p = plan(*g);
  ASSERT_TRUE(p);
  EXPECT_NE(p->plan_text.find("fj_group_norm_silu_avgpool3_mul"), std::string::npos) << p->plan_text;
  EXPECT_NE(p->source.find("const float scale = rstd * "), std::string::npos);
  auto ln = testing_norm::conv_chain(Precision::FP32, "layer_norm_maxpool");
  ASSERT_TRUE(ln);
  auto lp = plan(*ln);
  ASSERT_TRUE(lp);
  EXPECT_EQ(lp->source.find("const float scale = rstd * "), std::string::npos);  // a weight per element
}

TEST(NormTail, ReducedByTheNormKernel) {
  // conv -> instance_norm -> relu -> global_avg_pool -> sigmoid (a classifier head), and a group norm's per-sample
  // max over C, H, W with one group (a row holds the sample)
  auto head = conv_then([](GraphBuilder& g, Value c) { g.output("y", c.instance_norm().relu().global_avg_pool().sigmoid()); });
  auto whole = conv_then([](GraphBuilder& g, Value c) { g.output("y", c.group_norm(1).max({1, 2, 3})); });
  for (const auto* g : {&head, &whole}) {
    ASSERT_TRUE(*g) << g->error().str();
    auto p = plan(**g);
    ASSERT_TRUE(p) << p.error().str();
    EXPECT_EQ(testing::chain_launches(*p), 2u) << p->plan_text;
    EXPECT_NE(p->plan_text.find("its last pass reduces each run of the row"), std::string::npos) << p->plan_text;
    EXPECT_NE(p->source.find("fj::norm_rows_reduce<"), std::string::npos);
    auto q = plan(**g, "norm_tail=0");
    ASSERT_TRUE(q) << q.error().str();
    EXPECT_EQ(testing::chain_launches(*q), 3u) << q->plan_text;
  }
  auto p = plan(*head);
  ASSERT_TRUE(p);
  EXPECT_NE(p->plan_text.find("fj_instance_norm_relu_globalavgpool_sigmoid"), std::string::npos) << p->plan_text;
}

TEST(NormTail, NotTakenSaysWhy) {
  struct Case {
    const char* label;
    Expected<Graph> graph;
    const char* why;
  };
  Pool2dOptions po;
  std::vector<Case> cases;
  cases.push_back({"norm also an output", conv_then([&](GraphBuilder& g, Value c) {
                     auto n = c.instance_norm();
                     g.output("n", n);
                     g.output("y", n.max_pool2d(po));
                   }), "before it is a graph output"});
  cases.push_back({"op before the pool read by another op", conv_then([&](GraphBuilder& g, Value c) {
                     auto s = c.group_norm(3).silu();
                     g.output("y", s.avg_pool2d(po));
                     g.output("t", s.sum({1, 2, 3}));
                   }), "before it is read by"});
  cases.push_back({"rows shorter than a plane", conv_then([&](GraphBuilder& g, Value c) {
                     g.output("y", c.layer_norm({9}).max_pool2d(po));  // normalized along W only
                   }), "a norm row does not hold whole H x W planes"});
  cases.push_back({"a reduction over C", conv_then([&](GraphBuilder& g, Value c) {
                     g.output("y", c.group_norm(3).relu().max({1}, true));
                   }), "it reduces dims that are not the trailing ones"});
  cases.push_back({"a sample's sum over groups", conv_then([&](GraphBuilder& g, Value c) {
                     g.output("y", c.group_norm(3).sum({1, 2, 3}));
                   }), "its runs of 756 elements cross norm rows"});
  for (const Case& c : cases) {
    ASSERT_TRUE(c.graph) << c.label << ": " << c.graph.error().str();
    auto p = plan(*c.graph);
    ASSERT_TRUE(p) << c.label << ": " << p.error().str();
    EXPECT_NE(p->plan_text.find(std::string("not done by the norm kernel: ")), std::string::npos)
        << c.label << "\n" << p->plan_text;
    EXPECT_NE(p->plan_text.find(c.why), std::string::npos) << c.label << "\n" << p->plan_text;
    EXPECT_EQ(p->source.find("kOuts"), std::string::npos) << c.label;
  }
}

// The first random cases of GpuNormTail compile for sm_80 and sm_90a (the rows copied to shared memory or not).
TEST(NormTail, RandomCasesCompileWithNvrtc) {
  const auto cases = testing_norm::random_norm_tail_cases(24, 55);
  ASSERT_GE(cases.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const auto& c = cases[i];
    for (const char* arch : {"sm_80", "sm_90a"}) {
      auto p = generate_program(*c.graph, {arch, i % 2 ? "norm_cache=0" : ""});
      ASSERT_TRUE(p) << c.label << arch << ": " << p.error().str();
      EXPECT_NE(p->source.find("kOuts"), std::string::npos) << c.label;
      auto cubin = compile_to_cubin(p->source, p->name, {arch, false, {}});
      EXPECT_TRUE(cubin) << c.label << arch << ": " << (cubin ? "" : cubin.error().str().substr(0, 4000));
    }
  }
}

}  // namespace
}  // namespace fusejit
