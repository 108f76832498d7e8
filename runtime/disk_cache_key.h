// runtime/disk_cache_key.h — the content address of an on-disk cache entry.
//
// A CacheKey is an ordered list of named parts, each one thing that changes
// the compiled binary. Its digest (SHA-256 over every part, length-prefixed)
// names the entry file; the parts themselves are written into the entry's
// manifest, so `fusejit cache explain` can say which part changed.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusejit/ir.h"

namespace fusejit {

struct CacheKey {
  std::vector<std::pair<std::string, std::string>> parts;  // (name, value), in order

  void add(std::string name, std::string value) { parts.emplace_back(std::move(name), std::move(value)); }
  const std::string* find(std::string_view name) const;  // nullptr when absent
  std::string digest() const;                            // 64 lowercase hex digits
  bool operator==(const CacheKey&) const = default;
};

// One line per part that differs, "name: old -> new" in `from`'s order, then
// parts only in `to`. A missing part reads "(none)", an empty value "''";
// values longer than 80 characters are shortened around the first difference.
std::vector<std::string> key_differences(const CacheKey& from, const CacheKey& to);

// SHA-256 over every embedded template (name and text); computed once.
const std::string& templates_digest();

// Names the code generator; bump kCodegenRevision (disk_cache_key.cpp) when
// generated code changes without a version change of the project.
std::string generator_version();

// The option list as one readable string: options joined by spaces, each one
// that holds a space, quote or backslash (or is empty) double-quoted with
// backslash escapes, so different lists never give the same string.
std::string join_options(const std::vector<std::string>& options);

// The key of a CUBIN compiled from a prepared graph. `generated_source` is the
// codegen output (Program::source) the CUBIN is compiled from: hashing it
// makes any codegen change a different key even without a version bump.
// Parts: graph, config, generator, templates, source, nvrtc, options, arch.
CacheKey cubin_cache_key(const Graph& prepared, const std::string& arch, const std::string& config,
                         const std::vector<std::string>& nvrtc_options,
                         const std::string& generated_source);

}  // namespace fusejit
