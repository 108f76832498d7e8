// runtime/disk_cache.cpp — DiskCache: load / store / evict / list / explain.
#include "runtime/disk_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "runtime/disk_cache_entry.h"
#include "runtime/disk_cache_files.h"
#include "runtime/file_lock.h"
#include "runtime/log.h"

namespace fusejit {
namespace {

constexpr const char* kEntrySuffix = ".entry";
constexpr int64_t kStaleTempNs = int64_t(3600) * 1000000000;  // a writer died an hour ago

// Files of ours only: entries and temp files another user owns are never
// loaded (read_private_file), counted, evicted nor cleared.
std::vector<DirEntry> mine(std::vector<DirEntry> files) {
  uid_t me = ::geteuid();
  files.erase(std::remove_if(files.begin(), files.end(), [me](const DirEntry& e) { return e.owner != me; }),
              files.end());
  return files;
}
std::vector<DirEntry> own_entries(const std::string& dir) { return mine(scan_dir(dir, kEntrySuffix)); }
std::vector<DirEntry> own_temps(const std::string& dir) { return mine(scan_dir_prefix(dir, temp_file_prefix())); }

std::mutex& warning_mutex() {
  static std::mutex m;
  return m;
}
CacheWarningSink& warning_sink() {
  static CacheWarningSink sink;
  return sink;
}

void warn(const std::string& message) {
  std::lock_guard<std::mutex> lock(warning_mutex());
  if (warning_sink()) warning_sink()(message);
  else log::warn(message.rfind("fusejit: ", 0) == 0 ? message.substr(9) : message);
}

// Warns about `topic` (a directory or a file) once per process.
void warn_once(const std::string& topic, const std::string& message) {
  static std::mutex m;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(m);
    if (!warned.insert(topic).second) return;
  }
  warn(message);
}

std::string home_dir() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  std::vector<char> buf(16384);
  passwd pw{}, *result = nullptr;
  if (getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &result) == 0 && result && pw.pw_dir)
    return pw.pw_dir;
  return "";
}

std::string strip_trailing_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

CacheWarningSink set_cache_warning_sink(CacheWarningSink sink) {
  std::lock_guard<std::mutex> lock(warning_mutex());
  std::swap(warning_sink(), sink);
  return sink;
}

void cache_warning(const std::string& message) { warn(message); }
void cache_warning_once(const std::string& topic, const std::string& message) { warn_once(topic, message); }

