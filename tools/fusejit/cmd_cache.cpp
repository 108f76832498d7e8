// fusejit cache stats|list|clear|explain — inspect the on-disk kernel cache.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "compiler/program.h"
#include "runtime/cache_counters.h"
#include "runtime/disk_cache.h"
#include "runtime/disk_cache_entry.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"
#include "runtime/remote_cache.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit ? "%.1f %s" : "%.0f %s", value, units[unit]);
  return buf;
}

int print_disabled(const DiskCache& cache) {
  std::fprintf(stderr, "fusejit cache: the kernel cache is disabled: %s\n",
               cache.stats().disabled_reason.c_str());
  return 1;
}

// The remote tier: its URL and the hit/miss counters every client keeps in Redis.
void print_remote_stats() {
  const char* url = std::getenv("FUSEJIT_REMOTE_CACHE");
  std::shared_ptr<RemoteCache> remote = RemoteCache::from_env();  // warns when it is off
  if (!remote) {
    std::printf("remote:    %s\n", url && *url ? "off (see the warning)" : "off (FUSEJIT_REMOTE_CACHE is not set)");
    return;
  }
  auto counters = remote->server_stats();
  if (!counters) {
    std::printf("remote:    %s: unreachable (%s)\n", url, counters.error().message.c_str());
    return;
  }
  std::map<std::string, std::string> c(counters->begin(), counters->end());
  auto n = [&](const char* k) { return c.count(k) ? c[k] : std::string("0"); };
  std::printf("remote:    %s: %s hits, %s misses, %s stores, %s refused (all clients); %s keys in the db\n", url,
              n("hits").c_str(), n("misses").c_str(), n("stores").c_str(), n("refused").c_str(), n("keys").c_str());
}

// The memory and disk tiers: what every Engine that used this directory added
// to its counters file when it was destroyed (runtime/cache_counters.h).
void print_tier_counters(const DiskCache& cache) {
  if (!cache.enabled()) {
    std::printf("memory:    not counted (the kernel cache is disabled)\n");
    std::printf("disk:      not counted (the kernel cache is disabled)\n");
    return;
  }
  CacheCounters counters(cache.dir());
  Expected<CounterTotals> totals = counters.read();
  if (!totals) {
    cache_warning("fusejit: kernel cache: " + totals.error().message);
    std::printf("memory:    unknown (see the warning)\n");
    std::printf("disk:      unknown (see the warning)\n");
    return;
  }
  const TierCounts& c = totals->counts;
  std::printf("memory:    %llu hits, %llu misses (since the last clear, all processes)\n",
              (unsigned long long)c.memory_hits, (unsigned long long)c.memory_misses);
  std::printf("disk:      %llu hits, %llu misses (since the last clear, all processes)\n",
              (unsigned long long)c.disk_hits, (unsigned long long)c.disk_misses);
  if (totals->ignored)
    std::printf("           (%llu malformed or torn lines in %s ignored)\n", (unsigned long long)totals->ignored,
                counters.path().c_str());
}

int run_stats(DiskCache& cache) {
  DiskCacheStats s = cache.stats();
  std::printf("directory: %s\n", s.dir.empty() ? "(none)" : s.dir.c_str());
  if (!s.enabled) {
    std::printf("status:    disabled (%s)\n", s.disabled_reason.c_str());
  } else {
    std::printf("entries:   %llu\n", static_cast<unsigned long long>(s.entries));
    std::printf("size:      %s of %s (%llu bytes)\n", human_bytes(s.bytes).c_str(),
                human_bytes(s.max_bytes).c_str(), static_cast<unsigned long long>(s.bytes));
  }
  print_tier_counters(cache);
  print_remote_stats();
  return 0;
}

int run_list(DiskCache& cache, bool verify) {
  if (!cache.enabled()) return print_disabled(cache);
  auto entries = cache.list(verify);
  int bad = 0;
  for (const CacheEntryInfo& e : entries) {
    const std::string* graph = e.key.find("graph");
    const std::string* arch = e.key.find("arch");
    std::printf("%s  %9s  created %s  used %s  graph %s  %s%s%s\n", e.digest.substr(0, 16).c_str(),
                human_bytes(e.file_bytes).c_str(), iso_utc(e.created_unix).c_str(),
                iso_utc(e.last_used_unix).c_str(), graph ? graph->c_str() : "?",
                arch ? arch->c_str() : "?", e.problem.empty() ? "" : "  PROBLEM: ", e.problem.c_str());
    bad += !e.problem.empty();
  }
  std::printf("%zu entries in %s%s\n", entries.size(), cache.dir().c_str(),
              verify ? (bad ? " (some failed verification)" : " (all verified)") : "");
  return bad ? 1 : 0;
}

