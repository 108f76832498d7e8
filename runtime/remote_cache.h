// runtime/remote_cache.h — the remote cache tier: CUBINs and tuning records
// in Redis (through hiredis), shared by every machine that has the secret.
//
//   FUSEJIT_REMOTE_CACHE=redis://host:port/db   FUSEJIT_REMOTE_CACHE_SECRET=...
//
// It sits behind the disk cache (runtime/cache_tiers.h): read on a local
// miss, written after a compile or a tuning run, under the disk cache's
// content key (Redis key "fusejit:v1:<kind>:<digest>"). Values are signed
// (runtime/remote_value.h); a value that fails verification is refused with a
// warning and never returned. Every call is bounded by the connect and I/O
// timeouts (50 ms each by default); after `max_failures` failures in a row
// the tier switches itself off for the rest of the process (one warning) and
// every call returns at once. Nothing here fails a compile. Thread-safe (one
// connection, one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fusejit/error.h"
#include "runtime/disk_cache_key.h"

namespace fusejit {

struct RemoteCacheConfig {
  std::string url;  // as given
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string secret;
  int connect_timeout_ms = 50;  // FUSEJIT_REMOTE_CACHE_TIMEOUT_MS sets both
  int io_timeout_ms = 50;
  int max_failures = 3;         // FUSEJIT_REMOTE_CACHE_MAX_FAILURES
};

// "redis://host[:port][/db]" (port 6379, db 0 by default).
Expected<RemoteCacheConfig> parse_remote_cache_url(const std::string& url);

struct RemoteCacheStats {
  std::string url;
  bool enabled = false;          // false once the circuit breaker tripped
  std::string disabled_reason;
  // Counted by this object:
  uint64_t hits = 0, misses = 0, stores = 0, refused = 0, errors = 0;
};

class RemoteCache {
 public:
  static constexpr std::string_view kCubin = "cubin";
  static constexpr std::string_view kTuning = "tuning";

  static bool built_in();  // false when built without hiredis / libcrypto
  // From the environment; nullptr when FUSEJIT_REMOTE_CACHE is unset or
  // empty, and, with one warning, when the URL is malformed, the secret is
  // missing or the tier is not built in.
  static std::shared_ptr<RemoteCache> from_env();
  // from_env(), once per process (shared by every Engine and TuningDb).
  static std::shared_ptr<RemoteCache> process_default();

  explicit RemoteCache(RemoteCacheConfig config);  // connects lazily
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  // The verified payload; nullopt on a miss, a refused value or any failure.
  std::optional<std::string> get(std::string_view kind, const CacheKey& key);
  // Signs and writes; an Error is informational (it has warned if needed).
  Status put(std::string_view kind, const CacheKey& key, std::string_view payload);

  RemoteCacheStats stats() const;
  // Counters every client adds to the hash "fusejit:v1:stats" (hits, misses,
  // stores, refused) and the number of keys in the database; an Error when
  // the server cannot be reached.
  Expected<std::vector<std::pair<std::string, std::string>>> server_stats();
  static std::string redis_key(std::string_view kind, const CacheKey& key);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusejit
