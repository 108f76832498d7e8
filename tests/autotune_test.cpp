// The tuner's logic with a fake runner and clock (CPU), the tuning database,
// and the candidate space.
#include <gtest/gtest.h>

#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <regex>
#include <set>

#include "compiler/plan.h"
#include "compiler/codegen.h"
#include "compiler/tuning_space.h"
#include "fusejit/builder.h"
#include "runtime/tuner_core.h"
#include "runtime/tuning_db.h"

namespace fusejit {
namespace {

struct FakeRunner : CandidateRunner {
  std::map<std::string, double> ms;          // config -> median
  std::set<std::string> wrong, no_compile;   // configs that fail
  std::atomic<int> compiles{0};
  double* clock = nullptr;                   // advanced by each call
  double compile_cost = 0, measure_cost = 0;
  std::vector<std::string> measured;

  Status compile(const std::string& c) override {
    ++compiles;
    if (clock) *clock += compile_cost;  // single-threaded in the budget tests
    if (no_compile.count(c)) return Error("nvrtc: broken");
    return Status::success();
  }
  Expected<Measurement> measure(const std::string& c) override {
    measured.push_back(c);
    if (clock) *clock += measure_cost;
    Measurement m;
    m.correct = !wrong.count(c);
    m.median_ms = ms.at(c);
    m.min_ms = m.median_ms * 0.99;
    m.max_ms = m.median_ms * 1.02;
    m.rel_l2 = m.correct ? 1e-7 : 0.5;
    return m;
  }
};

TEST(Tuner, PicksTheFastestCorrectCandidate) {
  FakeRunner r;
  r.ms = {{"", 2.0}, {"a", 1.5}, {"b", 0.9}, {"c", 1.1}, {"d", 3.0}};
  r.wrong = {"b"};  // fastest, but wrong: must not win
  r.no_compile = {"d"};
  TuneOptions o;
  o.compile_threads = 3;
  TuneReport rep = run_tuner({"", "a", "b", "c", "d"}, r, o);
  ASSERT_NE(rep.best(), nullptr);
  EXPECT_EQ(rep.best()->config, "c");
  EXPECT_EQ(rep.candidates[2].state, CandidateResult::State::Wrong);
  EXPECT_EQ(rep.candidates[4].state, CandidateResult::State::CompileFailed);
  EXPECT_EQ(r.compiles.load(), 5);
  EXPECT_EQ(r.measured, (std::vector<std::string>{"", "a", "b", "c"}));  // in order, failed compile not run
  EXPECT_NE(rep.table().find("WRONG RESULT"), std::string::npos);
  EXPECT_LE(rep.best()->median_ms, rep.candidates[0].median_ms);
}

TEST(Tuner, DefaultWinsWhenNothingIsFaster) {
  FakeRunner r;
  r.ms = {{"", 1.0}, {"a", 1.2}, {"b", 1.0001}};
  TuneReport rep = run_tuner({"", "a", "b"}, r, {});
  ASSERT_NE(rep.best(), nullptr);
  EXPECT_EQ(rep.best()->config, "");
}

TEST(Tuner, BudgetSkipsLateCandidatesButAlwaysMeasuresTheDefault) {
  double now = 0;
  FakeRunner r;
  r.clock = &now;
  r.compile_cost = 1.0;
  r.measure_cost = 1.0;
  r.ms = {{"", 1.0}, {"a", 0.5}, {"b", 0.4}, {"c", 0.3}};
  TuneOptions o;
  o.budget_s = 2.5;
  o.compile_threads = 1;
  TuneReport rep = run_tuner({"", "a", "b", "c"}, r, o, [&] { return now; });
  // compiles: "" (t=1), "a" (t=2), "b" (t=3) ; "c" skipped (3 > 2.5)
  EXPECT_EQ(rep.candidates[3].state, CandidateResult::State::Skipped);
  // measuring: the default always, then the rest are over budget
  EXPECT_EQ(rep.candidates[0].state, CandidateResult::State::Ok);
  EXPECT_EQ(rep.candidates[1].state, CandidateResult::State::Skipped);
  ASSERT_NE(rep.best(), nullptr);
  EXPECT_EQ(rep.best()->config, "");
}

TEST(Tuner, ReportsProgress) {
  FakeRunner r;
  r.ms = {{"", 1.0}, {"a", 0.5}};
  std::vector<size_t> seen;
  TuneOptions o;
  o.progress = [&](size_t done, size_t total, const std::string&) {
    EXPECT_EQ(total, 4u);
    seen.push_back(done);
  };
  run_tuner({"", "a"}, r, o);
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.back(), 4u);
}

Graph small_linear(int64_t n) {
  GraphBuilder g;
  auto x = g.input("x", {64, 128});
  g.output("y", g.linear(x, g.input("w", {n, 128})).relu());
  return g.build().take();
}

TEST(TuningSpace, EveryCandidateIsALegalConfig) {
  for (int64_t n : {8, 100, 4096}) {
    auto cands = tuning_candidates(small_linear(n));
    ASSERT_GE(cands.size(), 2u) << n;
    EXPECT_EQ(cands[0], "");
    std::set<std::string> unique(cands.begin(), cands.end());
    EXPECT_EQ(unique.size(), cands.size());
    for (const auto& c : cands) EXPECT_TRUE(cg::parse_heuristics(c)) << c;
  }
  // Small N: no 256-wide tiles.
  for (const auto& c : tuning_candidates(small_linear(8))) EXPECT_EQ(c.find("x256x"), std::string::npos) << c;
}

// Convs on halo patches also try register caps (mma_min_blocks), each a legal program.
TEST(TuningSpace, HaloPatchConvsTryRegisterCaps) {
  GraphBuilder g(Precision::BF16);
  Conv2dOptions o;
  o.padding = {2, 2};
  g.output("dx", g.conv2d(g.input("dz", {2, 64, 12, 12}), g.input("w", {8, 64, 3, 3}), std::nullopt, o));
  const Graph dx = g.build().take();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto cands = tuning_candidates(dx, arch);
    int caps = 0, warp_tiles = 0;
    for (const auto& c : cands) {
      if (std::regex_match(c, std::regex(R"(mma_tile=\d+x\d+x3x32)"))) ++warp_tiles;
      if (c.find("mma_min_blocks=") != std::string::npos) {
        ++caps;
        auto prog = generate_program(dx, {arch, c});
        ASSERT_TRUE(prog) << c << ": " << prog.error().str();
        EXPECT_NE(prog->name.find("_halo"), std::string::npos) << c;
      }
    }
    EXPECT_EQ(caps, 4) << arch;       // 2, 4, 6 and 8 on 64x16 tiles
    EXPECT_GE(warp_tiles, 2) << arch;  // tiles whose warps are 32 columns wide
    // Several channel blocks: no halo prefetch either way (it cannot apply).
    for (const auto& c : cands) EXPECT_EQ(c.find("halo_prefetch"), std::string::npos) << c;
  }
  // Not for a conv on the im2col gather (Cin 64 -> Cout 128 on sm_80).
  GraphBuilder w(Precision::BF16);
  w.output("y", w.conv2d(w.input("x", {2, 64, 12, 12}), w.input("w", {128, 64, 3, 3}), std::nullopt, o));
  const Graph wide = w.build().take();
  auto plain = generate_program(wide, {"sm_80", ""});
  ASSERT_TRUE(plain) << plain.error().str();
  EXPECT_NE(plain->plan_text.find("im2col gather"), std::string::npos) << plain->plan_text;
  for (const auto& c : tuning_candidates(wide, "sm_80")) EXPECT_EQ(c.find("mma_min_blocks"), std::string::npos) << c;
}

