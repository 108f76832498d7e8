// The on-disk kernel cache: digest, key, entry format, round trip, faults.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "fusejit/builder.h"
#include "runtime/disk_cache.h"
#include "runtime/disk_cache_entry.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/sha256.h"
#include "tests/disk_cache_test_util.h"

namespace fusejit {
namespace {

using testing::fake_cubin;
using testing::read_bytes;
using testing::ScratchDir;
using testing::simple_key;
using testing::WarningCapture;
using testing::write_bytes;

// ---- SHA-256 -------------------------------------------------------------------

TEST(DiskCacheSha256, FipsVectors) {
  // FIPS 180-2 appendix B / NIST CSRC example values.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmn"
                       "opqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(DiskCacheSha256, PaddingBoundaries) {
  // Lengths around the 55/56/64-byte padding edges; values from Python's hashlib.
  const std::pair<size_t, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
  };
  for (const auto& [n, hex] : cases) EXPECT_EQ(sha256_hex(std::string(n, 'a')), hex) << n;
}

TEST(DiskCacheSha256, IncrementalEqualsOneShot) {
  std::vector<char> data = fake_cubin(7, 1000);
  std::string whole(data.begin(), data.end());
  for (size_t chunk : {1, 3, 63, 64, 65, 999}) {
    Sha256 h;
    for (size_t at = 0; at < whole.size(); at += chunk) h.update(std::string_view(whole).substr(at, chunk));
    EXPECT_EQ(h.finish_hex(), sha256_hex(whole)) << chunk;
  }
}

// ---- keys ------------------------------------------------------------------------

Graph small_graph(int64_t features) {
  GraphBuilder b(Precision::FP32, "g");
  auto x = b.input("x", {4, 8});
  auto w = b.input("w", {features, 8});
  b.output("y", b.linear(x, w).relu());
  auto g = b.build();
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  return g.ok() ? g.take() : Graph{};
}

TEST(DiskCacheKey, CubinKeyHasEveryPartAndIsStable) {
  Graph g = small_graph(16);
  std::vector<std::string> opts = {"--gpu-architecture=sm_90a", "-std=c++17", "-lineinfo"};
  CacheKey key = cubin_cache_key(g, "sm_90a", "", opts, "source");
  std::vector<std::string> names;
  for (const auto& [name, value] : key.parts) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"graph", "config", "generator", "templates", "source", "nvrtc",
                                             "options", "arch"}));
  EXPECT_EQ(*key.find("graph"), hash_hex(structural_hash(g)));
  EXPECT_EQ(*key.find("nvrtc"), nvrtc_version());
  EXPECT_EQ(*key.find("templates"), templates_digest());
  EXPECT_EQ(*key.find("generator"), generator_version());
  EXPECT_EQ(*key.find("source"), sha256_hex("source"));
  EXPECT_EQ(templates_digest().size(), 64u);
  EXPECT_EQ(key.digest(), cubin_cache_key(small_graph(16), "sm_90a", "", opts, "source").digest());
  EXPECT_EQ(key.digest().size(), 64u);
}

TEST(DiskCacheKey, EveryArgumentChangesTheDigest) {
  Graph g = small_graph(16);
  std::vector<std::string> opts = {"--gpu-architecture=sm_90a", "-lineinfo"};
  std::set<std::string> digests = {
      cubin_cache_key(g, "sm_90a", "", opts, "src").digest(),
      cubin_cache_key(small_graph(32), "sm_90a", "", opts, "src").digest(),
      cubin_cache_key(g, "sm_80", "", opts, "src").digest(),
      cubin_cache_key(g, "sm_90a", "tile=64", opts, "src").digest(),
      cubin_cache_key(g, "sm_90a", "", {"--gpu-architecture=sm_90a"}, "src").digest(),
      cubin_cache_key(g, "sm_90a", "", opts, "src2").digest(),
  };
  EXPECT_EQ(digests.size(), 6u);
}

