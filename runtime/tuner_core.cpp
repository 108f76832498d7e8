#include "runtime/tuner_core.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

namespace fusejit {

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string_view state_name(CandidateResult::State s) {
  switch (s) {
    case CandidateResult::State::Ok: return "ok";
    case CandidateResult::State::Wrong: return "WRONG RESULT";
    case CandidateResult::State::CompileFailed: return "compile failed";
    case CandidateResult::State::RunFailed: return "run failed";
    case CandidateResult::State::Skipped: return "skipped";
  }
  return "?";
}

TuneReport run_tuner(const std::vector<std::string>& configs, CandidateRunner& runner, const TuneOptions& opts,
                     const Clock& clock) {
  const double start = clock();
  const auto over_budget = [&] { return clock() - start > opts.budget_s; };
  TuneReport report;
  report.candidates.resize(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) report.candidates[i].config = configs[i];
  const size_t total = 2 * configs.size();
  std::atomic<size_t> done{0};
  std::mutex progress_mutex;
  auto tick = [&](const std::string& what) {
    size_t d = ++done;
    if (opts.progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      opts.progress(d, total, what);
    }
  };

  // Compile in parallel; candidate 0 (the default) is never skipped.
  std::vector<char> compiled(configs.size(), 0);  // not vector<bool>: written by several threads
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < configs.size(); i = next++) {
      CandidateResult& c = report.candidates[i];
      if (i > 0 && over_budget()) {
        c.state = CandidateResult::State::Skipped;
        c.detail = "time budget spent before compiling";
      } else if (Status s = runner.compile(configs[i]); !s) {
        c.state = CandidateResult::State::CompileFailed;
        c.detail = s.error().message;
      } else {
        compiled[i] = 1;
      }
      tick("compiled " + (configs[i].empty() ? std::string("default") : configs[i]));
    }
  };
  unsigned threads = opts.compile_threads > 0 ? static_cast<unsigned>(opts.compile_threads)
                                              : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max<size_t>(configs.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  // Measure in order on one thread.
  for (size_t i = 0; i < configs.size(); ++i) {
    CandidateResult& c = report.candidates[i];
    if (compiled[i]) {
      if (i > 0 && over_budget()) {
        c.state = CandidateResult::State::Skipped;
        c.detail = "time budget spent before measuring";
      } else if (auto m = runner.measure(configs[i]); !m) {
        c.state = CandidateResult::State::RunFailed;
        c.detail = m.error().message;
      } else {
        c.state = m->correct ? CandidateResult::State::Ok : CandidateResult::State::Wrong;
        c.median_ms = m->median_ms;
        c.min_ms = m->min_ms;
        c.max_ms = m->max_ms;
        c.rel_l2 = m->rel_l2;
        c.detail = m->detail;
        if (m->correct && (report.winner < 0 || c.median_ms < report.candidates[static_cast<size_t>(report.winner)].median_ms))
          report.winner = static_cast<int>(i);
      }
    }
    tick("measured " + (configs[i].empty() ? std::string("default") : configs[i]));
  }
  report.seconds = clock() - start;
  return report;
}

std::string TuneReport::table() const {
  std::string s = "  config                 median ms   spread ms   rel L2     status\n";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CandidateResult& c = candidates[i];
    char line[400];
    bool timed = c.state == CandidateResult::State::Ok || c.state == CandidateResult::State::Wrong;
    std::string name = c.config.empty() ? "(default)" : c.config;
    if (timed)
      std::snprintf(line, sizeof line, "%s %-22s %9.4f   %9.4f   %-9.2e  %s%s\n", static_cast<int>(i) == winner ? "*" : " ",
                    name.c_str(), c.median_ms, c.max_ms - c.min_ms, c.rel_l2, std::string(state_name(c.state)).c_str(),
                    c.detail.empty() || c.state == CandidateResult::State::Ok ? "" : (": " + c.detail.substr(0, 80)).c_str());
    else
      std::snprintf(line, sizeof line, "  %-22s %9s   %9s   %-9s  %s: %s\n", name.c_str(), "-", "-", "-",
                    std::string(state_name(c.state)).c_str(), c.detail.substr(0, 100).c_str());
    s += line;
  }
  return s;
}

}  // namespace fusejit
