// fusejit/autotune.h — runtime autotuning: pick the fastest correct codegen
// configuration for a graph on the user's GPU.
//
//   fusejit::Engine engine;
//   auto report = fusejit::autotune(engine, graph);        // tunes, stores the winner
//   auto kernel = engine.compile(graph, {.autotune = fusejit::AutotuneMode::UseDb});
//
// The candidates are the mainloop's legal tiles for the graph's shape
// (compiler/tuning_space.h) plus the heuristic default. They compile in
// parallel threads; each is then run on seeded inputs, checked against the
// fp64 reference (sampled for big outputs) and timed (CUDA events, warm-up,
// L2 flush, median). Only a correct candidate may win. The winner, with the
// times and their spread, goes to the tuning database in the cache directory,
// keyed by graph hash, device name, SM count, driver and fusejit version.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fusejit/engine.h"

namespace fusejit {

struct TuneOptions {
  double budget_s = 120;    // wall clock for compiling + measuring (the default config is always measured)
  int compile_threads = 0;  // 0: hardware_concurrency
  int iters = 10;           // timed trials per candidate
  bool save = true;         // store the winner in the tuning database
  // Called after each compile and each measurement: (done, total, what).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct CandidateResult {
  enum class State { Ok, Wrong, CompileFailed, RunFailed, Skipped };
  std::string config;  // "" = the heuristic default
  State state = State::Skipped;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double rel_l2 = 0;   // worst output's error against the fp64 reference
  std::string detail;  // why it failed / was skipped
};
std::string_view state_name(CandidateResult::State s);

struct TuneReport {
  std::vector<CandidateResult> candidates;  // in enumeration order; [0] is the default
  int winner = -1;                          // index into candidates; -1: none correct
  double seconds = 0;                       // tuning wall time
  bool saved = false;                       // stored in the tuning database
  std::string db_path;
  const CandidateResult* best() const { return winner < 0 ? nullptr : &candidates[static_cast<size_t>(winner)]; }
  std::string table() const;                // config | ms | spread | rel err | status
};

// Tunes `graph` on opts.device (needs a GPU). opts.config is ignored.
Expected<TuneReport> autotune(Engine& engine, const Graph& graph, const CompileOptions& opts = {},
                              const TuneOptions& tune = {});

// The winner stored for this graph on this device, if any ("" = default).
Expected<std::optional<std::string>> stored_tuning(const Graph& graph, const CompileOptions& opts = {});

}  // namespace fusejit