TEST(DiskCacheKey, EveryPartChangesTheDigestAndShowsInTheDiff) {
  CacheKey base = cubin_cache_key(small_graph(16), "sm_90a", "", {"-lineinfo"}, "src");
  for (size_t i = 0; i < base.parts.size(); ++i) {
    CacheKey changed = base;
    changed.parts[i].second += "x";
    EXPECT_NE(changed.digest(), base.digest()) << base.parts[i].first;
    auto diff = key_differences(base, changed);
    ASSERT_EQ(diff.size(), 1u) << base.parts[i].first;
    EXPECT_EQ(diff[0].rfind(base.parts[i].first + ": ", 0), 0u) << diff[0];
  }
}

TEST(DiskCacheKey, BoundariesCannotBeForged) {
  CacheKey a, b;
  a.add("ab", "c");
  b.add("a", "bc");
  EXPECT_NE(a.digest(), b.digest());
  EXPECT_NE(join_options({"a b"}), join_options({"a", "b"}));
  EXPECT_NE(join_options({""}), join_options({}));
  EXPECT_NE(join_options({"\"a", "b\""}), join_options({"\"a b\""}));
  EXPECT_EQ(join_options({"-lineinfo", "--include-path=/a b"}), "-lineinfo \"--include-path=/a b\"");
}

TEST(DiskCacheKey, DifferencesReadAsOldToNew) {
  CacheKey old_key = simple_key("g1", "13.0"), new_key = simple_key("g1", "13.1");
  EXPECT_EQ(key_differences(old_key, new_key), std::vector<std::string>{"nvrtc: 13.0 -> 13.1"});
  new_key.add("extra", "1");
  EXPECT_EQ(key_differences(old_key, new_key),
            (std::vector<std::string>{"nvrtc: 13.0 -> 13.1", "extra: (none) -> 1"}));
  CacheKey empty_config = simple_key("g1");
  CacheKey some_config = empty_config;
  some_config.parts[1].second = "tile=64";
  EXPECT_EQ(key_differences(empty_config, some_config), std::vector<std::string>{"config: '' -> tile=64"});
  // Option lists name the options that changed.
  CacheKey lineinfo, plain, other_arch;
  lineinfo.add("options", join_options({"--gpu-architecture=sm_90a", "-std=c++17", "-lineinfo"}));
  plain.add("options", join_options({"--gpu-architecture=sm_90a", "-std=c++17"}));
  other_arch.add("options", join_options({"--gpu-architecture=sm_89", "-std=c++17", "-lineinfo"}));
  EXPECT_EQ(key_differences(lineinfo, plain), std::vector<std::string>{"options: -lineinfo -> (none)"});
  EXPECT_EQ(key_differences(lineinfo, other_arch),
            std::vector<std::string>{"options: --gpu-architecture=sm_90a -> --gpu-architecture=sm_89"});
  // Long values are shortened around the first difference.
  CacheKey long_a, long_b;
  long_a.add("source", std::string(200, 'a') + "X" + std::string(200, 'a'));
  long_b.add("source", std::string(200, 'a') + "Y" + std::string(200, 'a'));
  auto diff = key_differences(long_a, long_b);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_LT(diff[0].size(), 200u);
  EXPECT_NE(diff[0].find("X"), std::string::npos);
  EXPECT_NE(diff[0].find("Y"), std::string::npos);
}

// ---- entry format ---------------------------------------------------------------------

TEST(DiskCacheEntry, EncodeVerifyRoundTrip) {
  CacheKey key = simple_key("g");
  key.add("options", "a\nb\\c\r");  // escaped in the manifest
  std::vector<char> payload = fake_cubin(1, 300);
  payload[10] = '\n';
  payload[11] = '\n';
  auto bytes = encode_entry(key, std::string_view(payload.data(), payload.size()), 1735787045);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->rfind("fusejit-cache-entry 1\n", 0), 0u);
  EXPECT_NE(bytes->find("key.nvrtc: 13.0\n"), std::string::npos);
  EXPECT_NE(bytes->find("key.options: a\\nb\\\\c\\r\n"), std::string::npos);
  EXPECT_NE(bytes->find("created: 2025-01-02T03:04:05Z 1735787045\n"), std::string::npos);
  auto m = verify_entry(*bytes);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->key, key);
  EXPECT_EQ(m->created_unix, 1735787045);
  EXPECT_EQ(m->payload_bytes, payload.size());
  EXPECT_EQ(bytes->substr(m->manifest_bytes), std::string(payload.begin(), payload.end()));
  CacheKey bad_name;
  bad_name.add("has space", "x");
  EXPECT_FALSE(encode_entry(bad_name, "", 0).ok());
}