// conv2d_weight_grad: mma.sync tiles, the SIMT mainloop, and splits around the default's; each a legal program.
TEST(TuningSpace, WeightGradTriesSplitsAroundTheDefault) {
  GraphBuilder g(Precision::TF32);
  g.output("dw", g.conv2d_weight_grad(g.input("x", {8, 16, 34, 34}), g.input("dz", {8, 64, 32, 32}), {3, 3}));
  const Graph wgrad = g.build().take();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto def = generate_program(wgrad, {arch, ""});
    ASSERT_TRUE(def) << def.error().str();
    const unsigned split = def->launches[0].grid[2];
    ASSERT_GE(split, 4u) << def->plan_text;
    const auto cands = tuning_candidates(wgrad, arch);
    std::set<std::string> splits;
    for (const auto& c : cands) {
      auto prog = generate_program(wgrad, {arch, c});
      ASSERT_TRUE(prog) << arch << " " << c << ": " << prog.error().str();
      EXPECT_EQ(c.find("wgmma"), std::string::npos) << c;
      if (c.rfind("split_k=", 0) == 0) splits.insert(c);
    }
    EXPECT_EQ(splits, (std::set<std::string>{"split_k=1", "split_k=" + std::to_string(split / 2),
                                             "split_k=" + std::to_string(split * 2)}))
        << arch;
  }
}

