// The memory and disk tiers' hit/miss counters across processes
// (runtime/cache_counters.h): lines appended by Engines as they end, summed
// by `fusejit cache stats`, compacted when the file grows, reset by `clear`.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cache_counters.h"
#include "runtime/disk_cache_files.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

using testing::read_bytes;
using testing::ScratchDir;
using testing::WarningCapture;
using testing::write_bytes;

TierCounts counts(uint64_t mh, uint64_t mm, uint64_t dh, uint64_t dm) { return {mh, mm, dh, dm}; }

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string made_dir(const ScratchDir& tmp) {
  std::string dir = tmp / "cache";
  EXPECT_TRUE(make_private_dir(dir).ok());
  return dir;
}

TEST(CacheCounters, LinesRoundTripAndMalformedOnesAreRejected) {
  TierCounts c = counts(3, 1, 2, UINT64_MAX);
  std::string line = CacheCounters::format_line(c);
  EXPECT_EQ(line, "v1 memory_hits=3 memory_misses=1 disk_hits=2 disk_misses=18446744073709551615\n");
  EXPECT_EQ(CacheCounters::parse_line(line.substr(0, line.size() - 1)), c);
  EXPECT_EQ(CacheCounters::parse_line("v1 disk_misses=4 disk_hits=3 memory_misses=2 memory_hits=1"),
            counts(1, 2, 3, 4));
  for (const char* bad : {"", "v1", "v1 ", "v2 memory_hits=1 memory_misses=1 disk_hits=1 disk_misses=1",
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1",                    // torn: a field short
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1 disk_misses=1 ",     // trailing space
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1 disk_misses=",       // torn: no value
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1 disk_mi",            // torn mid-name
                          "v1 memory_hits=1  memory_misses=1 disk_hits=1 disk_misses=1",     // empty field
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1 disk_misses=1 disk_hits=1",  // twice
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1 disk_misses=1 remote_hits=1",
                          "v1 memory_hits=-1 memory_misses=1 disk_hits=1 disk_misses=1",
                          "v1 memory_hits=0x1 memory_misses=1 disk_hits=1 disk_misses=1",
                          "v1 memory_hits=18446744073709551616 memory_misses=1 disk_hits=1 disk_misses=1",
                          "v1 memory_hits=1 memory_misses=1 disk_hits=1 disk_misses=1v1 memory_hits=1"})
    EXPECT_FALSE(CacheCounters::parse_line(bad).has_value()) << bad;
}

TEST(CacheCounters, AddedLinesAreSummed) {
  ScratchDir tmp;
  std::string dir = made_dir(tmp);
  CacheCounters counters(dir);
  EXPECT_EQ(counters.path(), dir + "/.counters");
  ASSERT_TRUE(counters.add(TierCounts{}).ok());
  EXPECT_FALSE(exists(counters.path())) << "nothing to add: no file";
  auto empty = counters.read();
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_EQ(empty->counts, TierCounts{});

  ASSERT_TRUE(counters.add(counts(3, 1, 2, 1)).ok());
  ASSERT_TRUE(counters.add(counts(0, 0, 0, 5)).ok());
  ASSERT_TRUE(CacheCounters(dir).add(counts(10, 20, 30, 40)).ok());
  EXPECT_EQ(mode_of(counters.path()), 0600u);
  auto totals = counters.read();
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->counts, counts(13, 21, 32, 46));
  EXPECT_EQ(totals->lines, 3u);
  EXPECT_EQ(totals->ignored, 0u);

  // Sums saturate instead of wrapping.
  ASSERT_TRUE(counters.add(counts(UINT64_MAX, 0, 0, 0)).ok());
  EXPECT_EQ(counters.read()->counts.memory_hits, UINT64_MAX);
  // The disk cache does not take the file for an entry.
  DiskCache cache(dir);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_TRUE(cache.list().empty());
}

TEST(CacheCounters, TornAndMalformedLinesAreIgnoredAndCounted) {
  ScratchDir tmp;
  std::string dir = made_dir(tmp);
  CacheCounters counters(dir);
  write_bytes(counters.path(),
              "v1 memory_hits=1 memory_misses=2 disk_hits=3 disk_misses=4\n"
              "v1 memory_hits=5 memory_mi\n"                                    // torn
              "garbage\n"
              "\n"
              "v1 memory_hits=100 memory_misses=1 disk_hits=1 disk_misses=1 disk_hits=1\n"
              "v1 memory_hits=10 memory_misses=20 disk_hits=30 disk_misses=40\n"
              "v1 memory_hits=7 memory_misses=7 disk_hits=7 disk_misses=7");    // no newline: torn
  auto totals = counters.read();
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->counts, counts(11, 22, 33, 44));
  EXPECT_EQ(totals->lines, 2u);
  EXPECT_EQ(totals->ignored, 5u);
}