TEST(DiskCacheEntry, EveryFlippedBitAndEveryTruncationIsCaught) {
  CacheKey key = simple_key("g");
  std::vector<char> payload = fake_cubin(2, 64);
  auto bytes = encode_entry(key, std::string_view(payload.data(), payload.size()), 1);
  ASSERT_TRUE(bytes.ok());
  for (size_t i = 0; i < bytes->size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = *bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      auto m = verify_entry(flipped);
      EXPECT_FALSE(m.ok() && m->key == key) << "byte " << i << " bit " << bit;
    }
  }
  for (size_t len = 0; len < bytes->size(); ++len)
    EXPECT_FALSE(verify_entry(std::string_view(*bytes).substr(0, len)).ok()) << len;
  EXPECT_FALSE(verify_entry(*bytes + "x").ok());
}

// ---- DiskCache: round trip, location, directory ---------------------------------------

TEST(DiskCache, StoreLoadRoundTrip) {
  ScratchDir tmp;
  WarningCapture warnings;
  DiskCache cache(tmp / "cache");
  ASSERT_TRUE(cache.enabled());
  CacheKey key = simple_key("g");
  EXPECT_FALSE(cache.load(key).has_value());
  std::vector<char> cubin = fake_cubin(3, 5000);
  ASSERT_TRUE(cache.store(key, cubin).ok());
  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, cubin);
  EXPECT_FALSE(cache.load(simple_key("other")).has_value());
  // Another object (another process, say) sees the entry too.
  DiskCache again(tmp / "cache");
  EXPECT_EQ(again.load(key), cubin);

  DiskCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.stores, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_GT(s.bytes, cubin.size());
  auto entries = cache.list(/*verify=*/true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].digest, key.digest());
  EXPECT_EQ(entries[0].key, key);
  EXPECT_EQ(entries[0].payload_bytes, cubin.size());
  EXPECT_TRUE(entries[0].problem.empty()) << entries[0].problem;
  // The manifest is readable text at the start of the file.
  std::string file = read_bytes(cache.entry_path(key));
  EXPECT_NE(file.find("key.graph: g\n"), std::string::npos);

  ASSERT_TRUE(cache.clear().ok());
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_TRUE(warnings.warnings().empty());
}

