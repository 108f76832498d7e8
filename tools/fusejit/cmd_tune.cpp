// fusejit tune SPEC — autotune a spec on this GPU and store the winner.
#include <unistd.h>

#include <cstdio>

#include "fusejit/autotune.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "tools/fusejit/args.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

void progress_bar(size_t done, size_t total, const std::string& what) {
  const int width = 30;
  int filled = static_cast<int>(width * done / (total ? total : 1));
  bool tty = isatty(fileno(stderr));
  std::fprintf(stderr, "%s[%.*s%*s] %3zu/%zu %-40.40s%s", tty ? "\r" : "", filled,
               "##############################", width - filled, "", done, total, what.c_str(),
               tty && done < total ? "" : "\n");
  std::fflush(stderr);
}

int run_tune(const std::vector<std::string>& argv) {
  ParsedArgs a = parse_args(argv, {"budget", "iters", "arch"}, {"no-save", "quiet"});
  TuneOptions tune;
  tune.budget_s = static_cast<double>(a.get_int("budget", 120));
  tune.iters = static_cast<int>(a.get_int("iters", 10));
  tune.save = !a.flags.count("no-save");
  if (!a.error.empty()) return usage_error(kTune, a.error);
  if (a.positional.size() != 1) return usage_error(kTune, "expected exactly one spec file");
  if (tune.iters < 1 || tune.budget_s <= 0) return usage_error(kTune, "--iters and --budget must be positive");
  if (!a.flags.count("quiet")) tune.progress = progress_bar;
  auto g = load_spec_file(a.positional[0]);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  if (!gpu_available()) {
    std::fprintf(stderr, "fusejit tune: tuning times kernels and needs a GPU: %s\n", gpu_unavailable_reason().c_str());
    return 3;
  }
  Engine engine;
  CompileOptions opts;
  opts.arch = a.get("arch", "auto");
  auto report = autotune(engine, *g, opts, tune);
  if (!report) {
    std::fprintf(stderr, "fusejit tune: %s\n", report.error().str().c_str());
    return 1;
  }
  std::printf("%s", report->table().c_str());
  const CandidateResult* best = report->best();
  double def = report->candidates[0].median_ms;
  std::printf("winner: %s  %.4f ms (default %.4f ms, %.2fx) after %.1f s\n",
              best->config.empty() ? "(default)" : best->config.c_str(), best->median_ms, def,
              best->median_ms > 0 ? def / best->median_ms : 0.0, report->seconds);
  if (report->saved) std::printf("stored in %s\n", report->db_path.c_str());
  return 0;
}

}  // namespace

const Command kTune{
    "tune", "autotune a spec on this GPU; store the fastest correct config",
    "usage: fusejit tune SPEC.yaml [--budget SECONDS] [--iters N] [--arch auto|sm_XX]\n"
    "                              [--no-save] [--quiet]\n\n"
    "Enumerates the legal mainloop tiles for the spec's shapes plus the heuristic\n"
    "default, compiles them in parallel, checks each against the fp64 reference\n"
    "(sampled) and times it (CUDA events, warm-up, L2 flush, median of --iters).\n"
    "Prints the table of candidates and stores the winner in the tuning database\n"
    "(<cache dir>/tuning), where `autotune: use_db` compiles pick it up.\n"
    "  --budget S   wall-clock budget (default 120 s; the default config always runs)\n",
    run_tune};

}  // namespace fusejit::cli
