// runtime/cache_counters.cpp — CacheCounters: the per-process lines of
// <dir>/.counters, appended, summed, compacted and reset.
#include "runtime/cache_counters.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "runtime/disk_cache_files.h"
#include "runtime/log.h"

namespace fusejit {
namespace {

constexpr uint64_t kMaxReadBytes = uint64_t(16) << 20;  // compaction keeps the file near compact_bytes

struct Field {
  const char* name;
  uint64_t TierCounts::*member;
};
constexpr Field kFields[] = {{"memory_hits", &TierCounts::memory_hits},
                             {"memory_misses", &TierCounts::memory_misses},
                             {"disk_hits", &TierCounts::disk_hits},
                             {"disk_misses", &TierCounts::disk_misses}};
constexpr unsigned kAllFields = (1u << (sizeof kFields / sizeof kFields[0])) - 1;

// Closes a descriptor on scope exit (releasing its flock).
struct Fd {
  int fd = -1;
  int open_errno = 0;  // why open() failed
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A directory we may not write, a full file system, or no directory: skipped.
bool unwritable(int err) {
  return err == EACCES || err == EPERM || err == EROFS || err == ENOSPC || err == EDQUOT || err == ENOENT;
}

// Opens `path` and checks that it is a regular file of ours. Success with
// f.fd < 0: absent (f.open_errno is ENOENT).
Status open_private(const std::string& path, int flags, Fd& f) {
  f.fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (f.fd < 0) {
    int err = f.open_errno = errno;
    if (err == ENOENT) return Status::success();
    if (err == ELOOP) return Error("ignoring '" + path + "': it is a symbolic link");
    return Error("cannot open '" + path + "': " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return Error("cannot stat '" + path + "': " + std::strerror(errno));
  if (std::string problem = private_file_problem(st); !problem.empty())
    return Error("ignoring '" + path + "': it " + problem);
  return Status::success();
}

// The flock every access to the counters takes, on <dir>/.counters.lock (a
// file that is never replaced, unlike the counters file): shared to append,
// exclusive to read, compact or reset. Success with fd < 0: the lock file
// could not be created (f.open_errno says why).
Status lock_counters(const std::string& lock_path, int op, Fd& f) {
  Status opened = open_private(lock_path, O_RDWR | O_CREAT, f);
  if (!opened || f.fd < 0) {
    if (f.fd < 0 && unwritable(f.open_errno)) return Status::success();
    return opened;
  }
  while (::flock(f.fd, op) != 0)
    if (errno != EINTR) return Error("cannot lock '" + lock_path + "': " + std::strerror(errno));
  return Status::success();
}

Expected<std::string> read_all(const std::string& path, int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error("cannot stat '" + path + "': " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) > kMaxReadBytes)
    return Error("'" + path + "' is larger than " + std::to_string(kMaxReadBytes) + " bytes");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

// Sums the well-formed lines; a last line without its newline is torn.
CounterTotals sum_lines(std::string_view text) {
  CounterTotals t;
  while (!text.empty()) {
    size_t end = text.find('\n');
    if (end == std::string_view::npos) {
      ++t.ignored;
      break;
    }
    if (auto c = CacheCounters::parse_line(text.substr(0, end))) {
      t.counts += *c;
      ++t.lines;
    } else {
      ++t.ignored;
    }
    text.remove_prefix(end + 1);
  }
  return t;
}

}  // namespace

TierCounts& TierCounts::operator+=(const TierCounts& other) {
  for (const Field& f : kFields) {
    uint64_t& mine = this->*f.member;
    uint64_t theirs = other.*f.member;
    mine = mine > UINT64_MAX - theirs ? UINT64_MAX : mine + theirs;
  }
  return *this;
}

CacheCounters::CacheCounters(std::string dir, uint64_t compact_bytes)
    : dir_(std::move(dir)),
      path_(dir_ + "/" + kFileName),
      lock_path_(path_ + ".lock"),
      compact_bytes_(compact_bytes) {}

std::string CacheCounters::format_line(const TierCounts& c) {
  std::string line = "v1";
  for (const Field& f : kFields) line += std::string(" ") + f.name + "=" + std::to_string(c.*f.member);
  return line + "\n";
}

std::optional<TierCounts> CacheCounters::parse_line(std::string_view line) {
  if (line.substr(0, 3) != "v1 ") return std::nullopt;
  line.remove_prefix(3);
  TierCounts c;
  unsigned seen = 0;
  while (true) {
    size_t space = line.find(' ');
    std::string_view word = line.substr(0, space);
    size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq + 1 == word.size()) return std::nullopt;
    std::string_view name = word.substr(0, eq), digits = word.substr(eq + 1);
    unsigned i = 0;
    while (i < sizeof kFields / sizeof kFields[0] && name != kFields[i].name) ++i;
    if (i == sizeof kFields / sizeof kFields[0] || (seen & (1u << i))) return std::nullopt;
    uint64_t value = 0;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return std::nullopt;
      uint64_t digit = uint64_t(ch - '0');
      if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
      value = value * 10 + digit;
    }
    c.*kFields[i].member = value;
    seen |= 1u << i;
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  if (seen != kAllFields) return std::nullopt;
  return c;
}

Status CacheCounters::add(const TierCounts& counts) {
  if (!counts.any()) return Status::success();
  const std::string line = format_line(counts);
  uint64_t size = 0;
  {
    Fd lock;  // shared: appenders run together; a compaction, read or reset waits for them
    if (Status locked = lock_counters(lock_path_, LOCK_SH, lock); !locked) return locked;
    if (lock.fd < 0) {
      log::debug("cache counters not recorded: cannot create '" + lock_path_ + "': " + std::strerror(lock.open_errno));
      return Status::success();
    }
    Fd f;
    Status opened = open_private(path_, O_WRONLY | O_APPEND | O_CREAT, f);
    if (f.fd < 0 && (opened.ok() || unwritable(f.open_errno))) {
      log::debug("cache counters not recorded: cannot create '" + path_ + "': " + std::strerror(f.open_errno));
      return Status::success();
    }
    if (!opened) return opened;
    ssize_t n;
    do n = ::write(f.fd, line.data(), line.size());  // O_APPEND: one write, one whole line
    while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(line.size())) {
      int err = errno;
      if (n > 0) (void)!::write(f.fd, "\n", 1);  // end the torn line, so it alone is ignored
      if (n < 0 && unwritable(err)) {
        log::debug("cache counters not recorded: '" + path_ + "': " + std::strerror(err));
        return Status::success();
      }
      return Error("cannot append to '" + path_ + "': " + (n < 0 ? std::strerror(err) : "short write"));
    }
    struct stat st {};
    if (::fstat(f.fd, &st) == 0) size = static_cast<uint64_t>(st.st_size);
  }
  return size > compact_bytes_ ? compact() : Status::success();
}

Status CacheCounters::compact() {
  Fd lock;  // exclusive: no append is under way
  if (Status locked = lock_counters(lock_path_, LOCK_EX, lock); !locked || lock.fd < 0) return locked;
  Fd f;
  if (Status opened = open_private(path_, O_RDONLY, f); !opened || f.fd < 0) return opened;
  auto text = read_all(path_, f.fd);
  if (!text) return text.error();
  if (text->size() <= compact_bytes_) return Status::success();  // another process compacted it
  CounterTotals totals = sum_lines(*text);
  Status written = write_file_atomically(dir_, path_, totals.counts.any() ? format_line(totals.counts) : "");
  if (!written) return Error("cannot compact '" + path_ + "': " + written.error().message);
  return Status::success();
}

Expected<CounterTotals> CacheCounters::read() const {
  Fd lock;  // exclusive: no line is read half-appended. None (a directory we
            // cannot write): nobody can append either.
  if (Status locked = lock_counters(lock_path_, LOCK_EX, lock); !locked) return locked.error();
  Fd f;
  if (Status opened = open_private(path_, O_RDONLY, f); !opened) return opened.error();
  if (f.fd < 0) return CounterTotals{};
  auto text = read_all(path_, f.fd);
  if (!text) return text.error();
  return sum_lines(*text);
}

Status CacheCounters::reset() {
  Fd lock;
  if (Status locked = lock_counters(lock_path_, LOCK_EX, lock); !locked) return locked;
  Fd f;  // only a regular file of ours is removed
  if (Status opened = open_private(path_, O_RDONLY, f); !opened || f.fd < 0) return opened;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT)
    return Error("cannot remove '" + path_ + "': " + std::strerror(errno));
  return Status::success();
}

}  // namespace fusejit
