// CPU backend: row reductions along N fused into the anchor kernel (whole
// when one tile spans N, else per-tile partials and a row-finish kernel) and
// pools fused into it (a conv's pool2d, a linear / matmul's pool1d along N),
// against the fp64 reference: ragged N around the partial tile width, M = 1,
// keepdim, several reductions on one anchor, reductions followed by
// elementwise ops and by each other's results, batched matmul, 16-bit
// tensors, forced tiles, floor-mode pools, groups; and the plans: no
// anchor-sized store when nothing else needs it, fewer kernels than with
// fuse_reductions=0 / fuse_pool=0, notes for what stays unfused.
#include <gtest/gtest.h>

#include <memory>

#include "compiler/cpu_program.h"
#include "fusejit/builder.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "runtime/cpu/cpu_executable.h"
#include "tests/plan_rule_cases.h"

namespace fusejit {
namespace {

size_t element_bytes(DType dt) { return dt == DType::F32 ? 4 : 2; }

// Generates, compiles and runs `g` on seeded inputs (outputs poisoned with
// NaN); every output must match the fp64 reference. Returns the program.
std::shared_ptr<const CpuProgram> check_graph(const Expected<Graph>& built, const std::string& label,
                                              const std::string& config = "") {
  EXPECT_TRUE(built) << label << ": " << (built ? "" : built.error().str());
  if (!built) return nullptr;
  const Graph& g = *built;
  CpuCodegenOptions opts;
  opts.config = config;
  Expected<CpuProgram> program = generate_cpu_program(g, opts);
  EXPECT_TRUE(program) << label << ": " << (program ? "" : program.error().str());
  if (!program) return nullptr;
  auto shared = std::make_shared<const CpuProgram>(std::move(*program));
  Expected<std::vector<char>> object = cpu::compile_object(*shared);
  EXPECT_TRUE(object) << label << ": " << (object ? "" : object.error().str());
  if (!object) return nullptr;
  auto exe = cpu::CpuExecutable::load(shared, std::move(*object));
  EXPECT_TRUE(exe) << label << ": " << (exe ? "" : exe.error().str());
  if (!exe) return nullptr;

  const std::vector<HostTensor> inputs = make_random_inputs(g, 4321);
  std::vector<std::vector<uint8_t>> in_bytes;
  std::vector<void*> in_ptrs;
  for (const HostTensor& t : inputs) in_bytes.push_back(to_device_bytes(t));
  for (auto& b : in_bytes) in_ptrs.push_back(b.data());
  std::vector<std::vector<uint8_t>> out_bytes;
  std::vector<void*> out_ptrs;
  for (const Output& o : g.outputs) {
    const TensorType& t = g.node(o.value).type;
    out_bytes.emplace_back(static_cast<size_t>(t.numel()) * element_bytes(t.dtype), uint8_t{0xFF});
  }
  for (auto& b : out_bytes) out_ptrs.push_back(b.data());
  Status ran = (*exe)->run(in_ptrs, out_ptrs);
  EXPECT_TRUE(ran) << label << ": " << (ran ? "" : ran.error().str());

  auto ref = evaluate_reference(g, inputs);
  EXPECT_TRUE(ref) << label << ": " << (ref ? "" : ref.error().str());
  if (!ref) return shared;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorType& t = g.node(g.outputs[i].value).type;
    const HostTensor out = from_device_bytes(t, out_bytes[i].data());
    const Comparison c = compare_outputs(out.data.data(), (*ref)[i].data(), t.numel(), g.precision);
    EXPECT_TRUE(c.pass) << label << " output '" << g.outputs[i].name << "': " << c.summary() << "\n"
                        << shared->plan_text;
  }
  return shared;
}

const OpKind kReductions[] = {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::LogSumExp};

Value reduce(Value v, OpKind op, int64_t dim, bool keepdim) {
  switch (op) {
    case OpKind::Sum: return v.sum({dim}, keepdim);
    case OpKind::Mean: return v.mean({dim}, keepdim);
    case OpKind::Max: return v.max({dim}, keepdim);
    case OpKind::Min: return v.min({dim}, keepdim);
    default: return v.logsumexp({dim}, keepdim);
  }
}

// reduction(relu?(x W^T + b), -1) followed by an elementwise op.
Expected<Graph> linear_reduce(Precision p, int64_t m, int64_t k, int64_t n, OpKind op, bool keepdim, bool relu) {
  GraphBuilder g(p, "cpu_linear_reduce");
  auto x = g.input("x", {m, k});
  auto w = g.input("w", {n, k});
  Value y = g.linear(x, w, g.input("b", {n}));
  if (relu) y = y.relu();
  g.output("r", (reduce(y, op, 1, keepdim) * 0.5 + 1.0).tanh());
  return g.build();
}

std::string describe(OpKind op, int64_t m, int64_t k, int64_t n, bool keepdim) {
  return std::string(op_name(op)) + " of linear " + std::to_string(m) + "x" + std::to_string(k) + "x" +
         std::to_string(n) + (keepdim ? " keepdim" : "");
}

TEST(CpuFusion, RowReductionsRaggedN) {
  // N below, at and around the partial tile width (128), and wide; M = 1 and ragged.
  const int64_t shapes[][3] = {{1, 19, 1},   {37, 19, 53},   {5, 64, 128}, {1, 33, 129},
                               {37, 70, 300}, {13, 300, 1000}, {1, 9, 700}, {64, 31, 256}};
  int i = 0;
  for (const auto& s : shapes)
    for (OpKind op : kReductions) {
      const bool keepdim = i % 2 == 0, relu = i % 3 == 0;
      check_graph(linear_reduce(Precision::FP32, s[0], s[1], s[2], op, keepdim, relu),
                  describe(op, s[0], s[1], s[2], keepdim) + (relu ? " relu" : ""));
      ++i;
    }
}

// Several reductions of one anchor (of the anchor and of epilogue values),
// combined by elementwise ops after them; the anchor output also stored.
Expected<Graph> several(int64_t m, int64_t k, int64_t n, bool store_y) {
  GraphBuilder g(Precision::FP32, "cpu_several_reductions");
  auto x = g.input("x", {3, m, k});
  auto w = g.input("w", {n, k});
  auto y = g.linear(x, w, g.input("b", {n}));
  auto z = (y * g.input("col_scale", {n})).sigmoid();
  auto lse = y.logsumexp({2});
  g.output("centered", lse - y.max({2}));
  g.output("spread", z.mean({2}) - z.min({2}) + y.sum({2}) * 0.01);
  if (store_y) g.output("y", y);
  return g.build();
}

TEST(CpuFusion, SeveralReductionsOnOneAnchor) {
  for (int64_t n : {70, 300})
    for (bool store_y : {false, true}) {
      const std::string label = "several reductions, N=" + std::to_string(n) + (store_y ? ", y stored" : "");
      auto program = check_graph(several(7, 45, n, store_y), label);
      if (program) EXPECT_LE(program->launches.size(), 2u) << label << "\n" << program->plan_text;
    }
}

TEST(CpuFusion, MatmulBatchedReductions) {
  for (int64_t n : {23, 150})
    for (OpKind op : {OpKind::Max, OpKind::LogSumExp, OpKind::Mean}) {
      GraphBuilder g(Precision::FP32, "cpu_matmul_reduce");
      auto a = g.input("a", {2, 3, 17, 29});
      auto b = g.input("b", {3, 29, n});
      g.output("r", reduce(g.matmul(a, b), op, 3, op == OpKind::Max).exp());
      check_graph(g.build(), std::string(op_name(op)) + " of matmul [2,3,17,29]@[3,29," + std::to_string(n) + "]");
    }
}

TEST(CpuFusion, HalfPrecisions) {
  for (Precision p : {Precision::BF16, Precision::F16})
    for (int64_t n : {100, 400})
      check_graph(linear_reduce(p, 21, 40, n, OpKind::LogSumExp, false, false),
                  std::string("logsumexp ") + std::string(precision_name(p)) + " N=" + std::to_string(n));
}

TEST(CpuFusion, ForcedTiles) {
  // Micro-tiles whose width does not divide the partial width (lcm blocks),
  // small k panels, a narrower plan tile (partials every 96 columns).
  for (const char* config : {"cpu_tile=6x16,cpu_kc=7", "cpu_tile=4x48", "tile=64x96x8x8,cpu_tile=4x48"})
    for (int64_t n : {90, 500}) {
      check_graph(linear_reduce(Precision::FP32, 37, 50, n, OpKind::LogSumExp, true, true),
                  std::string("logsumexp N=") + std::to_string(n) + " " + config, config);
      check_graph(linear_reduce(Precision::FP32, 37, 50, n, OpKind::Max, false, false),
                  std::string("max N=") + std::to_string(n) + " " + config, config);
    }
}

// The largest scratch buffer of a program (bytes).
int64_t largest_scratch(const CpuProgram& p) {
  int64_t most = 0;
  for (const ScratchSpec& s : p.scratch) most = std::max(most, s.bytes);
  return most;
}

TEST(CpuFusion, PlanStoresNoAnchorOutput) {
  const int64_t m = 64, k = 32, n = 1000;
  auto fused = check_graph(linear_reduce(Precision::FP32, m, k, n, OpKind::LogSumExp, false, false), "fused");
  auto unfused = check_graph(linear_reduce(Precision::FP32, m, k, n, OpKind::LogSumExp, false, false), "unfused",
                             "fuse_reductions=0");
  ASSERT_TRUE(fused && unfused);
  // Fused: the anchor (storing per-tile partials) and the row finish; no [M, N] buffer.
  EXPECT_EQ(fused->launches.size(), 2u) << fused->plan_text;
  EXPECT_LT(largest_scratch(*fused), m * n * 4 / 4) << fused->plan_text;
  EXPECT_NE(fused->plan_text.find("partly fused"), std::string::npos) << fused->plan_text;
  EXPECT_NE(fused->launches[1].what.find("per-tile partials"), std::string::npos) << fused->launches[1].what;
  // Unfused: the anchor output goes to an [M, N] scratch buffer that a reduce kernel reads.
  EXPECT_GE(largest_scratch(*unfused), m * n * 4) << unfused->plan_text;

  // One tile spans N: a single kernel, no scratch at all (two kernels unfused).
  auto whole = check_graph(linear_reduce(Precision::FP32, m, k, 100, OpKind::Sum, true, true), "whole");
  auto whole_unfused = check_graph(linear_reduce(Precision::FP32, m, k, 100, OpKind::Sum, true, true),
                                   "whole, unfused", "fuse_reductions=0");
  ASSERT_TRUE(whole && whole_unfused);
  EXPECT_EQ(whole->launches.size(), 1u) << whole->plan_text;
  EXPECT_TRUE(whole->scratch.empty()) << whole->plan_text;
  EXPECT_EQ(whole_unfused->launches.size(), 2u) << whole_unfused->plan_text;
}

// conv2d -> epilogue -> max / avg pool2d (kernel == stride, no padding) -> elementwise.
struct PoolCase {
  Shape x, w;
  Conv2dOptions o;
  int64_t k0, k1;
  bool is_max;
  Precision p = Precision::FP32;
};

Expected<Graph> conv_pool(const PoolCase& c) {
  GraphBuilder g(c.p, "cpu_conv_pool");
  auto x = g.input("x", c.x);
  auto w = g.input("w", c.w);
  auto y = (g.conv2d(x, w, g.input("cb", {c.w[0]}), c.o).tanh() * 2.0 + g.input("bias", {c.w[0], 1, 1}));
  Pool2dOptions po;
  po.kernel = {c.k0, c.k1};
  po.stride = {c.k0, c.k1};
  auto pooled = c.is_max ? y.max_pool2d(po) : y.avg_pool2d(po);
  g.output("y", (pooled * 0.5).relu());
  return g.build();
}

TEST(CpuFusion, ConvPools) {
  const std::vector<PoolCase> cases = {
      {{2, 3, 16, 16}, {8, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 2, 2, true},     // even
      {{2, 3, 17, 19}, {5, 3, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}, 2, 2, false},    // OH 15, OW 17: floor mode
      {{1, 4, 30, 61}, {6, 4, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 4, 4, true},     // OW 61 >= NR, ragged
      {{1, 6, 14, 13}, {10, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}, 3, 2, false},    // groups, rectangular window
      {{2, 2, 21, 23}, {7, 2, 3, 3}, {{2, 1}, {1, 0}, {1, 1}, 1}, 2, 3, true},     // stride 2 along h
      {{1, 3, 40, 130}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 1, 4, true},    // 1-row windows, wide rows
      {{1, 3, 10, 10}, {70, 3, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, 5, 5, false},   // one window row, 70 channels
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string label = "conv pool case " + std::to_string(i);
    auto program = check_graph(conv_pool(cases[i]), label);
    if (program) {
      EXPECT_EQ(program->launches.size(), 1u) << label << "\n" << program->plan_text;
      EXPECT_TRUE(program->scratch.empty()) << label << "\n" << program->plan_text;
    }
    check_graph(conv_pool(cases[i]), label + ", 6x16 tiles kc 7", "cpu_tile=6x16,cpu_kc=7");
  }
  for (Precision p : {Precision::BF16, Precision::F16}) {
    PoolCase c = cases[2];
    c.p = p;
    check_graph(conv_pool(c), std::string("conv pool ") + std::string(precision_name(p)));
  }
}

TEST(CpuFusion, ConvPoolUnfused) {
  // A band of 2 x 300 output rows is more than a CPU tile holds; fuse_pool=0.
  PoolCase wide{{1, 2, 6, 302}, {3, 2, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}, 2, 2, true};
  auto program = check_graph(conv_pool(wide), "conv pool, wide band");
  ASSERT_TRUE(program);
  EXPECT_EQ(program->launches.size(), 2u) << program->plan_text;
  EXPECT_NE(program->plan_text.find("more than a CPU tile holds"), std::string::npos) << program->plan_text;
  PoolCase c{{2, 3, 16, 16}, {8, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 2, 2, true};
  auto off = check_graph(conv_pool(c), "conv pool, fuse_pool=0", "fuse_pool=0");
  ASSERT_TRUE(off);
  EXPECT_EQ(off->launches.size(), 2u) << off->plan_text;
}

// linear / matmul -> epilogue -> max / avg pool1d along N -> elementwise.
Expected<Graph> linear_pool1d(Shape x_shape, int64_t n, int64_t k, int64_t stride, bool is_max, bool matmul) {
  GraphBuilder g(Precision::FP32, "cpu_pool1d");
  const int64_t in = x_shape.back();
  auto x = g.input("x", std::move(x_shape));
  auto y = matmul ? g.matmul(x, g.input("w", {in, n})) : g.linear(x, g.input("w", {n, in}), g.input("b", {n}));
  y = y.sigmoid() * 3.0;
  Pool1dOptions po;
  po.kernel = k;
  po.stride = stride;
  g.output("y", (is_max ? y.max_pool1d(po) : y.avg_pool1d(po)) - 1.0);
  return g.build();
}

TEST(CpuFusion, Pool1dAlongN) {
  struct Case {
    Shape x;
    int64_t n, k;
    bool is_max, matmul;
  };
  const std::vector<Case> cases = {
      {{37, 50}, 300, 4, true, false},   // 75 windows
      {{1, 20}, 101, 3, false, false},   // M = 1, floor mode drops the last 2 columns
      {{5, 33}, 1000, 7, true, false},   // several column tiles
      {{2, 3, 9}, 64, 64, false, false}, // one window per row, leading dims
      {{2, 6, 17}, 130, 5, true, true},  // batched matmul
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string label = "pool1d case " + std::to_string(i);
    auto program = check_graph(linear_pool1d(c.x, c.n, c.k, c.k, c.is_max, c.matmul), label);
    if (program) {
      EXPECT_EQ(program->launches.size(), 1u) << label << "\n" << program->plan_text;
      EXPECT_TRUE(program->scratch.empty()) << label << "\n" << program->plan_text;
    }
    check_graph(linear_pool1d(c.x, c.n, c.k, c.k, c.is_max, c.matmul), label + ", 5x48 tiles kc 9",
                "cpu_tile=5x48,cpu_kc=9");
  }
  // Overlapping windows stay a pool kernel of their own, with a note.
  auto overlap = check_graph(linear_pool1d({9, 20}, 100, 4, 2, true, false), "pool1d, stride 2");
  ASSERT_TRUE(overlap);
  EXPECT_EQ(overlap->launches.size(), 2u) << overlap->plan_text;
  EXPECT_NE(overlap->plan_text.find("its windows overlap"), std::string::npos) << overlap->plan_text;
}

TEST(CpuFusion, ConvReductionsAndPoolsStayUnfusedWithANote) {
  GraphBuilder g(Precision::FP32, "cpu_conv_sum");
  auto x = g.input("x", {2, 3, 9, 9});
  auto w = g.input("w", {8, 3, 3, 3});
  auto y = g.conv2d(x, w, std::nullopt, Conv2dOptions{{1, 1}, {1, 1}, {1, 1}, 1});
  g.output("s", y.sum({1}));
  auto program = check_graph(g.build(), "conv + channel sum");
  ASSERT_TRUE(program);
  EXPECT_NE(program->plan_text.find("a CPU conv tile is channels x pixels"), std::string::npos) << program->plan_text;
}

// The planner cases of the fusion rule (tests/plan_rule_cases.h) and the
// row-finish examples, with the default plan and with reductions unfused: a
// row-finish kernel's broadcast back over the rows included.
TEST(CpuFusion, PlanRuleCasesMatchReference) {
  for (const char* config : {"", "fuse_reductions=0"}) {
    for (const testing::PlanRuleCase& c : testing::plan_rule_cases())
      check_graph(parse_spec(c.spec, c.name), c.name + " " + config, config);
    for (const char* ex : {"linear_row_stats", "linear_rmsnorm", "linear_max_subtract_gelu", "matmul_log_softmax_f16"})
      check_graph(load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + ex + ".yaml"), std::string(ex) + " " + config,
                  config);
  }
}

TEST(CpuFusion, FinishKernelBroadcastsOrReducesAcrossRows) {
  // (conv_squeeze_excite_input: the CPU conv does not fuse spatial reductions.)
  for (const char* name : {"residual_input_after_reduction", "two_finishes_broadcast_back", "sum_then_max_over_rows",
                           "rows_then_mean_of_tanh"}) {
    for (const testing::PlanRuleCase& c : testing::plan_rule_cases()) {
      if (c.name != name) continue;
      auto program = check_graph(parse_spec(c.spec, c.name), c.name);
      ASSERT_TRUE(program);
      EXPECT_EQ(program->launches.size(), 2u) << program->plan_text;
      EXPECT_TRUE(program->plan_text.find("then, broadcast over the rows") != std::string::npos ||
                  program->plan_text.find("finished rows in this kernel (one block)") != std::string::npos)
          << program->plan_text;
    }
  }
}


// Reductions, pools, softmax and norms of values computed from inputs alone
// compute them where they read them (no pointwise kernel writing the value
// out): sums, extremes and logsumexp over trailing and inner dims, a global
// average pool, padded 2-D and 1-D pools, softmax along an inner dim, a group
// norm, broadcast operands, bf16. A transposed value is written out (a tiled
// transpose; then contiguous row reads), as is a norm's computed weight.
TEST(CpuFusion, ReductionsAndPoolsComputeLeafOperands) {
  for (Precision p : {Precision::FP32, Precision::BF16}) {
    GraphBuilder g(p, "cpu_leaf_operands");
    auto x = g.input("x", {3, 5, 9, 8});
    auto bias = g.input("bias", {5, 1, 1});
    auto h = (x * 2.0 + bias).tanh();              // computed from inputs alone
    auto t = (x.transpose(2, 3) - bias).sigmoid();  // read at swapped coordinates: written out
    g.output("rows", h.logsumexp({3}));
    g.output("inner", h.max({1}, true) + t.sum({2}, true).transpose(2, 3));
    g.output("gap", t.global_avg_pool());
    g.output("hgap", h.global_avg_pool());
    Pool2dOptions pool;
    pool.kernel = {3, 3};
    pool.stride = {2, 2};
    pool.padding = {1, 1};
    g.output("maxpool", h.max_pool2d(pool));
    pool.count_include_pad = false;
    g.output("avgpool", (h * bias).avg_pool2d(pool));
    Pool1dOptions pool1;
    pool1.kernel = 3;
    pool1.padding = 1;
    g.output("pool1d", (x.reshape({15, 72}) * 0.5).exp().avg_pool1d(pool1));
    g.output("softmax", h.softmax(1) + t.log_softmax(3).transpose(2, 3));
    auto gamma = g.input("gamma", {5});
    g.output("norm", h.group_norm(5, gamma * 2.0, gamma));
    const std::string label = "leaf operands " + std::string(precision_name(p));
    auto program = check_graph(g.build(), label);
    if (!program) continue;
    const std::string& plan = program->plan_text;
    for (const char* reader : {"logsumexp", "max %", "global_avg_pool", "max_pool2d", "avg_pool2d", "avg_pool1d",
                               "softmax", "group_norm"})
      EXPECT_NE(plan.find(std::string("is computed from the inputs where ") + reader), std::string::npos)
          << reader << ": " << label << "\n" << plan;
    // Written out: t (it reads a transpose) and gamma * 2 (a norm's weight), nothing else.
    int written = 0;
    for (size_t at = plan.find("written out because"); at != std::string::npos;
         at = plan.find("written out because", at + 1))
      ++written;
    EXPECT_EQ(written, 2) << label << "\n" << plan;
    EXPECT_NE(plan.find("(transpose %"), std::string::npos) << label << "\n" << plan;
  }
}

// A value that loads many full-size inputs and has many readers costs less
// written once: 3 inputs x 3 readers (9 loads) > 3 loads + a write + 3 reads.
TEST(CpuFusion, CostlyLeafOperandIsWrittenOnce) {
  GraphBuilder g(Precision::FP32, "cpu_costly_leaf");
  auto a = g.input("a", {6, 40});
  auto s = (a + g.input("b", {6, 40}) * g.input("c", {6, 40})).tanh();
  g.output("sum", s.sum({1}));
  g.output("max", s.max({1}));
  g.output("min", s.min({0}));
  auto program = check_graph(g.build(), "costly leaf operand");
  ASSERT_TRUE(program);
  EXPECT_NE(program->plan_text.find("written out because a reduction/softmax/pool reads it"), std::string::npos)
      << program->plan_text;
  // Two readers: 6 loads <= 3 + 1 + 2, so computed where read.
  GraphBuilder two(Precision::FP32, "cpu_two_readers");
  auto a2 = two.input("a", {6, 40});
  auto s2 = (a2 + two.input("b", {6, 40}) * two.input("c", {6, 40})).tanh();
  two.output("sum", s2.sum({1}));
  two.output("max", s2.max({1}));
  program = check_graph(two.build(), "two readers");
  ASSERT_TRUE(program);
  EXPECT_EQ(program->launches.size(), 2u) << program->plan_text;
}

}  // namespace
}  // namespace fusejit
