// The CPU backend end to end (Engine, Backend::Cpu): every examples/*.yaml
// (batch cut to 2 so CI stays fast) and the 200 random chains of
// tests/random_chains.h — ragged shapes, every precision mode, fallback
// kernels — run on seeded inputs with NaN-poisoned outputs and match the fp64
// reference at the precision's tolerance. Skipped in builds without LLVM.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "compiler/cpu_program.h"
#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/kernel_check.h"
#include "tests/random_chains.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

Engine& shared_engine() {
  static Engine engine;
  return engine;
}

CompileOptions cpu_options(const std::string& config = "") {
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  opts.config = config;
  return opts;
}

// The graph with dim 0 of the anchor's input (and of every other non-weight
// input of that batch size) cut to `batch`; the original if that does not
// prepare (a dim that only looks like the batch).
Graph with_batch(const Graph& g, int64_t batch) {
  const auto anchor = g.anchor();
  if (!anchor) return g;
  const Node& a = g.node(*anchor);
  const Shape& x = g.node(a.operands[0]).type.shape;
  if (x.size() < 2 || x[0] <= batch) return g;
  Graph cut = g;
  for (ValueId v : cut.inputs()) {
    const bool weight = a.operands.size() > 1 && a.op != OpKind::Matmul &&
                        std::find(a.operands.begin() + 1, a.operands.end(), v) != a.operands.end();
    Node& n = cut.node(v);
    if (!weight && n.type.shape.size() >= 2 && n.type.shape[0] == x[0]) n.type.shape[0] = batch;
  }
  return prepare_graph(cut) ? cut : g;
}

void expect_matches(const Graph& g, const std::string& what, const std::string& config = "") {
  auto kernel = shared_engine().compile(g, cpu_options(config));
  ASSERT_TRUE(kernel) << what << ": " << kernel.error().str();
  ASSERT_EQ((*kernel)->backend(), Backend::Cpu);
  CheckOptions check;
  check.time = false;
  check.samples = 20000;
  check.dense_limit_macs = 2e8;  // bigger anchors: a sampled reference (the seed convs)
  auto r = check_kernel(**kernel, g, check);
  ASSERT_TRUE(r) << what << ": " << r.error().str();
  EXPECT_TRUE(r->pass) << what << " (" << (*kernel)->name() << "):\n" << r->summary() << print_graph(g);
}

class CpuExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuExamples, MatchesReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  auto g = load_spec_file((fs::path(FUSEJIT_SOURCE_DIR) / "examples" / (GetParam() + ".yaml")).string());
  ASSERT_TRUE(g) << g.error().str();
  expect_matches(with_batch(*g, 2), GetParam());
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(FUSEJIT_SOURCE_DIR) / "examples", ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(All, CpuExamples, ::testing::ValuesIn(example_names()),
                         [](const auto& info) { return info.param; });

void run_chains(int count, uint64_t first_seed, const std::string& config) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  int failures = 0;
  for (int i = 0; i < count && failures < 5; ++i) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(i);
    auto g = testing::random_chain(seed);
    ASSERT_TRUE(g) << "chain " << seed << ": " << g.error().str();
    const int before = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    expect_matches(*g, "chain " + std::to_string(seed), config);
    if (::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() > before) ++failures;
  }
}

TEST(CpuRandomChains, MatchReference) { run_chains(200, 1, ""); }

// Tiny micro-tiles: every chain's anchor runs mostly edge tiles.
TEST(CpuRandomChains, SmallTilesMatchReference) { run_chains(40, 1001, "cpu_tile=3x16 cpu_kc=5"); }

TEST(CpuBackend, BadConfigIsAnError) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  auto g = testing::random_chain(7);
  ASSERT_TRUE(g);
  for (const char* bad : {"cpu_tile=0x8", "cpu_tile=banana", "cpu_kc=0", "cpu_nc=0", "cpu_mc=x", "mainloop=warp"}) {
    auto k = shared_engine().compile(*g, cpu_options(bad));
    ASSERT_FALSE(k) << bad;
    EXPECT_NE(k.error().str().find("config"), std::string::npos) << k.error().str();
  }
}

// The engine's path hands the runtime bitcode (cheap to write and hash on a
// disk-cache hit); fusejit emit asks for the same module as readable text.
TEST(CpuBackend, ModuleIsBitcodeUnlessTextIsAsked) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  auto g = testing::random_chain(5);
  ASSERT_TRUE(g);
  CpuCodegenOptions opts;
  auto bitcode = generate_cpu_program(*g, opts);
  opts.ir_text = true;
  auto text = generate_cpu_program(*g, opts);
  ASSERT_TRUE(bitcode && text);
  ASSERT_GE(bitcode->llvm_module.size(), 4u);
  EXPECT_EQ(bitcode->llvm_module.substr(0, 4), std::string("BC\xC0\xDE"));  // the bitcode magic
  EXPECT_NE(text->llvm_module.find("define void @" + text->launches[0].function), std::string::npos);
  auto again = generate_cpu_program(*g, {});  // deterministic: the cache key hashes it
  ASSERT_TRUE(again);
  EXPECT_EQ(again->llvm_module, bitcode->llvm_module);
}

TEST(CpuBackend, LaunchChecksArguments) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  auto g = testing::random_chain(3);
  ASSERT_TRUE(g);
  auto k = shared_engine().compile(*g, cpu_options());
  ASSERT_TRUE(k) << k.error().str();
  EXPECT_FALSE((*k)->launch({}, {}));  // wrong counts
  std::vector<DevicePtr> nulls_in(g->inputs().size(), 0), nulls_out(g->outputs.size(), 0);
  EXPECT_FALSE((*k)->launch(nulls_in, nulls_out));
}

}  // namespace
}  // namespace fusejit