std::optional<uint64_t> parse_byte_size(const std::string& text) {
  size_t i = 0;
  uint64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    uint64_t digit = uint64_t(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB") shift = 40;
  else return std::nullopt;
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

// ---- DiskCache -------------------------------------------------------------

struct DiskCache::State {
  std::string dir;
  uint64_t max_bytes = 0;
  bool enabled = false;
  std::string disabled_reason;
  mutable std::mutex mutex;  // guards the fields below
  bool writes_failed = false;
  DiskCacheStats counters;
};

std::string DiskCache::default_dir() {
  if (const char* dir = std::getenv("FUSEJIT_CACHE_DIR"); dir && *dir) return strip_trailing_slashes(dir);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
    return strip_trailing_slashes(xdg) + "/fusejit";
  std::string home = home_dir();
  return home.empty() ? "" : strip_trailing_slashes(home) + "/.cache/fusejit";
}

DiskCache DiskCache::open_default(std::optional<uint64_t> max_bytes) {
  uint64_t bound = kDefaultMaxBytes;
  if (max_bytes) {
    bound = *max_bytes;
  } else if (const char* env = std::getenv("FUSEJIT_CACHE_MAX_BYTES"); env && *env) {
    if (auto parsed = parse_byte_size(env)) bound = *parsed;
    else
      warn_once("FUSEJIT_CACHE_MAX_BYTES",
                std::string("fusejit: ignoring FUSEJIT_CACHE_MAX_BYTES='") + env +
                    "' (expected a byte count, optionally with a K/M/G/T suffix); using 2G");
  }
  return DiskCache(default_dir(), bound);
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.dir = strip_trailing_slashes(std::move(dir));
  s.max_bytes = max_bytes;
  s.counters.dir = s.dir;
  s.counters.max_bytes = max_bytes;
  if (s.dir.empty()) {
    s.disabled_reason = "no cache directory (set FUSEJIT_CACHE_DIR or HOME)";
    warn_once("<no dir>", "fusejit: kernel cache disabled: " + s.disabled_reason);
    return;
  }
  if (max_bytes == 0) {
    s.disabled_reason = "the size bound is 0";
    return;
  }
  std::string note;
  if (Status made = make_private_dir(s.dir, &note); !made) {
    s.disabled_reason = made.error().message;
    warn_once(s.dir, "fusejit: kernel cache disabled: " + s.disabled_reason + "; compiling without it");
    return;
  }
  if (!note.empty()) warn_once(s.dir + " mode", "fusejit: kernel cache: " + note);
  s.enabled = true;
}

DiskCache::DiskCache(DiskCache&&) noexcept = default;
DiskCache& DiskCache::operator=(DiskCache&&) noexcept = default;
DiskCache::~DiskCache() = default;

bool DiskCache::enabled() const { return state_->enabled; }
const std::string& DiskCache::dir() const { return state_->dir; }
uint64_t DiskCache::max_bytes() const { return state_->max_bytes; }

std::string DiskCache::entry_path(const CacheKey& key) const {
  return state_->dir + "/" + key.digest() + kEntrySuffix;
}

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key) {
  State& s = *state_;
  auto count = [&](uint64_t DiskCacheStats::*field) {
    std::lock_guard<std::mutex> lock(s.mutex);
    ++(s.counters.*field);
  };
  if (!s.enabled) {
    count(&DiskCacheStats::misses);
    return std::nullopt;
  }
  std::string path = entry_path(key);
  FileRead file = read_private_file(path, s.max_bytes);
  if (file.outcome != ReadOutcome::Ok) {
    if (file.outcome == ReadOutcome::Refused) {
      count(&DiskCacheStats::refused);
      warn_once(path, "fusejit: kernel cache: ignoring '" + path + "': it " + file.problem);
    } else if (file.outcome == ReadOutcome::Failed) {
      warn_once(path, "fusejit: kernel cache: cannot read '" + path + "': " + file.problem);
    }
    count(&DiskCacheStats::misses);
    return std::nullopt;
  }
  auto entry = verify_entry(file.bytes);
  std::string problem = entry ? "" : entry.error().message;
  if (entry && !(entry->key == key)) problem = "its key parts differ from the requested key";
  if (!problem.empty()) {
    bool removed = remove_if_same(path, file.info);
    warn("fusejit: kernel cache: " + std::string(removed ? "removed" : "skipped") + " corrupt entry '" +
         path + "' (" + problem + "); recompiling");
    count(&DiskCacheStats::corrupt);
    count(&DiskCacheStats::misses);
    return std::nullopt;
  }
  touch_if_same(path, file.info);  // LRU: a hit is a use
  count(&DiskCacheStats::hits);
  return std::vector<char>(file.bytes.begin() + static_cast<std::ptrdiff_t>(entry->manifest_bytes),
                           file.bytes.end());
}

Status DiskCache::store(const CacheKey& key, const std::vector<char>& payload) {
  State& s = *state_;
  if (!s.enabled) return Error("kernel cache disabled: " + s.disabled_reason);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.writes_failed) return Error("kernel cache '" + s.dir + "' is not writable");
  }
  int64_t now_s = now_unix_ns() / 1000000000;
  auto bytes = encode_entry(key, std::string_view(payload.data(), payload.size()), now_s);
  if (!bytes) return bytes.error();
  if (bytes->size() > s.max_bytes)
    return Error("an entry of " + std::to_string(bytes->size()) + " bytes exceeds the cache bound of " +
                 std::to_string(s.max_bytes) + " bytes");
  if (Status written = write_file_atomically(s.dir, entry_path(key), *bytes); !written) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.writes_failed = true;
    }
    warn_once(s.dir, "fusejit: kernel cache: cannot write to '" + s.dir + "' (" + written.error().message +
                         "); compiling without caching");
    return written;
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.counters.stores;
  }
  evict_to_bound();
  return Status::success();
}

