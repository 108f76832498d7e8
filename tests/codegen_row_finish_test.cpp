// CPU: the row-finish kernel's passes over its rows (emit_fallback.cpp,
// emit_row_stages.cpp). The last pass over a row's wide elements, and each
// row stage's reduction, take kLanes consecutive elements a thread (vector
// loads and stores) where the last dim allows it, behind a run-time
// alignment check; a row with many
// column tiles has its partials combined by the whole block
// (fj::combine_partials_spread), few tiles by one thread a row. Each kernel
// compiles with NVRTC for sm_80 and sm_90a without spills.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

// logits = linear(x, w) over N columns; log_softmax and logsumexp along N (an LM head's z-loss).
std::string lm_head(const std::string& precision, int64_t n) {
  const std::string dtype = precision == "fp32" ? "" : ", dtype: " + precision;
  return "name: lm_head\nprecision: " + precision + "\ninputs:\n  - {name: x, shape: [64, 128]" + dtype +
         "}\n  - {name: w, shape: [" + std::to_string(n) + ", 128]" + dtype +
         "}\nops:\n  - {name: logits, op: linear, args: [x, w]}\n"
         "  - {name: lp, op: log_softmax, args: [logits], dim: -1}\n"
         "  - {name: lse, op: logsumexp, args: [logits], dims: [1]}\noutputs: [lp, lse]\n";
}

// A layer norm written out over N columns (two row stages after the mean's partials).
std::string manual_layer_norm(int64_t n) {
  return "name: manual_ln\nprecision: fp32\ninputs:\n  - {name: x, shape: [32, 64]}\n  - {name: w, shape: [" +
         std::to_string(n) + ", 64]}\n  - {name: gamma, shape: [" + std::to_string(n) +
         "]}\nops:\n  - {name: h, op: linear, args: [x, w]}\n"
         "  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}\n"
         "  - {name: c, op: sub, args: [h, mu]}\n  - {name: sq, op: mul, args: [c, c]}\n"
         "  - {name: var, op: mean, args: [sq], dims: [1], keepdim: true}\n"
         "  - {name: ve, op: add, args: [var, 1e-5]}\n  - {name: rs, op: rsqrt, args: [ve]}\n"
         "  - {name: y, op: mul, args: [c, rs]}\n  - {name: z, op: mul, args: [y, gamma]}\noutputs: [z]\n";
}

// How many rows' partials were combined by the whole block (spread) and by one thread a row, over the checks.
struct Seen {
  int spread = 0, by_thread = 0;
};

// The finish kernel `finish` (a kernel name's start) takes lanes or not; its rows' partials are combined by the
// whole block where a row has 16 tiles or more (kMinTilesPerRowToSplit).
void check(const std::string& spec, const std::string& config, const std::string& finish, bool lanes, Seen& seen) {
  SCOPED_TRACE(spec + "config: " + config);
  Expected<Graph> g = parse_spec(spec, "row_finish");
  ASSERT_TRUE(g) << g.error().str();
  Expected<Program> p = generate_program(*g, {"sm_90a", config});
  ASSERT_TRUE(p) << p.error().str();
  ASSERT_EQ(testing::chain_launches(*p), 2u) << p->plan_text;
  EXPECT_EQ(p->launches.back().kernel.rfind(finish, 0), 0u) << p->plan_text;
  EXPECT_EQ(p->source.find("fj_wide_lanes(p, ") != std::string::npos, lanes) << p->source;
  if (p->source.find("fj_stage0(") != std::string::npos)  // a row stage's reduction too
    EXPECT_EQ(p->source.find("fj_stage0_lanes(p, ") != std::string::npos, lanes) << p->source;
  if (lanes) EXPECT_NE(p->source.find("if (lanes_ok) {"), std::string::npos);
  const std::string tiles_at = "constexpr int kTiles = ";
  const size_t at = p->source.find(tiles_at);
  ASSERT_NE(at, std::string::npos) << p->source;
  const bool spread = std::stoi(p->source.substr(at + tiles_at.size())) >= 16;
  EXPECT_EQ(p->source.find("fj::combine_partials_spread<") != std::string::npos, spread) << p->plan_text;
  EXPECT_EQ(p->source.find("fj::combine_partials<") != std::string::npos, !spread) << p->plan_text;
  (spread ? seen.spread : seen.by_thread) += 1;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Expected<Program> q = generate_program(*g, {arch, config});
    ASSERT_TRUE(q) << q.error().str();
    auto cubin = compile_to_cubin(q->source, q->name, {arch, false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << arch << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << arch << "\n" << cubin->log;
  }
}

TEST(CodegenRowFinish, WideRowsTakeLanesAndSpreadManyTiles) {
  Seen seen;
  // 8192 columns: many column tiles a row, a row a block; f32 logits (bf16 output): 4 lanes.
  check(lm_head("bf16", 8192), "", "fj_logsumexp_finish", true, seen);
  check(lm_head("fp32", 8192), "", "fj_logsumexp_finish", true, seen);
  // 512 columns: a few tiles.
  check(lm_head("bf16", 512), "", "fj_logsumexp_finish", true, seen);
  // An odd N: no lanes divide it, the element loop alone.
  check(lm_head("bf16", 1001), "", "fj_logsumexp_finish", false, seen);
  // pointwise_lanes=0 keeps the element loop.
  check(lm_head("bf16", 8192), "pointwise_lanes=0", "fj_logsumexp_finish", false, seen);
  EXPECT_GT(seen.spread, 0);
  EXPECT_GT(seen.by_thread, 0);
}

TEST(CodegenRowFinish, RowStagesTakeLanesAndSpreadManyTiles) {
  Seen seen;
  check(manual_layer_norm(4096), "", "fj_mean_finish", true, seen);
  check(manual_layer_norm(520), "", "fj_mean_finish", true, seen);
  check(manual_layer_norm(4096), "pointwise_lanes=0", "fj_mean_finish", false, seen);
  EXPECT_GT(seen.spread, 0);
  EXPECT_GT(seen.by_thread, 0);
}

}  // namespace
}  // namespace fusejit
