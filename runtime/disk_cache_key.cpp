// runtime/disk_cache_key.cpp — CacheKey digest, differences, and the CUBIN key.
#include "runtime/disk_cache_key.h"

#include <algorithm>

#include "runtime/embedded_templates.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/sha256.h"

#ifndef FUSEJIT_VERSION
#define FUSEJIT_VERSION "unknown"
#endif

namespace fusejit {
namespace {

constexpr int kCodegenRevision = 1;
constexpr std::string_view kDigestTag = "fusejit-cache-key-v1";

void add_field(Sha256& h, std::string_view field) {
  std::string length = std::to_string(field.size()) + ":";
  h.update(length);
  h.update(field);
}

std::string shown(const std::string* value) {
  if (!value) return "(none)";
  if (value->empty()) return "''";
  return *value;
}

// Shortens a long value to a window around `at` (the first differing byte).
std::string window(const std::string& text, size_t at) {
  constexpr size_t kMax = 80, kBefore = 20;
  if (text.size() <= kMax) return text;
  size_t start = at > kBefore ? at - kBefore : 0;
  start = std::min(start, text.size() - (kMax - 6));
  std::string out = (start ? "..." : "") + text.substr(start, kMax - 6);
  if (start + (kMax - 6) < text.size()) out += "...";
  return out;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= text.size();) {
    size_t space = std::min(text.find(' ', pos), text.size());
    if (space > pos) out.push_back(text.substr(pos, space - pos));
    pos = space + 1;
  }
  return out;
}

// The words of `a` missing from `b`, joined by spaces.
std::string missing_words(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::string out;
  for (const auto& w : a)
    if (std::find(b.begin(), b.end(), w) == b.end()) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string difference_line(const std::string& name, const std::string* from, const std::string* to) {
  if (from && to && from->find(' ') != std::string::npos && to->find(' ') != std::string::npos) {
    // Word lists (e.g. options): name only the words that changed.
    auto a = words(*from), b = words(*to);
    std::string removed = missing_words(a, b), added = missing_words(b, a);
    bool small = removed.size() + added.size() <= 160;
    if (small && (!removed.empty() || !added.empty()))
      return name + ": " + (removed.empty() ? "(none)" : removed) + " -> " + (added.empty() ? "(none)" : added);
  }
  if (from && to) {
    size_t at = 0;
    while (at < from->size() && at < to->size() && (*from)[at] == (*to)[at]) ++at;
    return name + ": " + (from->empty() ? "''" : window(*from, at)) + " -> " +
           (to->empty() ? "''" : window(*to, at));
  }
  return name + ": " + shown(from) + " -> " + shown(to);
}

}  // namespace

const std::string* CacheKey::find(std::string_view name) const {
  for (const auto& [n, v] : parts)
    if (n == name) return &v;
  return nullptr;
}

std::string CacheKey::digest() const {
  Sha256 h;
  add_field(h, kDigestTag);
  add_field(h, std::to_string(parts.size()));
  for (const auto& [name, value] : parts) {
    add_field(h, name);
    add_field(h, value);
  }
  return h.finish_hex();
}

std::vector<std::string> key_differences(const CacheKey& from, const CacheKey& to) {
  std::vector<std::string> lines;
  for (const auto& [name, value] : from.parts) {
    const std::string* other = to.find(name);
    if (!other || *other != value) lines.push_back(difference_line(name, &value, other));
  }
  for (const auto& [name, value] : to.parts)
    if (!from.find(name)) lines.push_back(difference_line(name, nullptr, &value));
  return lines;
}

const std::string& templates_digest() {
  static const std::string digest = [] {
    Sha256 h;
    add_field(h, std::to_string(embedded_templates().size()));
    for (const auto& t : embedded_templates()) {
      add_field(h, t.name);
      add_field(h, t.text);
    }
    return h.finish_hex();
  }();
  return digest;
}

std::string generator_version() {
  return std::string("fusejit ") + FUSEJIT_VERSION + " codegen r" + std::to_string(kCodegenRevision);
}

std::string join_options(const std::vector<std::string>& options) {
  std::string out;
  for (const auto& option : options) {
    if (!out.empty()) out += ' ';
    bool plain = !option.empty() && option.find_first_of(" \t\n\"\\'") == std::string::npos;
    if (plain) {
      out += option;
      continue;
    }
    out += '"';
    for (char c : option) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out;
}

CacheKey cubin_cache_key(const Graph& prepared, const std::string& arch, const std::string& config,
                         const std::vector<std::string>& nvrtc_options,
                         const std::string& generated_source) {
  CacheKey key;
  key.add("graph", hash_hex(structural_hash(prepared)));
  key.add("config", config);
  key.add("generator", generator_version());
  key.add("templates", templates_digest());
  key.add("source", sha256_hex(generated_source));
  key.add("nvrtc", nvrtc_version());
  key.add("options", join_options(nvrtc_options));
  key.add("arch", arch);
  return key;
}

}  // namespace fusejit