// A dW on wgmma (sm_90a): its tiles each with the split that fills the SMs and half of it (an explicit wgmma_tile
// is not split by default, and K is deep); tf32: the swap-AB dW's (192 columns where a kernel row shares a box of
// x); and the mma.sync dW. Each a legal program.
TEST(TuningSpace, WgmmaWeightGradTilesComeWithSplits) {
  for (Precision p : {Precision::TF32, Precision::BF16}) {
    GraphBuilder g(p);
    g.output("dw", g.conv2d_weight_grad(g.input("x", {2, 64, 18, 20}), g.input("dz", {2, 128, 16, 18}), {3, 3}));
    const Graph wgrad = g.build().take();
    const auto cands = tuning_candidates(wgrad, "sm_90a");
    int tiles = 0;
    bool swap192 = false, mma = false;
    for (const auto& c : cands) {
      if (c.find("wgmma_tile=") != std::string::npos) {
        ++tiles;
        EXPECT_NE(c.find(",split_k="), std::string::npos) << c;
        swap192 = swap192 || c.rfind("wgmma_swap_ab=1,wgmma_tile=128x192x", 0) == 0;
      }
      mma = mma || c == "mainloop=mma";
      auto prog = generate_program(wgrad, {"sm_90a", c});
      ASSERT_TRUE(prog) << precision_name(p) << " '" << c << "': " << prog.error().str();
    }
    EXPECT_GE(tiles, 8) << precision_name(p);
    EXPECT_EQ(swap192, p == Precision::TF32) << precision_name(p);
    EXPECT_TRUE(mma) << precision_name(p) << ": the mma.sync dW";
  }
}

// An fp32 GEMM of few rows defaults to FFMA (the GEMV loop) with split-K: the tuner also tries the tensor-core
// mainloops, splits around the default's, other GEMV tiles and the SIMT tile (gemv=0).
TEST(TuningSpace, SkinnyFp32TriesTheTensorCoreMainloopsAndSplits) {
  GraphBuilder g(Precision::FP32);
  g.output("y", g.linear(g.input("x", {32, 8192}), g.input("w", {1024, 8192})).relu());
  const Graph graph = g.build().take();
  const auto cands = tuning_candidates(graph, "sm_90a");
  auto has = [&](const std::string& c) { return std::find(cands.begin(), cands.end(), c) != cands.end(); };
  EXPECT_TRUE(has("mainloop=mma"));
  EXPECT_TRUE(has("mainloop=wgmma"));
  EXPECT_TRUE(has("mainloop=ffma,split_k=1"));
  EXPECT_TRUE(has("mainloop=ffma,split_k=8"));  // the default's 16, halved and doubled
  EXPECT_TRUE(has("mainloop=ffma,split_k=32"));
  EXPECT_TRUE(has("mainloop=ffma,gemv=0"));
  EXPECT_TRUE(has("gemv_tile=32x256x1x4x3"));  // other GEMV tiles
  EXPECT_TRUE(has("gemv_tile=128x32x4x4"));
  EXPECT_TRUE(has("gemv_tile=256x16x2x1"));
  EXPECT_FALSE(has("gemv_tile=64x64x2x4x2")) << "the default's own tile";
  for (const auto& c : cands) EXPECT_TRUE(cg::parse_heuristics(c)) << c;
  for (const char* c : {"mainloop=mma", "mainloop=wgmma"})
    EXPECT_TRUE(generate_program(graph, {"sm_90a", c}).ok()) << c;
  auto split8 = generate_program(graph, {"sm_90a", "mainloop=ffma,split_k=8"});
  ASSERT_TRUE(split8.ok()) << split8.error().str();
  EXPECT_EQ(split8->launches.at(0).grid[2], 8u) << split8->plan_text;
}

