// runtime/disk_cache_entry.h — the bytes of one on-disk cache entry.
//
// An entry is a text manifest, a blank line, then the payload (a CUBIN):
//
//   fusejit-cache-entry 1
//   digest: <the key's 64-hex digest; the file is named <digest>.entry>
//   key.graph: 1f2e3d4c5b6a7988
//   key.nvrtc: 13.0
//   ...                                  (every key part, in order)
//   created: 2025-01-02T03:04:05Z 1735787045
//   payload-bytes: 123456
//   checksum-sha256: <SHA-256 of every byte above this line, then the payload>
//   <empty line>
//   <payload>
//
// Values escape '\' as "\\", newline as "\n" and carriage return as "\r".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusejit/error.h"
#include "runtime/disk_cache_key.h"

namespace fusejit {

struct EntryManifest {
  std::string digest;     // as written (check it against key.digest())
  CacheKey key;
  int64_t created_unix = 0;
  uint64_t payload_bytes = 0;
  std::string checksum;   // hex
  size_t manifest_bytes = 0;  // where the payload starts
};

// The manifest is at most this long; anything longer is not an entry.
constexpr size_t kMaxManifestBytes = 64 * 1024;

// Errors: key part names must be non-empty [A-Za-z0-9_.-].
Expected<std::string> encode_entry(const CacheKey& key, std::string_view payload, int64_t created_unix);

// Parses the manifest at the start of `bytes` (the payload may be missing:
// list() reads only a file's head). Checks nothing beyond the syntax.
Expected<EntryManifest> decode_manifest(std::string_view bytes);

// Parses a whole entry and verifies it: digest matches the key parts, payload
// length and checksum. The payload is the returned view's tail.
Expected<EntryManifest> verify_entry(std::string_view bytes);

std::string iso_utc(int64_t unix_seconds);  // "2025-01-02T03:04:05Z"

}  // namespace fusejit
