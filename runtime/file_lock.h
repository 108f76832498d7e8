// runtime/file_lock.h — an exclusive advisory lock on a file (flock), held for
// the object's lifetime. Serializes cache maintenance (eviction, clear) across
// processes; entry reads and writes never take it (they rely on atomic rename).
#pragma once

#include <string>

#include "fusejit/error.h"

namespace fusejit {

class FileLock {
 public:
  // Creates `path` (mode 0600) if needed and blocks until the lock is held.
  static Expected<FileLock> acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace fusejit
