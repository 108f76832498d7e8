// runtime/disk_cache.h — the on-disk CUBIN cache, shared by every process of
// one user.
//
//   DiskCache disk = DiskCache::open_default();
//   CacheKey key = cubin_cache_key(graph, arch, config, options, program.source);
//   if (auto cubin = disk.load(key)) { ... }          // verified hit
//   else { compile; (void)disk.store(key, cubin); }   // store never fails a compile
//
// Entries are content-addressed files <dir>/<digest>.entry (format in
// runtime/disk_cache_entry.h). Writes go to a temp file in the same directory,
// are fsync'ed and renamed into place, so readers never see a partial entry
// and racing writers of one key leave one valid entry. Readers verify the
// checksum; a corrupt entry is removed (the caller recompiles). Entries and
// directories not owned by the current user are never loaded (a CUBIN is
// code). A hit refreshes the entry's mtime; after a store pushes the total
// over the bound, the least recently used entries are evicted. Problems are
// warnings through the sink below, never failures: a directory that cannot be
// created or written disables the cache with one warning per process.
// Thread-safe and multi-process safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fusejit/error.h"
#include "runtime/disk_cache_key.h"

namespace fusejit {

// Where warnings go (by default the library's log: stderr, FUSEJIT_LOG,
// runtime/log.h). Returns the previous sink; nullptr restores the default.
// Process-wide.
using CacheWarningSink = std::function<void(const std::string&)>;
CacheWarningSink set_cache_warning_sink(CacheWarningSink sink);
// Sends a warning to the sink (the other cache tiers use it too); the second
// form only once per `topic` per process.
void cache_warning(const std::string& message);
void cache_warning_once(const std::string& topic, const std::string& message);

struct DiskCacheStats {
  std::string dir;
  bool enabled = false;
  std::string disabled_reason;  // when !enabled
  uint64_t max_bytes = 0;
  uint64_t entries = 0;         // on disk now
  uint64_t bytes = 0;           // on disk now (entry file sizes)
  // Counted by this object since it was opened:
  uint64_t hits = 0, misses = 0, stores = 0, evictions = 0, corrupt = 0, refused = 0;
};

struct CacheEntryInfo {
  std::string digest;
  std::string path;
  uint64_t file_bytes = 0;
  int64_t last_used_unix = 0;  // the file's mtime (refreshed on every hit)
  int64_t created_unix = 0;
  uint64_t payload_bytes = 0;
  CacheKey key;
  std::string problem;         // empty: the manifest (or, verified, the whole entry) is fine
};

class DiskCache {
 public:
  static constexpr uint64_t kDefaultMaxBytes = uint64_t(2) << 30;  // 2 GiB

  // $FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit;
  // "" when none can be found. Only absolute $XDG_CACHE_HOME counts.
  static std::string default_dir();
  // The default directory, bounded by `max_bytes`, else $FUSEJIT_CACHE_MAX_BYTES
  // (bytes, or with a K/M/G/T suffix: powers of 1024), else 2 GiB. A bound of
  // 0 disables the cache.
  static DiskCache open_default(std::optional<uint64_t> max_bytes = std::nullopt);

  // Creates `dir` (and missing parents) with mode 0700; disabled, with one
  // warning, when that fails or the directory is not the current user's.
  explicit DiskCache(std::string dir, uint64_t max_bytes = kDefaultMaxBytes);
  DiskCache(DiskCache&&) noexcept;  // a moved-from cache may only be destroyed or assigned
  DiskCache& operator=(DiskCache&&) noexcept;
  ~DiskCache();

  bool enabled() const;
  const std::string& dir() const;
  uint64_t max_bytes() const;
  std::string entry_path(const CacheKey& key) const;  // <dir>/<digest>.entry

  // The verified payload, or nullopt on a miss (absent, foreign, corrupt:
  // corrupt entries are removed with a warning).
  std::optional<std::vector<char>> load(const CacheKey& key);
  // Writes the entry atomically, then evicts down to the bound. An Error says
  // why nothing was stored (disabled, unwritable, larger than the bound); it
  // is informational: callers go on without the cache.
  Status store(const CacheKey& key, const std::vector<char>& payload);
  // Removes one entry (e.g. a CUBIN the driver refused); absent is fine.
  Status remove(const CacheKey& key);
  Status clear();  // removes every entry (and stale temp files)

  DiskCacheStats stats() const;
  // Every entry, oldest use first. `verify` reads whole files and checks them.
  std::vector<CacheEntryInfo> list(bool verify = false) const;
  // Human-readable: "hit: ..." or "miss: ..." followed by, for the nearest
  // entries (fewest differing parts), the parts that differ ("nvrtc: 13.0 -> 13.1").
  std::vector<std::string> explain(const CacheKey& key) const;

 private:
  struct State;
  void evict_to_bound();
  std::unique_ptr<State> state_;
};

// "2147483648", "512M", "2G", "1T" (binary units); nullopt when malformed.
std::optional<uint64_t> parse_byte_size(const std::string& text);

}  // namespace fusejit
