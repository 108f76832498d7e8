// runtime/disk_cache_files.h — the POSIX file operations the disk cache needs:
// private directories, owner-checked reads, atomic writes, directory scans.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusejit/error.h"

namespace fusejit {

// mkdir -p with mode 0700 for every directory it creates; then checks that
// `dir` is a directory owned by the current user. A `dir` that group or others
// may write loses those bits (chmod; *note says so) or is refused.
Status make_private_dir(const std::string& dir, std::string* note = nullptr);

enum class ReadOutcome { Ok, Absent, Refused, Failed };

struct FileRead {
  ReadOutcome outcome = ReadOutcome::Failed;
  std::string bytes;
  struct stat info {};
  std::string problem;  // Refused / Failed: why
};

// Why a file the cache opened may not be used: "is not a regular file", "is
// owned by uid N, not by you (uid M)"; "" when it is a regular file of ours.
std::string private_file_problem(const struct stat& st);

// Reads a regular file owned by the current user, without following a final
// symlink: at most `limit` bytes (a longer file is read only up to `limit`
// when `head_only`, else it is Failed: "larger than ...").
FileRead read_private_file(const std::string& path, uint64_t limit, bool head_only = false);

// Writes `bytes` to a new temp file in `dir` (mode 0600), fsyncs it and renames
// it to `path`. Nothing is left behind on failure.
Status write_file_atomically(const std::string& dir, const std::string& path, const std::string& bytes);

// Sets the mtime (and atime) of `path` to now, if it is still the file `info`
// describes. Removes `path` under the same condition.
void touch_if_same(const std::string& path, const struct stat& info);
bool remove_if_same(const std::string& path, const struct stat& info);

struct DirEntry {
  std::string name;
  std::string path;
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
  uid_t owner = 0;
};

// Regular files in `dir` whose names end with `suffix` (or start with
// `prefix`, for the variant below).
std::vector<DirEntry> scan_dir(const std::string& dir, const std::string& suffix);
std::vector<DirEntry> scan_dir_prefix(const std::string& dir, const std::string& prefix);

int64_t now_unix_ns();
const char* temp_file_prefix();  // ".tmp-"

}  // namespace fusejit