TEST(TuningSpace, WgmmaTilesAndTheSimtMainloopWhereTheAnchorIsOnWgmma) {
  auto linear = [](Precision p, int64_t n) {
    GraphBuilder g(p);
    auto x = g.input("x", {512, 256});
    g.output("y", g.linear(x, g.input("w", {n, 256})).relu());
    return g.build().take();
  };
  auto has = [](const std::vector<std::string>& v, const std::string& c) {
    return std::find(v.begin(), v.end(), c) != v.end();
  };
  const auto bf16 = tuning_candidates(linear(Precision::BF16, 4096), "sm_90a");
  EXPECT_TRUE(has(bf16, "wgmma_tile=128x256x4x8")) << "the widest tile, deepest ring";
  EXPECT_TRUE(has(bf16, "wgmma_tile=64x64x8x16"));
  EXPECT_TRUE(has(bf16, "mainloop=ffma"));
  EXPECT_TRUE(has(bf16, "tile=128x128x8x8"));
  for (const auto& c : bf16) EXPECT_TRUE(cg::parse_heuristics(c)) << c;
  // two columns a call only where the default does not take TMA stores (a gelu there); never the direct
  // epilogue (stores from the registers: measured slower, not a candidate)
  EXPECT_FALSE(has(bf16, "epilogue_pairs=1")) << "TMA stores: pairs change nothing";
  GraphBuilder gb(Precision::BF16);
  gb.output("y", gb.linear(gb.input("x", {512, 256}), gb.input("w", {4096, 256})).gelu());
  const auto gelu = tuning_candidates(gb.build().take(), "sm_90a");
  EXPECT_TRUE(has(gelu, "epilogue_pairs=1"));
  for (const auto* list : {&bf16, &gelu})
    for (const auto& c : *list) EXPECT_EQ(c.find("epilogue_direct"), std::string::npos) << c;
  // 128x168 ping-pong where the default tile is 168 wide (512x4096x11008), not elsewhere
  const auto odd = tuning_candidates(linear(Precision::BF16, 11008), "sm_90a");
  EXPECT_TRUE(has(odd, "wgmma_tile=128x168x5,wgmma_schedule=pingpong"));
  EXPECT_FALSE(has(bf16, "wgmma_tile=128x168x5,wgmma_schedule=pingpong"));
  int pingpong = 0, tall = 0;  // ping-pong candidates (64- and 128-row tiles), each one a legal program
  for (const auto& c : bf16)
    if (c.find("wgmma_schedule=pingpong") != std::string::npos) {
      ++pingpong;
      tall += c.rfind("wgmma_tile=128x128x", 0) == 0;
      EXPECT_TRUE(c.rfind("wgmma_tile=64x", 0) == 0 || c.rfind("wgmma_tile=128x128x", 0) == 0) << c;
      auto prog = generate_program(linear(Precision::BF16, 4096), {"sm_90a", c});
      ASSERT_TRUE(prog) << c << ": " << prog.error().str();
      EXPECT_NE(prog->plan_text.find("ping-pong"), std::string::npos) << c << "\n" << prog->plan_text;
    }
  EXPECT_GE(pingpong, 4);
  EXPECT_GE(tall, 2);
  // 176 / 192 columns for K-major B; a 16-bit matmul reads B [K, N] in 64-column boxes: none, each legal.
  EXPECT_TRUE(std::any_of(bf16.begin(), bf16.end(), [](const std::string& c) { return c.find("x176x") != std::string::npos; }));
  GraphBuilder mm(Precision::BF16);
  mm.output("y", mm.matmul(mm.input("a", {512, 256}), mm.input("b", {256, 4096})).relu());
  const Graph matmul = mm.build().take();
  for (const auto& c : tuning_candidates(matmul, "sm_90a")) {
    EXPECT_TRUE(c.find("x176x") == std::string::npos && c.find("x192x") == std::string::npos) << c;
    if (c.rfind("wgmma_tile=", 0) == 0) EXPECT_TRUE(generate_program(matmul, {"sm_90a", c})) << c;
  }
  // fp32 operands of a matmul (B [K, N]): swap-AB tiles and the transposed copy, each legal, each what it says.
  for (Precision p : {Precision::TF32, Precision::FP32}) {
    GraphBuilder fm(p);
    fm.output("y", fm.matmul(fm.input("a", {512, 256}), fm.input("b", {256, 4096})).relu());
    const Graph g = fm.build().take();
    const auto cands = tuning_candidates(g, "sm_90a");
    EXPECT_TRUE(has(cands, "wgmma_swap_ab=0")) << precision_name(p);
    int swapped = 0;
    for (const auto& c : cands)
      if (c.rfind("wgmma_swap_ab=1,wgmma_tile=", 0) == 0) {
        ++swapped;
        auto prog = generate_program(g, {"sm_90a", c});
        ASSERT_TRUE(prog) << c << ": " << prog.error().str();
        EXPECT_NE(prog->plan_text.find(" swap-AB,"), std::string::npos) << c << "\n" << prog->plan_text;
      }
    EXPECT_GE(swapped, p == Precision::TF32 ? 6 : 2) << precision_name(p);
  }
  // 3xTF32 keeps a second accumulator: no 256-wide wgmma tiles, and each legal.
  const Graph fp32 = linear(Precision::FP32, 4096);
  for (const auto& c : tuning_candidates(fp32, "sm_90a")) {
    EXPECT_EQ(c.find("wgmma_tile=128x256"), std::string::npos) << c;
    EXPECT_EQ(c.find("pingpong"), std::string::npos) << c;
    EXPECT_TRUE(generate_program(fp32, {"sm_90a", c})) << c;
  }
  // Small grids: wgmma split-K candidates, each a legal wgmma program (split_k=1: none).
  GraphBuilder sb(Precision::BF16);
  sb.output("y", sb.linear(sb.input("x", {32, 8192}), sb.input("w", {1024, 8192})).relu());
  const Graph skinny = sb.build().take();
  const auto split = tuning_candidates(skinny, "sm_90a");
  for (const char* c : {"split_k=1", "split_k=2", "split_k=8", "split_k=16"}) {
    EXPECT_TRUE(has(split, c)) << c;
    auto prog = generate_program(skinny, {"sm_90a", c});
    ASSERT_TRUE(prog) << c << ": " << prog.error().str();
    EXPECT_NE(prog->name.find("_wgmma_"), std::string::npos) << c;
    EXPECT_EQ(prog->plan_text.find("split-K") != std::string::npos, std::string(c) != "split_k=1") << prog->plan_text;
  }
  EXPECT_FALSE(has(bf16, "split_k=2"));  // 512x4096: enough tiles
  // Not sm_90a: SIMT tiles only.
  for (const auto& c : tuning_candidates(linear(Precision::BF16, 4096), "sm_80"))
    EXPECT_EQ(c.find("wgmma"), std::string::npos) << c;
}

