// runtime/disk_cache_explain.cpp — DiskCache::explain: why a key hits or misses.
#include <algorithm>

#include "runtime/disk_cache.h"
#include "runtime/disk_cache_entry.h"
#include "runtime/disk_cache_files.h"

namespace fusejit {
namespace {

constexpr size_t kNearest = 3;

std::string short_digest(const std::string& digest) { return digest.substr(0, 16); }

}  // namespace

std::vector<std::string> DiskCache::explain(const CacheKey& key) const {
  std::vector<std::string> lines;
  if (!enabled()) return {"the kernel cache is disabled: " + stats().disabled_reason};
  std::string digest = key.digest();
  std::vector<CacheEntryInfo> entries = list();

  for (const CacheEntryInfo& e : entries) {
    if (e.digest != digest) continue;
    FileRead file = read_private_file(e.path, max_bytes());
    if (file.outcome != ReadOutcome::Ok) {
      std::string why = file.outcome == ReadOutcome::Refused ? "it " + file.problem : file.problem;
      return {"miss: entry " + e.path + " exists but is not used: " + why};
    }
    auto checked = verify_entry(file.bytes);
    if (!checked) return {"miss: entry " + e.path + " is corrupt (" + checked.error().message +
                          "); the next compile replaces it"};
    return {"hit: " + e.path + " (" + std::to_string(checked->payload_bytes) + " bytes, created " +
            iso_utc(checked->created_unix) + ", last used " + iso_utc(e.last_used_unix) + ")"};
  }

  lines.push_back("miss: no entry " + short_digest(digest) + " in " + dir());
  struct Candidate {
    const CacheEntryInfo* entry;
    std::vector<std::string> differences;
  };
  std::vector<Candidate> candidates;
  for (auto e = entries.rbegin(); e != entries.rend(); ++e)  // most recently used first
    if (e->problem.empty()) candidates.push_back({&*e, key_differences(e->key, key)});
  if (candidates.empty()) {
    lines.push_back(entries.empty() ? "the cache is empty" : "no readable entries to compare with");
    return lines;
  }
  // Fewest differing parts first; among equals, the most recently used.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.differences.size() < b.differences.size();
  });
  if (candidates.size() > kNearest) candidates.resize(kNearest);
  for (const Candidate& c : candidates) {
    lines.push_back("nearest entry " + short_digest(c.entry->digest) + " (last used " +
                    iso_utc(c.entry->last_used_unix) + "), " + std::to_string(c.differences.size()) +
                    " of " + std::to_string(key.parts.size()) + " key parts differ:");
    for (const std::string& d : c.differences) lines.push_back("  " + d);
  }
  return lines;
}

}  // namespace fusejit