TEST(DiskCache, DirectoryIsCreatedPrivate) {
  ScratchDir tmp;
  DiskCache cache(tmp / "a/b/fusejit");
  ASSERT_TRUE(cache.enabled());
  for (std::string dir : {tmp / "a", tmp / "a/b", tmp / "a/b/fusejit"}) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
  ASSERT_TRUE(cache.store(simple_key("g"), fake_cubin(1, 10)).ok());
  struct stat st {};
  ASSERT_EQ(::stat(cache.entry_path(simple_key("g")).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Sets an environment variable for the scope; restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DiskCache, DefaultLocationAndBound) {
  ScopedEnv dir("FUSEJIT_CACHE_DIR", "/x/fj/");
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(DiskCache::default_dir(), "/x/fj");
  {
    ScopedEnv unset("FUSEJIT_CACHE_DIR", nullptr);
    EXPECT_EQ(DiskCache::default_dir(), "/xdg/fusejit");
    ScopedEnv relative("XDG_CACHE_HOME", "relative");  // the XDG spec says: ignore
    EXPECT_EQ(DiskCache::default_dir(), "/home/someone/.cache/fusejit");
  }
  EXPECT_EQ(parse_byte_size("123"), 123u);
  EXPECT_EQ(parse_byte_size("2G"), uint64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), uint64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("4k"), 4096u);
  EXPECT_FALSE(parse_byte_size("").has_value());
  EXPECT_FALSE(parse_byte_size("G").has_value());
  EXPECT_FALSE(parse_byte_size("1.5G").has_value());
  EXPECT_FALSE(parse_byte_size("99999999999999999999").has_value());
  EXPECT_FALSE(parse_byte_size("16777216T").has_value());

  ScratchDir tmp;
  ScopedEnv real_dir("FUSEJIT_CACHE_DIR", tmp.path().c_str());
  {
    ScopedEnv bound("FUSEJIT_CACHE_MAX_BYTES", "3M");
    EXPECT_EQ(DiskCache::open_default().max_bytes(), uint64_t(3) << 20);
    EXPECT_EQ(DiskCache::open_default(1000).max_bytes(), 1000u);  // the option wins
    EXPECT_EQ(DiskCache::open_default().dir(), tmp.path());
  }
  {
    ScopedEnv bound("FUSEJIT_CACHE_MAX_BYTES", "lots");
    WarningCapture warnings;
    EXPECT_EQ(DiskCache::open_default().max_bytes(), DiskCache::kDefaultMaxBytes);
    EXPECT_EQ(DiskCache::open_default().max_bytes(), DiskCache::kDefaultMaxBytes);
    EXPECT_EQ(warnings.warnings().size(), 1u);  // once per process
  }
  {
    ScopedEnv bound("FUSEJIT_CACHE_MAX_BYTES", "0");
    DiskCache off = DiskCache::open_default();
    EXPECT_FALSE(off.enabled());
    EXPECT_FALSE(off.store(simple_key("g"), fake_cubin(1, 10)).ok());
    EXPECT_FALSE(off.load(simple_key("g")).has_value());
  }
}

TEST(DiskCache, ExplainSaysHitOrNamesTheDifferingParts) {
  ScratchDir tmp;
  DiskCache cache(tmp / "cache");
  CacheKey key = simple_key("g", "13.0");
  EXPECT_EQ(cache.explain(key).back(), "the cache is empty");
  ASSERT_TRUE(cache.store(key, fake_cubin(1, 100)).ok());
  ASSERT_TRUE(cache.store(simple_key("other-graph", "13.2"), fake_cubin(2, 100)).ok());

  auto hit = cache.explain(key);
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0].rfind("hit: " + cache.entry_path(key), 0), 0u) << hit[0];

  // After a toolkit upgrade: the nearest entry differs only in nvrtc.
  auto miss = cache.explain(simple_key("g", "13.1"));
  ASSERT_GE(miss.size(), 3u);
  EXPECT_EQ(miss[0].rfind("miss: no entry", 0), 0u) << miss[0];
  EXPECT_NE(miss[1].find(key.digest().substr(0, 16)), std::string::npos) << miss[1];
  EXPECT_NE(miss[1].find("1 of 4 key parts differ"), std::string::npos) << miss[1];
  EXPECT_EQ(miss[2], "  nvrtc: 13.0 -> 13.1");
  // The farther entry comes second.
  ASSERT_EQ(miss.size(), 6u);
  EXPECT_NE(miss[3].find("2 of 4"), std::string::npos) << miss[3];
  EXPECT_EQ(miss[4], "  graph: other-graph -> g");
  EXPECT_EQ(miss[5], "  nvrtc: 13.2 -> 13.1");

  // A damaged entry is reported, not served; explain leaves it for load() to remove.
  std::string path = cache.entry_path(key);
  std::string bytes = read_bytes(path);
  bytes.back() ^= 1;
  write_bytes(path, bytes);
  auto damaged = cache.explain(key);
  ASSERT_EQ(damaged.size(), 1u);
  EXPECT_NE(damaged[0].find("is corrupt (not a valid cache entry: checksum mismatch)"), std::string::npos)
      << damaged[0];
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
}

// ---- faults ------------------------------------------------------------------------

struct Damage {
  const char* name;
  std::string (*apply)(std::string);
};

