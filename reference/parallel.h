// A small parallel-for over [0, n) with std::thread and dynamic chunks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace fusejit::ref {

inline int thread_count(int requested) {
  if (requested > 0) return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

// Calls body(worker, begin, end) for chunks of at most `grain` items;
// `worker` is in [0, threads) and the same worker never runs two chunks at once.
template <class Body>
void parallel_chunks(int64_t n, int64_t grain, int threads, Body&& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = (n + grain - 1) / grain;
  int workers = static_cast<int>(std::min<int64_t>(threads, chunks));
  if (workers <= 1) {
    for (int64_t b = 0; b < n; b += grain) body(0, b, std::min(n, b + grain));
    return;
  }
  std::atomic<int64_t> next{0};
  auto run = [&](int worker) {
    for (;;) {
      int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      int64_t b = c * grain;
      body(worker, b, std::min(n, b + grain));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (auto& t : pool) t.join();
}

// Grain that gives each thread several chunks (load balance) of at least `min_grain`.
inline int64_t balanced_grain(int64_t n, int threads, int64_t min_grain) {
  return std::max<int64_t>(min_grain, n / (int64_t{threads} * 8) + 1);
}

}  // namespace fusejit::ref
