// The disk cache's size bound: LRU eviction by mtime, refreshed on every hit.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "runtime/disk_cache.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

using testing::fake_cubin;
using testing::ScratchDir;
using testing::simple_key;

constexpr size_t kPayload = 10000;

// Backdates an entry's last use by `seconds_ago`.
void set_last_use(const DiskCache& cache, const CacheKey& key, int seconds_ago) {
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, cache.entry_path(key).c_str(), times, 0), 0);
}

bool present(const DiskCache& cache, const CacheKey& key) {
  return ::access(cache.entry_path(key).c_str(), F_OK) == 0;
}

uint64_t entry_size(const std::string& dir) {
  DiskCache probe(dir);
  EXPECT_TRUE(probe.store(simple_key("probe"), fake_cubin(0, kPayload)).ok());
  uint64_t size = probe.stats().bytes;
  EXPECT_TRUE(probe.clear().ok());
  return size;
}

TEST(DiskCacheEviction, EvictsLeastRecentlyUsedFirst) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  uint64_t entry = entry_size(dir);
  ASSERT_GT(entry, kPayload);
  DiskCache cache(dir, 3 * entry + entry / 2);  // room for three entries
  CacheKey a = simple_key("a"), b = simple_key("b"), c = simple_key("c"), d = simple_key("d"),
           e = simple_key("e");
  ASSERT_TRUE(cache.store(a, fake_cubin(1, kPayload)).ok());
  ASSERT_TRUE(cache.store(b, fake_cubin(2, kPayload)).ok());
  ASSERT_TRUE(cache.store(c, fake_cubin(3, kPayload)).ok());
  set_last_use(cache, a, 300);  // a is the oldest ...
  set_last_use(cache, b, 200);
  set_last_use(cache, c, 100);
  ASSERT_TRUE(cache.load(a).has_value());  // ... until a hit makes it the newest

  ASSERT_TRUE(cache.store(d, fake_cubin(4, kPayload)).ok());
  EXPECT_FALSE(present(cache, b)) << "b was least recently used";
  EXPECT_TRUE(present(cache, a));
  EXPECT_TRUE(present(cache, c));
  EXPECT_TRUE(present(cache, d));
  EXPECT_LE(cache.stats().bytes, cache.max_bytes());

  ASSERT_TRUE(cache.store(e, fake_cubin(5, kPayload)).ok());
  EXPECT_FALSE(present(cache, c)) << "then c";
  EXPECT_TRUE(present(cache, a));
  EXPECT_EQ(cache.stats().evictions, 2u);
  EXPECT_EQ(cache.stats().entries, 3u);
}

TEST(DiskCacheEviction, TotalStaysUnderTheBound) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  uint64_t entry = entry_size(dir);
  DiskCache cache(dir, 5 * entry);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(cache.store(simple_key("k" + std::to_string(i)), fake_cubin(i, kPayload)).ok());
    DiskCacheStats s = cache.stats();
    EXPECT_LE(s.bytes, cache.max_bytes()) << i;
    EXPECT_EQ(s.entries, std::min<uint64_t>(i + 1, 5)) << i;
  }
  // The newest entries survive.
  for (int i = 35; i < 40; ++i) EXPECT_EQ(cache.load(simple_key("k" + std::to_string(i))), fake_cubin(i, kPayload));
}

TEST(DiskCacheEviction, EntryLargerThanTheBoundIsNotStored) {
  ScratchDir tmp;
  DiskCache cache(tmp / "cache", 1000);
  CacheKey big = simple_key("big");
  Status s = cache.store(big, fake_cubin(1, 5000));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("exceeds the cache bound"), std::string::npos);
  EXPECT_FALSE(present(cache, big));
  ASSERT_TRUE(cache.store(simple_key("small"), fake_cubin(1, 100)).ok());  // still usable
}

}  // namespace
}  // namespace fusejit
