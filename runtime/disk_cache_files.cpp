// runtime/disk_cache_files.cpp — POSIX helpers for the disk cache.
#include "runtime/disk_cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace fusejit {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

int64_t mtime_ns(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

template <class Match>
std::vector<DirEntry> scan(const std::string& dir, Match match) {
  std::vector<DirEntry> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (!match(name)) continue;
    std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({name, path, static_cast<uint64_t>(st.st_size), mtime_ns(st), st.st_uid});
  }
  ::closedir(d);
  return out;
}

}  // namespace

const char* temp_file_prefix() { return ".tmp-"; }

int64_t now_unix_ns() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
}

Status make_private_dir(const std::string& dir, std::string* note) {
  if (dir.empty()) return Error("empty directory name");
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos < dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    struct stat existing {};
    if (::stat(prefix.c_str(), &existing) == 0) continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return Error("cannot create '" + prefix + "': " + errno_text(errno));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Error("cannot create '" + dir + "': " + errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return Error("'" + dir + "' is not a directory");
  if (st.st_uid != ::geteuid())
    return Error("'" + dir + "' is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " +
                 std::to_string(::geteuid()) + ")");
  // Others could plant or replace entries (CUBINs run on the GPU): take their
  // write permission away, or refuse the directory if that fails.
  mode_t mode = st.st_mode & 07777;
  if (mode & (S_IWGRP | S_IWOTH)) {
    mode_t fixed = mode & ~mode_t(S_IWGRP | S_IWOTH);
    char text[64];
    std::snprintf(text, sizeof text, "%04o to %04o", unsigned(mode), unsigned(fixed));
    if (::chmod(dir.c_str(), fixed) != 0)
      return Error("'" + dir + "' is writable by others (mode " + text + " failed: " + errno_text(errno) + ")");
    if (note) *note = "'" + dir + "' was writable by others: changed its mode from " + text;
  }
  return Status::success();
}

std::string private_file_problem(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (st.st_uid != ::geteuid())
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(::geteuid()) + ")";
  return "";
}

FileRead read_private_file(const std::string& path, uint64_t limit, bool head_only) {
  FileRead r;
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    int err = errno;
    r.outcome = err == ENOENT ? ReadOutcome::Absent : err == ELOOP ? ReadOutcome::Refused : ReadOutcome::Failed;
    r.problem = err == ELOOP ? "is a symbolic link" : errno_text(err);
    return r;
  }
  if (::fstat(f.fd, &r.info) != 0) {
    r.problem = errno_text(errno);
    return r;
  }
  if (std::string problem = private_file_problem(r.info); !problem.empty()) {
    r.outcome = ReadOutcome::Refused;
    r.problem = std::move(problem);
    return r;
  }
  uint64_t size = static_cast<uint64_t>(r.info.st_size);
  if (size > limit && !head_only) {
    r.problem = "is larger than " + std::to_string(limit) + " bytes";
    return r;
  }
  r.bytes.resize(std::min(size, limit));
  size_t got = 0;
  while (got < r.bytes.size()) {
    ssize_t n = ::read(f.fd, r.bytes.data() + got, r.bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.problem = errno_text(errno);
      return r;
    }
    if (n == 0) break;  // shrank meanwhile (cannot happen to a renamed-in entry)
    got += static_cast<size_t>(n);
  }
  r.bytes.resize(got);
  r.outcome = ReadOutcome::Ok;
  return r;
}

Status write_file_atomically(const std::string& dir, const std::string& path, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  std::string temp;
  Fd f;
  for (int attempt = 0; attempt < 8 && f.fd < 0; ++attempt) {
    temp = dir + "/" + temp_file_prefix() + std::to_string(::getpid()) + "-" +
           std::to_string(counter.fetch_add(1)) + "-" + std::to_string(now_unix_ns() % 1000000007);
    f.fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f.fd < 0 && errno != EEXIST) break;
  }
  if (f.fd < 0) return Error("cannot create a file in '" + dir + "': " + errno_text(errno));
  std::string failure;
  if (!write_all(f.fd, bytes.data(), bytes.size())) failure = "write";
  else if (::fsync(f.fd) != 0) failure = "fsync";
  int err = errno;
  int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0 && failure.empty()) {
    failure = "close";
    err = errno;
  }
  if (failure.empty() && ::rename(temp.c_str(), path.c_str()) != 0) {
    failure = "rename";
    err = errno;
  }
  if (failure.empty()) return Status::success();
  ::unlink(temp.c_str());
  return Error(failure + " of '" + temp + "' failed: " + errno_text(err));
}

void touch_if_same(const std::string& path, const struct stat& info) {
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)};
  struct stat now {};
  if (f.fd >= 0 && ::fstat(f.fd, &now) == 0 && same_file(now, info)) ::futimens(f.fd, nullptr);
}

bool remove_if_same(const std::string& path, const struct stat& info) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0 || !same_file(now, info)) return false;
  return ::unlink(path.c_str()) == 0;
}

std::vector<DirEntry> scan_dir(const std::string& dir, const std::string& suffix) {
  return scan(dir, [&](const std::string& name) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           name[0] != '.';
  });
}

std::vector<DirEntry> scan_dir_prefix(const std::string& dir, const std::string& prefix) {
  return scan(dir, [&](const std::string& name) { return name.compare(0, prefix.size(), prefix) == 0; });
}

}  // namespace fusejit
