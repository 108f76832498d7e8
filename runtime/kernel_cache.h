// runtime/kernel_cache.h — the in-memory cache of compiled kernels.
//
// OnceCache maps a key to a value built at most once: the first caller of a
// key builds it; callers arriving meanwhile wait on the same shared_future and
// get the same result. Failures are handed to every waiter but not kept, so a
// later call retries (an error may be transient, e.g. out of memory).
// Thread-safe. Counters: a miss starts a build, a hit reuses an entry (finished
// or still building), compiles counts builds run.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fusejit/engine.h"  // CacheStats
#include "fusejit/error.h"

namespace fusejit {

// Key = graph (its structural hash and argument names) + codegen config +
// exact NVRTC options + arch + device. Each field is length-prefixed, so no
// two field lists give the same key.
std::string kernel_cache_key(const std::string& graph_key, const std::string& codegen_config,
                             const std::vector<std::string>& nvrtc_options,
                             const std::string& arch, int device);

template <class V>
class OnceCache {
 public:
  using Builder = std::function<Expected<V>()>;

  Expected<V> get_or_build(const std::string& key, const Builder& build) {
    std::promise<Expected<V>> promise;
    std::shared_future<Expected<V>> future;
    uint64_t ticket = 0;  // nonzero: this call builds
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) {
        ++stats_.hits;
        future = it->second.future;
      } else {
        ++stats_.misses;
        ++stats_.compiles;
        ticket = ++next_ticket_;
        future = promise.get_future().share();
        entries_.emplace(key, Entry{future, ticket});
      }
    }
    if (!ticket) return future.get();

    Expected<V> result = run(build);
    promise.set_value(result);
    if (!result) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.failures;
      auto it = entries_.find(key);
      if (it != entries_.end() && it->second.ticket == ticket) entries_.erase(it);
    }
    return result;
  }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CacheStats s = stats_;
    s.entries = entries_.size();
    return s;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  static Expected<V> run(const Builder& build) {
    try {
      return build();
    } catch (const std::exception& e) {
      return Error(std::string("internal error while compiling: ") + e.what());
    }
  }

  struct Entry {
    std::shared_future<Expected<V>> future;
    uint64_t ticket;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  CacheStats stats_;
  uint64_t next_ticket_ = 0;
};

}  // namespace fusejit
