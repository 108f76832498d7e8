// Shared helpers for the disk cache tests: a scratch directory and a warning
// capture.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/disk_cache.h"

namespace fusejit::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/fusejit-disk-cache-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data())) path_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& child) const { return path_ + "/" + child; }

 private:
  std::string path_;
};

// Collects cache warnings for its lifetime instead of printing them.
class WarningCapture {
 public:
  WarningCapture() {
    previous_ = set_cache_warning_sink([this](const std::string& w) {
      std::lock_guard<std::mutex> lock(mutex_);
      warnings_.push_back(w);
    });
  }
  ~WarningCapture() { set_cache_warning_sink(previous_); }
  std::vector<std::string> warnings() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return warnings_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> warnings_;
  CacheWarningSink previous_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A payload that depends on `seed` in every byte (stands in for a CUBIN).
inline std::vector<char> fake_cubin(uint32_t seed, size_t size) {
  std::vector<char> out(size);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return out;
}

inline CacheKey simple_key(const std::string& graph, const std::string& nvrtc = "13.0") {
  CacheKey k;
  k.add("graph", graph);
  k.add("config", "");
  k.add("nvrtc", nvrtc);
  k.add("arch", "sm_90a");
  return k;
}

}  // namespace fusejit::testing
