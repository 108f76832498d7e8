// runtime/cache_counters.h — hits and misses of the memory and disk tiers,
// summed over every process that used one cache directory.
//
//   CacheCounters counters(disk.dir());
//   (void)counters.add({memory_hits, memory_misses, disk_hits, disk_misses});  // an Engine, when destroyed
//   auto totals = counters.read();                                             // `fusejit cache stats`
//   (void)counters.reset();                                                    // `fusejit cache clear`
//
// The file <dir>/.counters holds one line per process (or Engine), appended
// with O_APPEND in a single write():
//
//   v1 memory_hits=3 memory_misses=1 disk_hits=2 disk_misses=1
//
// read() sums the well-formed lines and counts the others (torn, malformed)
// as ignored. Every access holds a flock on <dir>/.counters.lock (never
// replaced): appenders a shared one; read(), reset() and compaction (when an
// append leaves the file over `compact_bytes`: the lines summed into one,
// written to a temp file and renamed over it) an exclusive one, so no line is
// read half-written, lost or counted twice. Both files are 0600; one owned by
// another user, a symlink or anything but a regular file is never read,
// written nor removed (an Error says why). Thread-safe and multi-process safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fusejit/error.h"

namespace fusejit {

struct TierCounts {
  uint64_t memory_hits = 0, memory_misses = 0, disk_hits = 0, disk_misses = 0;
  bool any() const { return memory_hits || memory_misses || disk_hits || disk_misses; }
  TierCounts& operator+=(const TierCounts& other);  // saturating
  bool operator==(const TierCounts&) const = default;
};

struct CounterTotals {
  TierCounts counts;     // the sum of the well-formed lines
  uint64_t lines = 0;    // well-formed lines summed
  uint64_t ignored = 0;  // malformed or torn lines (not summed)
};

class CacheCounters {
 public:
  static constexpr const char* kFileName = ".counters";
  static constexpr uint64_t kCompactBytes = 64 << 10;

  explicit CacheCounters(std::string dir, uint64_t compact_bytes = kCompactBytes);
  const std::string& path() const { return path_; }

  // Appends one line (nothing when !counts.any()), then compacts the file if
  // it is larger than compact_bytes. A directory that cannot be written
  // (permissions, read-only or full file system) or is gone is skipped:
  // success, nothing recorded, as the disk cache does without a warning of its own.
  Status add(const TierCounts& counts);
  // The totals since the last reset; an absent file reads as zeros. Creates
  // the lock file if it can (without one, in a directory that cannot be
  // written, reads unlocked: nobody can append there either).
  Expected<CounterTotals> read() const;
  // Removes the file (absent is fine).
  Status reset();

  // One line, "v1 memory_hits=... disk_misses=...\n", and its parser (nullopt:
  // malformed; the line is given without its newline).
  static std::string format_line(const TierCounts& counts);
  static std::optional<TierCounts> parse_line(std::string_view line);

 private:
  Status compact();
  std::string dir_, path_, lock_path_;
  uint64_t compact_bytes_;
};

}  // namespace fusejit
