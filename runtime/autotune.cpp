// runtime/autotune.cpp — the real CandidateRunner (Engine + GPU) and the
// tuning database around run_tuner().
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>

#include "compiler/tuning_space.h"
#include "fusejit/autotune.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_check.h"
#include "runtime/log.h"
#include "runtime/nvrtc_options.h"
#include "runtime/tuner_core.h"
#include "runtime/tuning_db.h"

namespace fusejit {
namespace {

class EngineRunner final : public CandidateRunner {
 public:
  EngineRunner(Engine& engine, const Graph& g, CompileOptions base, const ReferenceData& ref, CheckOptions check)
      : engine_(engine), g_(g), base_(std::move(base)), ref_(ref), check_(check) {}

  Status compile(const std::string& config) override {
    CompileOptions o = base_;
    o.config = config;
    o.autotune = AutotuneMode::Off;
    auto k = engine_.compile(g_, o);
    if (!k) return k.error();
    std::lock_guard<std::mutex> lock(mu_);
    kernels_[config] = k.take();
    return Status::success();
  }

  Expected<Measurement> measure(const std::string& config) override {
    std::shared_ptr<CompiledKernel> k;
    {
      std::lock_guard<std::mutex> lock(mu_);
      k = kernels_.at(config);
    }
    auto r = check_kernel(*k, g_, ref_, check_);
    if (!r) return r.error();
    Measurement m;
    m.correct = r->pass;
    for (const OutputCheck& o : r->outputs) {
      m.rel_l2 = std::max(m.rel_l2, o.cmp.rel_l2);
      if (!o.cmp.pass) m.detail = "output '" + o.name + "': " + o.cmp.summary();
    }
    m.median_ms = r->timing.median_ms;
    m.min_ms = r->timing.min_ms;
    m.max_ms = r->timing.max_ms;
    return m;
  }

 private:
  Engine& engine_;
  const Graph& g_;
  CompileOptions base_;
  const ReferenceData& ref_;
  CheckOptions check_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<CompiledKernel>> kernels_;
};

struct Target {
  Graph graph;
  DeviceInfo device;
  std::string arch;
};

Expected<Target> resolve(const Graph& graph, const CompileOptions& opts) {
  Target t{graph, {}, ""};
  if (Status s = prepare_graph(t.graph); !s) return s.error();
  auto info = device_info(opts.device);
  if (!info) return info.error();
  t.device = *info;
  t.arch = opts.arch == "auto" ? info->arch : opts.arch;
  if (Status s = check_arch(t.arch); !s) return s.error();
  return t;
}

}  // namespace

Expected<TuneReport> autotune(Engine& engine, const Graph& graph, const CompileOptions& opts, const TuneOptions& tune) {
  auto t = resolve(graph, opts);
  if (!t) return t.error();
  CheckOptions check;
  check.iters = tune.iters;
  check.warmup = 2;
  check.samples = 20000;
  auto ref = make_reference_data(t->graph, check);
  if (!ref) return ref.error();
  CompileOptions base = opts;
  base.arch = t->arch;
  EngineRunner runner(engine, t->graph, base, *ref, check);
  TuneReport report = run_tuner(tuning_candidates(t->graph, t->arch), runner, tune);
  const CandidateResult* best = report.best();
  if (!best) return Error("autotune: no candidate produced a correct result\n" + report.table());
  if (log::enabled(log::Level::Info)) {
    char ms[64];
    std::snprintf(ms, sizeof ms, "%.4f ms (default %.4f ms)", best->median_ms, report.candidates[0].median_ms);
    log::info("autotune: " + std::to_string(report.candidates.size()) + " candidates for " + t->arch +
              ", best '" + best->config + "' " + ms);
  }
  if (tune.save) {
    TuningDb db(TuningDb::default_dir(), RemoteCache::process_default());
    TuningRecord rec;
    rec.config = best->config;
    rec.median_ms = best->median_ms;
    rec.spread_ms = best->max_ms - best->min_ms;
    rec.default_ms = report.candidates[0].median_ms;
    rec.created_unix = static_cast<int64_t>(std::time(nullptr));
    rec.table = report.table();
    CacheKey key = tuning_key(t->graph, t->device, t->arch);
    report.db_path = db.path(key);
    Status s = db.save(key, rec);
    report.saved = s.ok();
    if (!s) log::warn("tuning result not saved: " + s.error().message);
    else log::info("autotune: winner saved to " + report.db_path);
  }
  return report;
}

Expected<std::optional<std::string>> stored_tuning(const Graph& graph, const CompileOptions& opts) {
  auto t = resolve(graph, opts);
  if (!t) return t.error();
  TuningDb db(TuningDb::default_dir(), RemoteCache::process_default());
  auto rec = db.lookup(tuning_key(t->graph, t->device, t->arch));
  if (!rec) {
    log::info("autotune: no stored config for this graph on " + t->device.name + "; heuristics");
    return std::optional<std::string>();
  }
  log::info("autotune: using the stored config '" + rec->config + "'");
  return std::optional<std::string>(rec->config);
}

}  // namespace fusejit