int run_clear(DiskCache& cache) {
  if (!cache.enabled()) return print_disabled(cache);
  uint64_t entries = cache.stats().entries;
  Status s = cache.clear();
  if (!s) {
    std::fprintf(stderr, "fusejit cache: %s\n", s.error().message.c_str());
    return 1;
  }
  if (Status reset = CacheCounters(cache.dir()).reset(); !reset) {
    std::fprintf(stderr, "fusejit cache: removed %llu entries, but not the hit/miss counters: %s\n",
                 static_cast<unsigned long long>(entries), reset.error().message.c_str());
    return 1;
  }
  std::printf("removed %llu entries from %s; hit/miss counters reset\n", static_cast<unsigned long long>(entries),
              cache.dir().c_str());
  return 0;
}

struct ExplainArgs {
  std::string spec, arch = "auto", config;
  bool line_info = true;
};

int run_explain(DiskCache& cache, const ExplainArgs& a) {
  Expected<Graph> g = load_spec_file(a.spec);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  // The arch Engine::compile would use: the device's for "auto".
  std::string arch = a.arch;
  if (arch == "auto") {
    auto device = Engine::device_arch(0);
    arch = device ? *device : "sm_90a";
    std::printf("arch: %s (%s)\n", arch.c_str(), device ? "device 0" : "no device; pass --arch");
  }
  CompileOptions opts;
  opts.arch = arch;
  opts.config = a.config;
  opts.line_info = a.line_info;
  Engine engine;
  Expected<Program> program = engine.emit(*g, opts);
  if (!program) {
    std::fprintf(stderr, "%s\n", program.error().str().c_str());
    return 1;
  }
  NvrtcOptions nv;
  nv.arch = arch;
  nv.line_info = a.line_info;
  CacheKey key = cubin_cache_key(*g, arch, a.config, nvrtc_option_list(nv), program->source);
  std::printf("key %s:\n", key.digest().c_str());
  for (const auto& [name, value] : key.parts)
    std::printf("  %s: %s\n", name.c_str(), value.empty() ? "''" : value.c_str());
  for (const std::string& line : cache.explain(key)) std::printf("%s\n", line.c_str());
  return 0;
}

int run_cache(const std::vector<std::string>& args) {
  if (args.empty()) return usage_error(kCache, "expected a subcommand: stats, list, clear or explain");
  const std::string& sub = args[0];
  std::string dir;
  bool verify = false;
  ExplainArgs explain;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> const std::string* {
      if (a != flag) return nullptr;
      if (i + 1 >= args.size()) return nullptr;
      return &args[++i];
    };
    if (const std::string* v = value("--dir")) dir = *v;
    else if (const std::string* v = value("--arch")) explain.arch = *v;
    else if (const std::string* v = value("--config")) explain.config = *v;
    else if (a == "--no-line-info") explain.line_info = false;
    else if (a == "--verify" && sub == "list") verify = true;
    else if (!a.empty() && a[0] == '-') return usage_error(kCache, "unknown or incomplete option '" + a + "'");
    else if (sub == "explain" && explain.spec.empty()) explain.spec = a;
    else return usage_error(kCache, "unexpected argument '" + a + "'");
  }
  DiskCache cache = dir.empty() ? DiskCache::open_default() : DiskCache(dir, DiskCache::open_default().max_bytes());
  if (sub == "stats") return run_stats(cache);
  if (sub == "list") return run_list(cache, verify);
  if (sub == "clear") return run_clear(cache);
  if (sub == "explain") {
    if (explain.spec.empty()) return usage_error(kCache, "explain needs a spec file");
    return run_explain(cache, explain);
  }
  return usage_error(kCache, "unknown subcommand '" + sub + "'");
}

}  // namespace

const Command kCache{
    "cache", "inspect or clear the on-disk kernel cache",
    "usage: fusejit cache stats|list|clear [--dir DIR]\n"
    "       fusejit cache list --verify [--dir DIR]\n"
    "       fusejit cache explain SPEC.yaml [--arch ARCH] [--config CFG] [--no-line-info] [--dir DIR]\n\n"
    "Compiled CUBINs are kept in $FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit, else\n"
    "~/.cache/fusejit (see docs/cache.md), bounded by $FUSEJIT_CACHE_MAX_BYTES (default 2G,\n"
    "0 disables the cache); least recently used entries are evicted first.\n"
    "  stats     the directory, the number of entries, their size and the bound; the memory\n"
    "            and disk tiers' hits/misses since the last clear (every process whose Engine\n"
    "            has ended); with $FUSEJIT_REMOTE_CACHE, the remote tier's hits/misses/stores/\n"
    "            refused (all clients)\n"
    "  list      one line per entry, oldest use first; --verify checks every checksum\n"
    "            (exit 1 if any entry is damaged)\n"
    "  clear     removes every entry and resets the hit/miss counters\n"
    "  explain   prints the key compiling SPEC would use and whether it is cached; on a miss,\n"
    "            which key parts differ from the nearest entries (e.g. 'nvrtc: 13.0 -> 13.1').\n"
    "            --arch defaults to device 0's arch (sm_90a without a device); --config and\n"
    "            --no-line-info must match the CompileOptions the program uses.\n"
    "  --dir DIR use DIR instead of the default directory\n",
    run_cache};

}  // namespace fusejit::cli
