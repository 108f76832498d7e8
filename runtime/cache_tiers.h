// runtime/cache_tiers.h — the CUBIN cache behind the in-memory one: the disk
// cache, then (when configured) the remote tier.
//
//   CubinTiers tiers(DiskCache::open_default(), RemoteCache::process_default());
//   if (auto hit = tiers.load(key)) { ... }         // disk, else remote (then kept on disk)
//   else { compile; tiers.store(key, cubin); }      // disk and remote
//
// load() reads through: a remote hit is verified (runtime/remote_value.h) and
// written to the disk cache. store() writes back to both. Failures only warn.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/disk_cache.h"
#include "runtime/remote_cache.h"

namespace fusejit {

struct CubinHit {
  std::vector<char> cubin;
  std::string from;  // "disk cache: <path>" or "remote cache: <url>"
};

struct TierStats {
  uint64_t disk_hits = 0, disk_misses = 0, remote_hits = 0, remote_misses = 0, remote_stores = 0;
};

class CubinTiers {
 public:
  CubinTiers(DiskCache disk, std::shared_ptr<RemoteCache> remote);
  std::optional<CubinHit> load(const CacheKey& key);
  void store(const CacheKey& key, const std::vector<char>& cubin);
  // Drops a CUBIN the driver refused from the disk (the remote copy verified,
  // so it is left: another driver may take it).
  void remove(const CacheKey& key) { (void)disk_.remove(key); }

  DiskCache& disk() { return disk_; }
  const std::shared_ptr<RemoteCache>& remote() const { return remote_; }
  TierStats stats() const;

 private:
  DiskCache disk_;
  std::shared_ptr<RemoteCache> remote_;
  mutable std::mutex mu_;
  TierStats counts_;  // remote_* here: this object's calls only
};

}  // namespace fusejit