TEST(DiskCache, DamagedEntriesAreRemovedAndRebuilt) {
  const Damage damages[] = {
      {"truncated payload", [](std::string b) { return b.substr(0, b.size() - 100); }},
      {"truncated manifest", [](std::string b) { return b.substr(0, 40); }},
      {"empty file", [](std::string) { return std::string(); }},
      {"flipped payload bit", [](std::string b) { b[b.size() - 7] ^= 0x10; return b; }},
      {"flipped manifest bit", [](std::string b) { b[b.find("key.nvrtc") + 11] ^= 0x01; return b; }},
      {"appended garbage", [](std::string b) { return b + "garbage"; }},
  };
  ScratchDir tmp;
  DiskCache cache(tmp / "cache");
  CacheKey key = simple_key("g");
  std::vector<char> cubin = fake_cubin(4, 2000);
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    ASSERT_TRUE(cache.store(key, cubin).ok());
    std::string path = cache.entry_path(key);
    write_bytes(path, d.apply(read_bytes(path)));
    WarningCapture warnings;
    EXPECT_FALSE(cache.load(key).has_value());
    ASSERT_EQ(warnings.warnings().size(), 1u);
    EXPECT_NE(warnings.warnings()[0].find("removed corrupt entry"), std::string::npos) << warnings.warnings()[0];
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the corrupt entry must be gone";
    // The caller recompiles and stores again: the cache heals.
    ASSERT_TRUE(cache.store(key, cubin).ok());
    EXPECT_EQ(cache.load(key), cubin);
  }
  EXPECT_EQ(cache.stats().corrupt, std::size(damages));
}

TEST(DiskCache, UncreatableDirectoryDegradesWithOneWarning) {
  ScratchDir tmp;
  write_bytes(tmp / "file", "not a directory");
  std::string dir = tmp / "file/cache";  // cannot be created, even by root
  WarningCapture warnings;
  DiskCache cache(dir);
  EXPECT_FALSE(cache.enabled());
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(cache.load(simple_key("g")).has_value());
    EXPECT_FALSE(cache.store(simple_key("g"), fake_cubin(1, 10)).ok());
  }
  DiskCache second(dir);  // e.g. another Engine in the same process
  EXPECT_FALSE(second.load(simple_key("g")).has_value());
  ASSERT_EQ(warnings.warnings().size(), 1u);
  EXPECT_NE(warnings.warnings()[0].find(dir), std::string::npos);
  EXPECT_NE(warnings.warnings()[0].find("compiling without"), std::string::npos);
  EXPECT_NE(cache.explain(simple_key("g"))[0].find("disabled"), std::string::npos);
}

TEST(DiskCache, UnwritableDirectoryDegradesWithOneWarning) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  ScratchDir tmp;
  std::string dir = tmp / "cache";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0500), 0);
  WarningCapture warnings;
  DiskCache cache(dir);
  DiskCache second(dir);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(cache.store(simple_key("g"), fake_cubin(1, 10)).ok());
    EXPECT_FALSE(second.store(simple_key("g"), fake_cubin(1, 10)).ok());
    EXPECT_FALSE(cache.load(simple_key("g")).has_value());
  }
  EXPECT_EQ(warnings.warnings().size(), 1u);
  ::chmod(dir.c_str(), 0700);
}

TEST(DiskCache, RefusesEntriesAndDirectoriesOfOtherUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ScratchDir tmp;
  DiskCache cache(tmp / "cache");
  CacheKey key = simple_key("g");
  ASSERT_TRUE(cache.store(key, fake_cubin(5, 100)).ok());
  std::string path = cache.entry_path(key);
  ASSERT_EQ(::chown(path.c_str(), 4242, 4242), 0);
  {
    WarningCapture warnings;
    EXPECT_FALSE(cache.load(key).has_value());
    ASSERT_EQ(warnings.warnings().size(), 1u);
    EXPECT_NE(warnings.warnings()[0].find("uid 4242"), std::string::npos) << warnings.warnings()[0];
    EXPECT_EQ(::access(path.c_str(), F_OK), 0) << "a foreign entry is left alone";
    EXPECT_EQ(cache.stats().refused, 1u);
    // A symlink planted as an entry is not followed.
    CacheKey linked = simple_key("linked");
    ASSERT_EQ(::symlink(path.c_str(), cache.entry_path(linked).c_str()), 0);
    EXPECT_FALSE(cache.load(linked).has_value());
    EXPECT_EQ(cache.stats().refused, 2u);
  }

  std::string foreign_dir = tmp / "foreign";
  ASSERT_EQ(::mkdir(foreign_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(foreign_dir.c_str(), 4242, 4242), 0);
  WarningCapture warnings;
  DiskCache refused(foreign_dir);
  EXPECT_FALSE(refused.enabled());
  ASSERT_EQ(warnings.warnings().size(), 1u);
  EXPECT_NE(warnings.warnings()[0].find("not by you"), std::string::npos) << warnings.warnings()[0];
}

}  // namespace
}  // namespace fusejit
