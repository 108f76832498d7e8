// runtime/kernel_check.h — runs a compiled kernel on seeded random inputs,
// compares every output with the fp64 reference and times it. Shared by
// `fusejit run`, the GPU tests and (later) the autotuner.
#pragma once

#include <string>
#include <vector>

#include "fusejit/engine.h"
#include "fusejit/reference.h"

namespace fusejit {

struct CheckOptions {
  uint64_t seed = 1;
  int64_t samples = 100000;          // per output, when the dense reference is too costly
  double dense_limit_macs = 4e9;     // anchor multiply-adds above this -> sampled reference
  int64_t dense_limit_elems = int64_t{1} << 24;  // any value larger -> sampled reference
  bool time = true;
  int warmup = 3;
  int iters = 20;                    // timed trials; the median is reported
  size_t l2_flush_bytes = size_t{256} << 20;  // written before each trial
  double launch_timeout_s = 60;      // a launch not done by then is an error (a hang), not a wait without end
};

struct OutputCheck {
  std::string name;
  bool sampled = false;
  Comparison cmp;
};

struct TimingStats {
  int iters = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0;
};

struct CheckResult {
  std::vector<OutputCheck> outputs;
  bool pass = false;   // every output within tolerance
  TimingStats timing;  // iters == 0 when not timed
  std::string summary() const;  // a few lines for humans
};

// A graph's seeded inputs and its fp64 reference, computed once and reused
// for many kernels (the autotuner checks every candidate against it).
struct ReferenceData {
  std::vector<HostTensor> inputs;
  struct OutputRef {
    bool sampled = false;
    std::vector<int64_t> indices;  // sampled: the flat indices of `values`
    std::vector<double> values;    // dense: every element
  };
  std::vector<OutputRef> outputs;
};
Expected<ReferenceData> make_reference_data(const Graph& graph, const CheckOptions& opts = {});

// Uploads make_random_inputs(graph, seed), poisons outputs with NaN bytes,
// launches once, compares, then (opts.time) times with CUDA events, warm-up
// and an L2 flush before each trial. A CPU-backend kernel runs on host
// buffers, timed by the wall clock, caches flushed by a 64 MiB write. `graph`
// must be the prepared graph the kernel was compiled from.
Expected<CheckResult> check_kernel(const CompiledKernel& kernel, const Graph& graph, const CheckOptions& opts = {});
Expected<CheckResult> check_kernel(const CompiledKernel& kernel, const Graph& graph, const ReferenceData& ref,
                                   const CheckOptions& opts);

// Multiply-adds of the graph's anchor (for choosing the reference mode and for
// FLOP counts: 2 FLOPs per multiply-add).
double anchor_macs(const Graph& graph);

}  // namespace fusejit