TEST(CacheCounters, CompactionKeepsTheTotals) {
  ScratchDir tmp;
  std::string dir = made_dir(tmp);
  constexpr uint64_t kBound = 1024;
  CacheCounters counters(dir, kBound);
  write_bytes(counters.path(), "not a counters line\n");
  ::chmod(counters.path().c_str(), 0600);
  TierCounts expected;
  uint64_t max_size = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    TierCounts c = counts(i, 2 * i + 1, i % 7, 1000000 + i);
    expected += c;
    ASSERT_TRUE(counters.add(c).ok()) << i;
    struct stat st {};
    ASSERT_EQ(::stat(counters.path().c_str(), &st), 0);
    max_size = std::max<uint64_t>(max_size, static_cast<uint64_t>(st.st_size));
  }
  EXPECT_LE(max_size, kBound + 200) << "compacted once over the bound";
  auto totals = counters.read();
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->counts, expected);
  EXPECT_EQ(totals->ignored, 0u) << "the malformed line went with the first compaction";
  EXPECT_LT(totals->lines, 20u);
  EXPECT_EQ(mode_of(counters.path()), 0600u);
  EXPECT_TRUE(scan_dir_prefix(dir, temp_file_prefix()).empty()) << "a temp file was left behind";
}

TEST(CacheCounters, ResetRemovesTheCounters) {
  ScratchDir tmp;
  std::string dir = made_dir(tmp);
  CacheCounters counters(dir);
  EXPECT_TRUE(counters.reset().ok()) << "absent is fine";
  ASSERT_TRUE(counters.add(counts(1, 2, 3, 4)).ok());
  ASSERT_TRUE(counters.reset().ok());
  EXPECT_FALSE(exists(counters.path()));
  EXPECT_EQ(counters.read()->counts, TierCounts{});
  ASSERT_TRUE(counters.add(counts(0, 0, 1, 0)).ok());
  EXPECT_EQ(counters.read()->counts, counts(0, 0, 1, 0));
}

// Forks `n` children released together; each runs body(index) and exits with
// its result (0: fine). Returns the exit codes.
std::vector<int> run_processes(int n, const std::function<int(int)>& body) {
  int gate[2];
  if (::pipe(gate) != 0) return {};
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char go;
      if (::read(gate[0], &go, 1) != 1) ::_exit(100);
      ::_exit(body(i));
    }
    if (pid > 0) children.push_back(pid);
  }
  ::close(gate[0]);
  std::string go(children.size(), 'g');
  EXPECT_EQ(::write(gate[1], go.data(), go.size()), static_cast<ssize_t>(go.size()));
  ::close(gate[1]);
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  EXPECT_EQ(children.size(), size_t(n));
  return codes;
}

TEST(CacheCounters, ProcessesAddingTogetherGiveTheExactTotal) {
  constexpr int kWriters = 8, kRounds = 250;
  auto per_round = [](int process, int round) {
    return counts(uint64_t(process) + 1, uint64_t(round), uint64_t(process * round % 5), 1);
  };
  TierCounts expected;
  for (int p = 0; p < kWriters; ++p)
    for (int r = 0; r < kRounds; ++r) expected += per_round(p, r);
  // Without compaction (plain O_APPEND), and with a bound small enough that
  // writers compact again and again while others append and a reader reads.
  for (uint64_t bound : {CacheCounters::kCompactBytes, uint64_t(2048)}) {
    SCOPED_TRACE("compact_bytes " + std::to_string(bound));
    ScratchDir tmp;
    std::string dir = made_dir(tmp);
    auto codes = run_processes(kWriters + 1, [&](int i) {
      CacheCounters counters(dir, bound);
      if (i == kWriters) {  // the reader: never a torn line, totals never go down
        uint64_t last = 0;
        for (int r = 0; r < 200; ++r) {
          auto t = counters.read();
          if (!t) {
            std::fprintf(stderr, "reader: %s\n", t.error().message.c_str());
            return 10;
          }
          if (t->ignored) return 11;
          if (t->counts.disk_misses < last) return 12;
          last = t->counts.disk_misses;
        }
        return 0;
      }
      for (int r = 0; r < kRounds; ++r) {
        if (Status s = counters.add(per_round(i, r)); !s) {
          std::fprintf(stderr, "writer %d: %s\n", i, s.error().message.c_str());
          return 3;
        }
      }
      return 0;
    });
    for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "process " << i;
    auto totals = CacheCounters(dir, bound).read();
    ASSERT_TRUE(totals) << totals.error().message;
    EXPECT_EQ(totals->counts, expected);
    EXPECT_EQ(totals->counts.disk_misses, uint64_t(kWriters * kRounds));
    EXPECT_EQ(totals->ignored, 0u);
    EXPECT_TRUE(scan_dir_prefix(dir, temp_file_prefix()).empty()) << "a temp file was left behind";
  }
}