void DiskCache::evict_to_bound() {
  State& s = *state_;
  auto lock = FileLock::acquire(s.dir + "/.lock");  // one evictor at a time; best effort without
  int64_t now = now_unix_ns();
  for (const DirEntry& temp : own_temps(s.dir))
    if (now - temp.mtime_ns > kStaleTempNs) ::unlink(temp.path.c_str());

  std::vector<DirEntry> entries = own_entries(s.dir);
  uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  if (total <= s.max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });
  uint64_t evicted = 0;
  for (const auto& e : entries) {
    if (total <= s.max_bytes) break;
    if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) {
      total -= e.bytes;
      ++evicted;
    }
  }
  std::lock_guard<std::mutex> guard(s.mutex);
  s.counters.evictions += evicted;
}

Status DiskCache::remove(const CacheKey& key) {
  if (!state_->enabled) return Error("kernel cache disabled: " + state_->disabled_reason);
  std::string path = entry_path(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Error("cannot remove '" + path + "': " + std::strerror(errno));
  return Status::success();
}

Status DiskCache::clear() {
  State& s = *state_;
  if (!s.enabled) return Error("kernel cache disabled: " + s.disabled_reason);
  auto lock = FileLock::acquire(s.dir + "/.lock");
  std::string failures;
  int64_t now = now_unix_ns();
  std::vector<DirEntry> doomed = own_entries(s.dir);
  for (const DirEntry& temp : own_temps(s.dir))
    if (now - temp.mtime_ns > kStaleTempNs) doomed.push_back(temp);  // young ones are being written
  for (const DirEntry& e : doomed)
    if (::unlink(e.path.c_str()) != 0 && errno != ENOENT)
      failures += "\n  " + e.path + ": " + std::strerror(errno);
  if (!failures.empty()) return Error("could not remove every cache entry:" + failures);
  return Status::success();
}

DiskCacheStats DiskCache::stats() const {
  const State& s = *state_;
  DiskCacheStats out;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    out = s.counters;
  }
  out.enabled = s.enabled;
  out.disabled_reason = s.disabled_reason;
  if (s.enabled) {
    for (const DirEntry& e : own_entries(s.dir)) {
      ++out.entries;
      out.bytes += e.bytes;
    }
  }
  return out;
}

std::vector<CacheEntryInfo> DiskCache::list(bool verify) const {
  std::vector<CacheEntryInfo> out;
  if (!state_->enabled) return out;
  std::vector<DirEntry> entries = scan_dir(state_->dir, kEntrySuffix);
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.mtime_ns < b.mtime_ns; });
  for (const DirEntry& e : entries) {
    CacheEntryInfo info;
    info.digest = e.name.substr(0, e.name.size() - std::strlen(kEntrySuffix));
    info.path = e.path;
    info.file_bytes = e.bytes;
    info.last_used_unix = e.mtime_ns / 1000000000;
    FileRead file = verify ? read_private_file(e.path, state_->max_bytes)
                           : read_private_file(e.path, kMaxManifestBytes, /*head_only=*/true);
    if (file.outcome != ReadOutcome::Ok) {
      info.problem = file.outcome == ReadOutcome::Refused ? "it " + file.problem : file.problem;
      out.push_back(std::move(info));
      continue;
    }
    auto m = decode_manifest(file.bytes);
    if (!m) {
      info.problem = m.error().message;
    } else {
      info.key = m->key;
      info.created_unix = m->created_unix;
      info.payload_bytes = m->payload_bytes;
      if (m->digest != info.digest) info.problem = "file name does not match the digest in its manifest";
      else if (auto checked = verify ? verify_entry(file.bytes) : m; !checked) info.problem = checked.error().message;
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace fusejit
