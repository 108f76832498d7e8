// Cache directory hygiene: a directory others may write loses those bits
// (with a warning), and files of other users in it are neither loaded,
// counted, evicted nor cleared.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/disk_cache.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

using testing::fake_cubin;
using testing::ScratchDir;
using testing::simple_key;
using testing::WarningCapture;

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

TEST(DiskCacheHygiene, DirectoryWritableByOthersIsMadePrivateToWrites) {
  for (mode_t bad : {mode_t(0777), mode_t(0770), mode_t(0702)}) {
    ScratchDir tmp;
    std::string dir = tmp / "cache";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), bad), 0);
    WarningCapture warnings;
    DiskCache cache(dir);
    EXPECT_TRUE(cache.enabled());
    EXPECT_EQ(mode_of(dir), bad & ~mode_t(022)) << std::oct << bad;
    ASSERT_EQ(warnings.warnings().size(), 1u);
    EXPECT_NE(warnings.warnings()[0].find("writable by others"), std::string::npos) << warnings.warnings()[0];
    // Opening it again: nothing left to fix, no warning.
    DiskCache again(dir);
    EXPECT_TRUE(again.enabled());
    EXPECT_EQ(warnings.warnings().size(), 1u);
  }
}

TEST(DiskCacheHygiene, PrivateDirectoryIsLeftAlone) {
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  WarningCapture warnings;
  DiskCache cache(dir);
  EXPECT_TRUE(cache.enabled());
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_TRUE(warnings.warnings().empty());
}

TEST(DiskCacheHygiene, ForeignFilesAreNotCountedEvictedOrCleared) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ScratchDir tmp;
  WarningCapture warnings;
  DiskCache cache(tmp / "cache", 4096);
  CacheKey foreign_key = simple_key("foreign");
  ASSERT_TRUE(cache.store(foreign_key, fake_cubin(1, 1000)).ok());
  std::string foreign = cache.entry_path(foreign_key);
  ASSERT_EQ(::chown(foreign.c_str(), 4242, 4242), 0);
  EXPECT_EQ(cache.stats().entries, 0u) << "not counted";

  // Filling the cache past its bound evicts our own entries only.
  for (int i = 0; i < 6; ++i) (void)cache.store(simple_key("own" + std::to_string(i)), fake_cubin(i, 1000));
  EXPECT_EQ(::access(foreign.c_str(), F_OK), 0) << "not evicted";
  EXPECT_LE(cache.stats().bytes, 4096u);

  EXPECT_TRUE(cache.clear().ok());
  EXPECT_EQ(::access(foreign.c_str(), F_OK), 0) << "not cleared";
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_FALSE(cache.load(foreign_key).has_value()) << "not loaded";
}

}  // namespace
}  // namespace fusejit
