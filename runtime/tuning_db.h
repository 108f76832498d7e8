// runtime/tuning_db.h — the autotuner's winners on disk, one small file per
// (graph, device) in <cache dir>/tuning/. Same rules as the CUBIN cache:
// private 0700 directory, files owned by the current user only, atomic
// writes; a problem is a warning and a miss, never a failure. With a remote
// tier (runtime/remote_cache.h), a local miss reads through it (and keeps
// the record locally) and save() writes the record there too.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/cuda_driver.h"
#include "runtime/disk_cache_key.h"
#include "runtime/remote_cache.h"

namespace fusejit {

struct TuningRecord {
  std::string config;        // the winner ("" = the heuristic default won)
  double median_ms = 0;      // the winner's time
  double spread_ms = 0;      // its max - min over the trials
  double default_ms = 0;     // the default config's time in the same run
  int64_t created_unix = 0;
  std::string table;         // the full candidate table, for humans
};

// Parts: graph hash, device name, SM count, driver version, fusejit version
// (with the generator revision), arch.
CacheKey tuning_key(const Graph& prepared, const DeviceInfo& device, const std::string& arch);

class TuningDb {
 public:
  static std::string default_dir();  // <DiskCache::default_dir()>/tuning
  explicit TuningDb(std::string dir, std::shared_ptr<RemoteCache> remote = nullptr);
  std::string path(const CacheKey& key) const;
  std::optional<TuningRecord> lookup(const CacheKey& key) const;
  Status save(const CacheKey& key, const TuningRecord& record) const;

 private:
  std::optional<TuningRecord> parse(const CacheKey& key, const std::string& text) const;
  std::string dir_;
  std::shared_ptr<RemoteCache> remote_;
};

}  // namespace fusejit
