// runtime/cache_tiers.cpp — CubinTiers: disk, then remote.
#include "runtime/cache_tiers.h"

namespace fusejit {

CubinTiers::CubinTiers(DiskCache disk, std::shared_ptr<RemoteCache> remote)
    : disk_(std::move(disk)), remote_(std::move(remote)) {}

std::optional<CubinHit> CubinTiers::load(const CacheKey& key) {
  if (auto hit = disk_.load(key)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.disk_hits;
    return CubinHit{std::move(*hit), "disk cache: " + disk_.entry_path(key)};
  }
  std::optional<std::string> remote = remote_ ? remote_->get(RemoteCache::kCubin, key) : std::nullopt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.disk_misses;
    if (remote_) ++(remote ? counts_.remote_hits : counts_.remote_misses);
  }
  if (!remote) return std::nullopt;
  CubinHit hit{std::vector<char>(remote->begin(), remote->end()), "remote cache: " + remote_->stats().url};
  (void)disk_.store(key, hit.cubin);  // the next process hits the disk
  return hit;
}

void CubinTiers::store(const CacheKey& key, const std::vector<char>& cubin) {
  (void)disk_.store(key, cubin);
  if (!remote_) return;
  if (remote_->put(RemoteCache::kCubin, key, std::string_view(cubin.data(), cubin.size()))) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.remote_stores;
  }
}

TierStats CubinTiers::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace fusejit
