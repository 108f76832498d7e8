// runtime/disk_cache_entry.cpp — encode / decode / verify cache entries.
#include "runtime/disk_cache_entry.h"

#include <charconv>
#include <ctime>

#include "runtime/sha256.h"

namespace fusejit {
namespace {

constexpr std::string_view kMagic = "fusejit-cache-entry 1";
constexpr std::string_view kKeyPrefix = "key.";
constexpr std::string_view kChecksumLabel = "checksum-sha256: ";

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

bool unescape(std::string_view text, std::string& out) {
  out.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) return false;
    if (text[i] == '\\') out += '\\';
    else if (text[i] == 'n') out += '\n';
    else if (text[i] == 'r') out += '\r';
    else return false;
  }
  return true;
}

template <class Int>
bool parse_int(std::string_view text, Int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Error bad(const std::string& what) { return Error("not a valid cache entry: " + what); }

}  // namespace

std::string iso_utc(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "?";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Expected<std::string> encode_entry(const CacheKey& key, std::string_view payload, int64_t created_unix) {
  std::string text;
  text += kMagic;
  text += "\ndigest: " + key.digest() + "\n";
  for (const auto& [name, value] : key.parts) {
    if (!valid_name(name)) return Error("invalid cache key part name '" + escape(name) + "'");
    text += std::string(kKeyPrefix) + name + ": " + escape(value) + "\n";
  }
  text += "created: " + iso_utc(created_unix) + " " + std::to_string(created_unix) + "\n";
  text += "payload-bytes: " + std::to_string(payload.size()) + "\n";
  Sha256 h;
  h.update(text);
  h.update(payload);
  text += std::string(kChecksumLabel) + h.finish_hex() + "\n\n";
  text.append(payload.data(), payload.size());
  return text;
}

Expected<EntryManifest> decode_manifest(std::string_view bytes) {
  size_t end = bytes.substr(0, kMaxManifestBytes).find("\n\n");
  if (end == std::string_view::npos) return bad("no end of manifest");
  EntryManifest m;
  m.manifest_bytes = end + 2;
  std::string_view text = bytes.substr(0, end + 1);  // every line ends with '\n'
  bool magic = false, have_created = false, have_size = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!magic) {
      if (line != kMagic) return bad("unknown header '" + escape(line.substr(0, 40)) + "'");
      magic = true;
      continue;
    }
    if (!m.checksum.empty()) return bad("text after the checksum");
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos) return bad("malformed line '" + escape(line.substr(0, 40)) + "'");
    std::string_view label = line.substr(0, colon), value = line.substr(colon + 2);
    if (label.substr(0, kKeyPrefix.size()) == kKeyPrefix) {
      std::string name(label.substr(kKeyPrefix.size())), decoded;
      if (!valid_name(name) || !unescape(value, decoded)) return bad("malformed key part '" + name + "'");
      m.key.add(std::move(name), std::move(decoded));
    } else if (label == "digest") {
      if (!is_hex64(value)) return bad("malformed digest");
      m.digest = value;
    } else if (label == "created") {
      size_t space = value.rfind(' ');
      if (space == std::string_view::npos || !parse_int(value.substr(space + 1), m.created_unix))
        return bad("malformed creation time");
      have_created = true;
    } else if (label == "payload-bytes") {
      if (!parse_int(value, m.payload_bytes)) return bad("malformed payload size");
      have_size = true;
    } else if (label == "checksum-sha256") {
      if (!is_hex64(value)) return bad("malformed checksum");
      m.checksum = value;
    } else {
      return bad("unknown field '" + escape(label.substr(0, 40)) + "'");
    }
  }
  if (!magic || m.digest.empty() || !have_created || !have_size || m.checksum.empty())
    return bad("incomplete manifest");
  return m;
}

Expected<EntryManifest> verify_entry(std::string_view bytes) {
  auto m = decode_manifest(bytes);
  if (!m) return m;
  if (m->key.digest() != m->digest) return bad("key parts do not match the digest");
  uint64_t have = bytes.size() - m->manifest_bytes;
  if (have != m->payload_bytes)
    return bad("payload is " + std::to_string(have) + " bytes, manifest says " +
               std::to_string(m->payload_bytes) + " (truncated?)");
  // The checksum line is the manifest's last: "checksum-sha256: <64>\n\n".
  size_t checksum_line = m->manifest_bytes - 1 - (kChecksumLabel.size() + 64 + 1);
  Sha256 h;
  h.update(bytes.substr(0, checksum_line));
  h.update(bytes.substr(m->manifest_bytes));
  if (h.finish_hex() != m->checksum) return bad("checksum mismatch");
  return m;
}

}  // namespace fusejit
