// runtime/tuner_core.h — the tuner's decisions, apart from any GPU: which
// candidates compile and run within the budget, and which one wins. The real
// CandidateRunner compiles with an Engine and times on the device
// (autotune.cpp); tests drive it with a fake one and a fake clock.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fusejit/autotune.h"

namespace fusejit {

struct Measurement {
  bool correct = false;
  double rel_l2 = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  std::string detail;  // e.g. the failing comparison
};

class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  // Called from several threads at once, each config once.
  virtual Status compile(const std::string& config) = 0;
  // Called from one thread, in candidate order, only for configs that compiled.
  virtual Expected<Measurement> measure(const std::string& config) = 0;
};

using Clock = std::function<double()>;  // seconds, monotonic
double steady_seconds();

// Compiles every config in parallel (new compiles stop once the budget is
// spent), measures the default (configs[0]) always and the rest while budget
// remains, and picks the correct candidate with the lowest median.
TuneReport run_tuner(const std::vector<std::string>& configs, CandidateRunner& runner, const TuneOptions& opts,
                     const Clock& clock = steady_seconds);

}  // namespace fusejit