TEST(CacheCounters, SymlinkIsNeitherFollowedNorRemoved) {
  ScratchDir tmp;
  std::string dir = made_dir(tmp);
  std::string target = tmp / "elsewhere";
  write_bytes(target, "v1 memory_hits=9 memory_misses=9 disk_hits=9 disk_misses=9\n");
  CacheCounters counters(dir);
  ASSERT_EQ(::symlink(target.c_str(), counters.path().c_str()), 0);
  Status added = counters.add(counts(1, 1, 1, 1));
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.error().message.find("symbolic link"), std::string::npos) << added.error().message;
  EXPECT_FALSE(counters.read().ok());
  EXPECT_FALSE(counters.reset().ok());
  EXPECT_TRUE(exists(counters.path()));
  EXPECT_EQ(read_bytes(target), "v1 memory_hits=9 memory_misses=9 disk_hits=9 disk_misses=9\n");
}

TEST(CacheCounters, FileOfAnotherUserIsIgnored) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ScratchDir tmp;
  std::string dir = made_dir(tmp);
  CacheCounters counters(dir);
  ASSERT_TRUE(counters.add(counts(1, 2, 3, 4)).ok());
  ASSERT_EQ(::chown(counters.path().c_str(), 4242, 4242), 0);
  std::string before = read_bytes(counters.path());
  for (Status s : {counters.add(counts(1, 1, 1, 1)), counters.reset()}) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("owned by uid 4242"), std::string::npos) << s.error().message;
  }
  auto totals = counters.read();
  ASSERT_FALSE(totals.ok());
  EXPECT_NE(totals.error().message.find("owned by uid 4242"), std::string::npos) << totals.error().message;
  EXPECT_EQ(read_bytes(counters.path()), before) << "neither written nor removed";
}

TEST(CacheCounters, UnwritableOrMissingDirectoryIsSkippedSilently) {
  ScratchDir tmp;
  // A directory that went away (e.g. removed by hand while a process ran).
  EXPECT_TRUE(CacheCounters(tmp / "gone").add(counts(1, 1, 1, 1)).ok());
  EXPECT_FALSE(exists(tmp / "gone"));
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  std::string dir = made_dir(tmp);
  ASSERT_EQ(::chmod(dir.c_str(), 0500), 0);
  EXPECT_TRUE(CacheCounters(dir).add(counts(1, 1, 1, 1)).ok());
  ::chmod(dir.c_str(), 0700);
  EXPECT_FALSE(exists(dir + "/.counters"));
}

// ---- through Engine and the CLI ---------------------------------------------

