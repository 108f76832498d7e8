// runtime/remote_value.cpp — encode / verify signed remote cache values.
#include "runtime/remote_value.h"

#include "runtime/sha256.h"

#if FUSEJIT_HAVE_REDIS
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

namespace fusejit {
namespace {

constexpr std::string_view kMagic = "fusejit-remote 1\n";
constexpr size_t kMaxHeaderBytes = 1024;

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string signed_header(std::string_view kind, const CacheKey& key, std::string_view payload) {
  std::string h(kMagic);
  h += "kind: " + std::string(kind) + "\n";
  h += "digest: " + key.digest() + "\n";
  h += "payload-bytes: " + std::to_string(payload.size()) + "\n";
  h += "checksum-sha256: " + sha256_hex(payload) + "\n";
  return h;
}

#if FUSEJIT_HAVE_REDIS
// HMAC-SHA256 over header + payload, hex.
Expected<std::string> hmac_hex(const std::string& secret, const std::string& header, std::string_view payload) {
  std::string message = header;
  message.append(payload);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len))
    return Error("HMAC-SHA256 failed (libcrypto)");
  return to_hex(mac, len);
}
#else
Expected<std::string> hmac_hex(const std::string&, const std::string&, std::string_view) {
  return Error("the remote cache tier is not built in");
}
#endif

bool equal_constant_time(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Expected<std::string> encode_remote_value(std::string_view kind, const CacheKey& key, std::string_view payload,
                                          const std::string& secret) {
  std::string header = signed_header(kind, key, payload);
  auto mac = hmac_hex(secret, header, payload);
  if (!mac) return mac.error();
  std::string value = header + "hmac-sha256: " + *mac + "\n\n";
  value.append(payload);
  return value;
}

Expected<std::string> verify_remote_value(std::string_view kind, const CacheKey& key, std::string_view value,
                                          const std::string& secret) {
  size_t end = value.substr(0, kMaxHeaderBytes).find("\n\n");
  if (value.substr(0, kMagic.size()) != kMagic || end == std::string_view::npos)
    return Error("not a fusejit remote cache value (bad header)");
  size_t mac_line = value.rfind("hmac-sha256: ", end);
  if (mac_line == std::string_view::npos) return Error("no hmac-sha256 line");
  std::string header(value.substr(0, mac_line));
  std::string mac(value.substr(mac_line + 13, end - mac_line - 13));
  std::string_view payload = value.substr(end + 2);
  // The header a writer of this kind, key and payload would have written.
  if (header != signed_header(kind, key, payload)) {
    std::string expect_start = std::string(kMagic) + "kind: " + std::string(kind) + "\ndigest: " + key.digest() + "\n";
    if (header.compare(0, expect_start.size(), expect_start) != 0) return Error("value is for another key or kind");
    return Error("payload length or checksum mismatch (damaged value)");
  }
  auto expected_mac = hmac_hex(secret, header, payload);
  if (!expected_mac) return expected_mac.error();
  if (!equal_constant_time(mac, *expected_mac))
    return Error("HMAC mismatch: signed with another secret, or tampered with");
  return std::string(payload);
}

}  // namespace fusejit
