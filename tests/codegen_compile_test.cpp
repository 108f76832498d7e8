// Every example spec and 200 random chains generate a Program for sm_80 and
// for sm_90a (the wgmma mainloop where it applies) that NVRTC compiles to a
// CUBIN (no GPU needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/compile_jobs.h"
#include "tests/plan_rule_cases.h"
#include "tests/random_chains.h"

namespace fusejit {
namespace {

struct Job {
  std::string label;
  Graph graph;
  std::string config;
};

// Generates and compiles every job for both archs on all cores (at least 2);
// returns one message per failure, and the programs' plans.
std::vector<std::string> compile_all(const std::vector<Job>& jobs, std::vector<std::string>* plans = nullptr) {
  std::vector<std::string> failures;
  if (plans) plans->assign(jobs.size(), "");
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      const Job& job = jobs[i];
      std::string failure, plan;
      for (const char* arch : {"sm_80", "sm_90a"}) {  // codegen picks per-arch mainloops
        Expected<Program> p = generate_program(job.graph, {arch, job.config});
        if (!p) {
          failure += job.label + " (" + arch + "): codegen: " + p.error().str() + "\n";
          continue;
        }
        plan = p->plan_text;
        if (i % test_util::kSanitizedCompileStride) continue;  // (under ASan: a sample compiles)
        Expected<CubinResult> c = compile_to_cubin(p->source, p->name, {arch, false, {}});
        if (!c) failure += job.label + " (" + arch + "): " + c.error().str().substr(0, 4000) + "\n";
        else if (c->cubin.size() < 4 || std::string(c->cubin.data() + 1, 3) != "ELF")
          failure += job.label + " (" + arch + "): not an ELF CUBIN\n";
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!failure.empty()) failures.push_back(failure + "\n" + print_graph(job.graph));
      if (plans) (*plans)[i] = plan;  // sm_90a's
    }
  };
  const unsigned n = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return failures;
}

std::vector<std::filesystem::path> example_specs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(FUSEJIT_SOURCE_DIR) + "/examples"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CodegenCompile, EveryExampleCompilesForSm80AndSm90a) {
  std::vector<Job> jobs;
  for (const auto& path : example_specs()) {
    Expected<Graph> g = load_spec_file(path.string());
    ASSERT_TRUE(g.ok()) << g.error().str();
    jobs.push_back({path.filename().string(), g.take(), ""});
  }
  ASSERT_GE(jobs.size(), 3u) << "expected the seed examples in examples/";
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The unfused fallbacks of the examples (pool and reductions kept out of the
// epilogue, a small tile) compile too.
TEST(CodegenCompile, ExamplesWithFusionDisabledCompile) {
  std::vector<Job> jobs;
  for (const auto& path : example_specs()) {
    Expected<Graph> g = load_spec_file(path.string());
    ASSERT_TRUE(g.ok()) << g.error().str();
    jobs.push_back({path.filename().string() + " unfused", g.take(), "fuse_pool=0,fuse_reductions=0,tile=32x32x4x4"});
  }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The planner cases of the fusion rule (row-finish kernels that broadcast
// back over their rows among them).
TEST(CodegenCompile, PlanRuleCasesCompile) {
  std::vector<Job> jobs;
  for (const testing::PlanRuleCase& c : testing::plan_rule_cases()) {
    Expected<Graph> g = parse_spec(c.spec, c.name);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.error().str();
    jobs.push_back({c.name, g.take(), ""});
  }
  std::vector<std::string> plans;
  for (const std::string& f : compile_all(jobs, &plans)) ADD_FAILURE() << f;
  EXPECT_TRUE(std::any_of(plans.begin(), plans.end(), [](const std::string& p) {
    return p.find("then, broadcast over the rows") != std::string::npos;
  }));
}

TEST(CodegenCompile, TwoHundredRandomChainsCompileForSm80AndSm90a) {
  std::vector<Job> jobs;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Expected<Graph> g = testing::random_chain(seed);
    ASSERT_TRUE(g.ok()) << "seed " << seed << ": " << g.error().str();
    jobs.push_back({"random chain " + std::to_string(seed), g.take(), ""});
  }
  std::vector<std::string> plans;
  for (const std::string& f : compile_all(jobs, &plans)) ADD_FAILURE() << f;

  // The chains exercise every kind of kernel and every fusion.
  auto count = [&](const std::string& what) {
    return std::count_if(plans.begin(), plans.end(),
                         [&](const std::string& p) { return p.find(what) != std::string::npos; });
  };
  for (const char* what : {"[anchor] linear", "[anchor] matmul", "[anchor] conv2d", "[pointwise]", "[reduce]",
                           "[softmax]", "[pool2d]", "[pool1d]", "[row-finish]", "fused max_pool2d", "fused avg_pool2d",
                           "fused sum", "fused logsumexp", "partials of", "scratch 0:", "precision bf16",
                           "precision f16", "precision tf32", "wgmma bf16", "wgmma f16", "wgmma tf32",
                           "wgmma f32x3", "stores a partial per column", "stores a partial per channel"})
    EXPECT_GE(count(what), 2) << "no random chain covers '" << what << "'";
}

}  // namespace
}  // namespace fusejit
