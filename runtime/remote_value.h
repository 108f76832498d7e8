// runtime/remote_value.h — the bytes of one remote cache value: a signed
// header, a blank line, then the payload (a CUBIN or a tuning record).
//
//   fusejit-remote 1
//   kind: cubin                      (or "tuning")
//   digest: <the key's 64-hex digest>
//   payload-bytes: 123456
//   checksum-sha256: <SHA-256 of the payload>
//   hmac-sha256: <HMAC-SHA256(secret, every header byte above this line + payload)>
//   <empty line>
//   <payload>
//
// The digest binds the value to its key, the HMAC to the shared secret: a
// value from someone without the secret, or one damaged in transit or at
// rest, is refused. HMAC through OpenSSL's libcrypto (only in builds with the
// remote tier; elsewhere both calls return an Error).
#pragma once

#include <string>
#include <string_view>

#include "fusejit/error.h"
#include "runtime/disk_cache_key.h"

namespace fusejit {

Expected<std::string> encode_remote_value(std::string_view kind, const CacheKey& key, std::string_view payload,
                                          const std::string& secret);

// The payload, or an Error saying why the value is refused (malformed, for
// another key or kind, damaged, or signed with another secret).
Expected<std::string> verify_remote_value(std::string_view kind, const CacheKey& key, std::string_view value,
                                          const std::string& secret);

}  // namespace fusejit