// A wgmma conv of short K: the shallower rings its default takes (4 stages, 64-column epilogue chunks) and the
// resident-filter halo path and the fp32-staged epilogue (conv_runs=0) are candidates, each a legal program.
TEST(TuningSpace, ConvOnWgmmaTriesShallowRingsAndTheHalo) {
  GraphBuilder g(Precision::BF16);
  Conv2dOptions o;
  o.padding = {1, 1};
  g.output("y", g.conv2d(g.input("x", {2, 64, 20, 130}), g.input("w", {128, 64, 3, 3}), g.input("b", {128}), o).relu());
  const Graph conv = g.build().take();
  const auto c = tuning_candidates(conv, "sm_90a");
  for (const char* want : {"wgmma_tile=128x128x4x8", "wgmma_tile=128x128x3x8", "conv_halo=1", "conv_runs=0"}) {
    EXPECT_NE(std::find(c.begin(), c.end(), want), c.end()) << want;
    auto prog = generate_program(conv, {"sm_90a", want});
    EXPECT_TRUE(prog) << want << ": " << prog.error().str();
  }
}

class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fj-tune-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = std::string(tmpl) + "/tuning";
  }
  void TearDown() override { std::system(("rm -rf " + dir_.substr(0, dir_.rfind('/'))).c_str()); }
  std::string dir_;
};

DeviceInfo fake_device(int sms = 132) {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.sm_count = sms;
  d.driver_version = 13000;
  return d;
}

TEST_F(TuningDbTest, RoundTripAndKeySensitivity) {
  TuningDb db(dir_);
  Graph g = small_linear(256);
  CacheKey key = tuning_key(g, fake_device(), "sm_90a");
  EXPECT_FALSE(db.lookup(key));
  TuningRecord rec{"tile=64x128x8x8", 1.25, 0.01, 1.5, 1700000000, "table\n"};
  ASSERT_TRUE(db.save(key, rec));
  auto back = db.lookup(key);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->config, rec.config);
  EXPECT_DOUBLE_EQ(back->median_ms, 1.25);
  EXPECT_DOUBLE_EQ(back->default_ms, 1.5);
  EXPECT_EQ(back->table, "table\n");
  struct stat st {};
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Another SM count, arch or graph: a different record.
  EXPECT_FALSE(db.lookup(tuning_key(g, fake_device(114), "sm_90a")));
  EXPECT_FALSE(db.lookup(tuning_key(g, fake_device(), "sm_80")));
  EXPECT_FALSE(db.lookup(tuning_key(small_linear(128), fake_device(), "sm_90a")));
}

TEST_F(TuningDbTest, TornOrForeignRecordsAreMisses) {
  TuningDb db(dir_);
  CacheKey key = tuning_key(small_linear(256), fake_device(), "sm_90a");
  ASSERT_TRUE(db.save(key, {"tile=32x32x4x4", 1, 0, 1, 0, ""}));
  std::string path = db.path(key);
  ASSERT_EQ(truncate(path.c_str(), 20), 0);  // cut inside the key lines: no winner line
  EXPECT_FALSE(db.lookup(key));
  ASSERT_TRUE(db.save(key, {"tile=32x32x4x4", 1, 0, 1, 0, ""}));
  EXPECT_TRUE(db.lookup(key));
  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), 4242, 4242), 0);
    EXPECT_FALSE(db.lookup(key));  // not ours: never used
  }
}

}  // namespace
}  // namespace fusejit