// Sets FUSEJIT_CACHE_DIR for its lifetime.
class CacheDirEnv {
 public:
  explicit CacheDirEnv(const std::string& dir) {
    if (const char* old = std::getenv("FUSEJIT_CACHE_DIR")) old_ = old;
    ::setenv("FUSEJIT_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDirEnv() {
    if (old_) ::setenv("FUSEJIT_CACHE_DIR", old_->c_str(), 1);
    else ::unsetenv("FUSEJIT_CACHE_DIR");
  }

 private:
  std::optional<std::string> old_;
};

std::string spec() { return std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/seed2_small.yaml"; }

TEST(EngineCacheCounters, EnginesAddTheirCountsWhenDestroyed) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  CacheDirEnv env(dir);
  auto g = load_spec_file(spec());
  ASSERT_TRUE(g) << g.error().str();
  WarningCapture warnings;
  CacheCounters counters(dir);
  {
    Engine idle;  // no lookups: nothing to add
  }
  EXPECT_FALSE(exists(counters.path()));
  {
    Engine first;  // a miss, then NVRTC
    auto a = first.compile_cubin(*g, "sm_80");
    ASSERT_TRUE(a) << a.error().str();
    EXPECT_FALSE(exists(counters.path())) << "added when the Engine ends";
  }
  {
    Engine second;  // two hits
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(second.compile_cubin(*g, "sm_80"));
    EXPECT_EQ(second.cache_stats().disk_hits, 2u);
  }
  auto totals = counters.read();
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->counts, counts(0, 0, 2, 1));
  EXPECT_EQ(totals->lines, 2u);
  EXPECT_TRUE(warnings.warnings().empty());

  // A counters file of another user: the Engine warns once and leaves it be.
  if (::geteuid() != 0) return;
  ASSERT_EQ(::chown(counters.path().c_str(), 4242, 4242), 0);
  std::string before = read_bytes(counters.path());
  for (int i = 0; i < 2; ++i) {
    Engine third;
    ASSERT_TRUE(third.compile_cubin(*g, "sm_80"));
  }
  EXPECT_EQ(read_bytes(counters.path()), before);
  ASSERT_EQ(warnings.warnings().size(), 1u);
  EXPECT_NE(warnings.warnings()[0].find("owned by uid 4242"), std::string::npos) << warnings.warnings()[0];
}

struct ProcessRun {
  int status = -1;
  std::string output;
};

ProcessRun run(const std::string& command) {
  ProcessRun r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  r.status = ::pclose(p);
  return r;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(CacheCountersCli, StatsSumsEveryProcessAndClearResets) {
  std::string fusejit = std::string(FUSEJIT_BINARY_DIR) + "/fusejit";
  if (::access(fusejit.c_str(), X_OK) != 0) GTEST_SKIP() << fusejit << " is not built";
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  std::string env = "env -u FUSEJIT_REMOTE_CACHE FUSEJIT_CACHE_DIR='" + dir + "' '" + fusejit + "' ";
  for (int i = 0; i < 2; ++i) {  // a miss (NVRTC), then a disk hit, in two processes
    ProcessRun compiled = run(env + "compile '" + spec() + "' --arch sm_90a -o '" + (tmp / "k.cubin") + "' 2>&1");
    ASSERT_EQ(compiled.status, 0) << compiled.output;
  }
  ProcessRun stats = run(env + "cache stats 2>&1");
  ASSERT_EQ(stats.status, 0) << stats.output;
  EXPECT_TRUE(contains(stats.output, "memory:    0 hits, 0 misses (since the last clear, all processes)\n"))
      << stats.output;
  EXPECT_TRUE(contains(stats.output, "disk:      1 hits, 1 misses (since the last clear, all processes)\n"))
      << stats.output;
  EXPECT_TRUE(contains(stats.output, "remote:    off")) << stats.output;
  EXPECT_FALSE(contains(stats.output, "ignored")) << stats.output;

  // Lines of every process count, whoever wrote them; a torn one is reported.
  ASSERT_TRUE(CacheCounters(dir).add(counts(12, 3, 0, 0)).ok());
  write_bytes(dir + "/.counters", read_bytes(dir + "/.counters") + "v1 memory_hits=1");
  stats = run(env + "cache stats 2>&1");
  EXPECT_TRUE(contains(stats.output, "memory:    12 hits, 3 misses (since the last clear, all processes)\n"))
      << stats.output;
  EXPECT_TRUE(contains(stats.output, "(1 malformed or torn lines in " + dir + "/.counters ignored)"))
      << stats.output;

  ProcessRun cleared = run(env + "cache clear 2>&1");
  ASSERT_EQ(cleared.status, 0) << cleared.output;
  EXPECT_TRUE(contains(cleared.output, "removed 1 entries from " + dir + "; hit/miss counters reset")) << cleared.output;
  stats = run(env + "cache stats --dir '" + dir + "' 2>&1");
  EXPECT_TRUE(contains(stats.output, "memory:    0 hits, 0 misses")) << stats.output;
  EXPECT_TRUE(contains(stats.output, "disk:      0 hits, 0 misses")) << stats.output;
}

}  // namespace
}  // namespace fusejit
