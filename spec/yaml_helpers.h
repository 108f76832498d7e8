// spec/yaml_helpers.h — small pieces the spec parser builds on: locations of
// yaml-cpp nodes, strict scalar conversions and "did you mean" suggestions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "fusejit/error.h"

namespace fusejit::spec_detail {

// 1-based location of a yaml-cpp mark (unknown when the mark is null).
SourceLoc loc_of(const YAML::Mark& mark, const std::string& file);

// Strict YAML-style scalars. Numbers: decimal ints and floats with optional
// sign and exponent, plus .inf / -.inf / .nan. `allow_bare_inf` also accepts
// inf / -inf / nan (attributes; not args, where those would be value names).
std::optional<int64_t> parse_int_scalar(std::string_view text);
std::optional<double> parse_float_scalar(std::string_view text, bool allow_bare_inf);
std::optional<bool> parse_bool_scalar(std::string_view text);

// Value names are identifiers: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view name);

// The candidate closest to `word`, if it is close enough to be a likely typo
// (small edit distance, or one contains the other).
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// "a, b or c"
std::string join_alternatives(const std::vector<std::string>& words);

}  // namespace fusejit::spec_detail
