// The disk cache under contention: 8 processes (fork) storing and loading at
// once, on one key and on different keys, with and without eviction.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>

#include "runtime/disk_cache.h"
#include "runtime/disk_cache_files.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

using testing::fake_cubin;
using testing::ScratchDir;
using testing::simple_key;

constexpr int kProcesses = 8;

// Child exit codes, so a failure says what went wrong.
enum ChildStatus { kOk = 0, kStoreFailed = 3, kWrongPayload = 4, kMissAfterStore = 5, kWarned = 6 };

// Forks kProcesses children released together; each runs body(index) and
// exits with its result. Returns the exit codes.
std::vector<int> run_processes(const std::function<int(int)>& body) {
  int gate[2];
  if (::pipe(gate) != 0) return {};
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char go;
      if (::read(gate[0], &go, 1) != 1) ::_exit(100);
      static std::atomic<int> warnings{0};
      set_cache_warning_sink([](const std::string& w) {
        ++warnings;
        std::fprintf(stderr, "child warning: %s\n", w.c_str());
      });
      int status = body(i);
      ::_exit(status == kOk && warnings > 0 ? kWarned : status);
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
  EXPECT_EQ(children.size(), size_t(kProcesses));
  return codes;
}

// One "compile": a miss stores, then the entry must load back intact. Every
// payload of a key is identical, as real CUBINs of one key are.
int compile_through_cache(DiskCache& cache, const CacheKey& key, const std::vector<char>& cubin) {
  auto hit = cache.load(key);
  if (hit) return *hit == cubin ? kOk : kWrongPayload;
  if (!cache.store(key, cubin).ok()) return kStoreFailed;
  auto again = cache.load(key);
  if (!again) return kMissAfterStore;
  return *again == cubin ? kOk : kWrongPayload;
}

void expect_all_ok(const std::vector<int>& codes) {
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], kOk) << "process " << i;
}

void expect_no_temp_files(const std::string& dir) {
  EXPECT_TRUE(scan_dir_prefix(dir, temp_file_prefix()).empty()) << "a temp file was left behind";
}

TEST(DiskCacheProcesses, EightProcessesOneKey) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  CacheKey key = simple_key("shared");
  std::vector<char> cubin = fake_cubin(11, 256 << 10);  // 256 KiB: writes take a while
  auto codes = run_processes([&](int) {
    DiskCache cache(dir);
    for (int round = 0; round < 5; ++round) {
      if (int s = compile_through_cache(cache, key, cubin); s != kOk) return s;
      // Rewrite it anyway (as racing compilers do) while others read.
      if (!cache.store(key, cubin).ok()) return int(kStoreFailed);
    }
    return int(kOk);
  });
  expect_all_ok(codes);
  DiskCache cache(dir);
  auto entries = cache.list(/*verify=*/true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].problem.empty()) << entries[0].problem;
  EXPECT_EQ(cache.load(key), cubin);
  expect_no_temp_files(dir);
}

TEST(DiskCacheProcesses, EightProcessesDifferentKeys) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  auto codes = run_processes([&](int i) {
    DiskCache cache(dir);
    for (int round = 0; round < 5; ++round) {
      // Each process compiles its own key, and peeks at a neighbour's.
      int s = compile_through_cache(cache, simple_key("k" + std::to_string(i)), fake_cubin(i, 100000));
      if (s != kOk) return s;
      int next = (i + 1) % kProcesses;
      auto peek = cache.load(simple_key("k" + std::to_string(next)));
      if (peek && *peek != fake_cubin(next, 100000)) return int(kWrongPayload);
    }
    return int(kOk);
  });
  expect_all_ok(codes);
  DiskCache cache(dir);
  auto entries = cache.list(/*verify=*/true);
  ASSERT_EQ(entries.size(), size_t(kProcesses));
  for (const auto& e : entries) EXPECT_TRUE(e.problem.empty()) << e.problem;
  for (int i = 0; i < kProcesses; ++i)
    EXPECT_EQ(cache.load(simple_key("k" + std::to_string(i))), fake_cubin(i, 100000)) << i;
  expect_no_temp_files(dir);
}

TEST(DiskCacheProcesses, EightProcessesEvictingTogether) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  constexpr size_t kPayload = 50000;
  constexpr uint64_t kBound = 4 * kPayload + 4 * 1024;  // about four entries
  auto codes = run_processes([&](int i) {
    DiskCache cache(dir, kBound);
    for (int round = 0; round < 6; ++round) {
      CacheKey key = simple_key("p" + std::to_string(i) + "r" + std::to_string(round));
      std::vector<char> cubin = fake_cubin(i * 100 + round, kPayload);
      if (!cache.store(key, cubin).ok()) return int(kStoreFailed);
      // Others may evict it at once; if it is there, it must be intact.
      auto back = cache.load(key);
      if (back && *back != cubin) return int(kWrongPayload);
    }
    return int(kOk);
  });
  expect_all_ok(codes);
  DiskCache cache(dir, kBound);
  DiskCacheStats s = cache.stats();
  EXPECT_LE(s.bytes, kBound);
  EXPECT_GE(s.entries, 1u);
  for (const auto& e : cache.list(/*verify=*/true)) EXPECT_TRUE(e.problem.empty()) << e.problem;
  expect_no_temp_files(dir);
}

}  // namespace
}  // namespace fusejit
