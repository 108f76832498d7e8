// spec/yaml_helpers.cpp — locations, strict scalars and suggestions.
#include "spec/yaml_helpers.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace fusejit::spec_detail {

SourceLoc loc_of(const YAML::Mark& mark, const std::string& file) {
  SourceLoc loc;
  loc.file = file;
  if (!mark.is_null() && mark.line >= 0) {
    loc.line = mark.line + 1;
    loc.col = mark.column + 1;
  }
  return loc;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Strips one leading '+' (std::from_chars does not accept it).
std::string_view strip_plus(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  return s;
}

// [-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?
bool looks_like_decimal(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<int64_t> parse_int_scalar(std::string_view text) {
  std::string_view s = strip_plus(text);
  const size_t first_digit = (!s.empty() && s[0] == '-') ? 1 : 0;
  if (s.size() == first_digit) return std::nullopt;
  for (size_t i = first_digit; i < s.size(); ++i)
    if (!is_digit(s[i])) return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_float_scalar(std::string_view text, bool allow_bare_inf) {
  const std::string l = lower(text);
  const double inf = std::numeric_limits<double>::infinity();
  if (l == ".inf" || l == "+.inf") return inf;
  if (l == "-.inf") return -inf;
  if (l == ".nan") return std::numeric_limits<double>::quiet_NaN();
  if (allow_bare_inf) {
    if (l == "inf" || l == "+inf") return inf;
    if (l == "-inf") return -inf;
    if (l == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  if (!looks_like_decimal(text)) return std::nullopt;
  std::string_view s = strip_plus(text);
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<bool> parse_bool_scalar(std::string_view text) {
  const std::string l = lower(text);
  if (l == "true") return true;
  if (l == "false") return false;
  return std::nullopt;
}

bool is_identifier(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alpha(c) || is_digit(c); });
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      const auto ca = static_cast<unsigned char>(a[i - 1]), cb = static_cast<unsigned char>(b[j - 1]);
      size_t subst = diag + (std::tolower(ca) == std::tolower(cb) ? 0 : 1);
      row[j] = std::min({up + 1, row[j - 1] + 1, subst});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  const std::string w = lower(word);
  std::optional<std::string> best;
  size_t best_score = std::numeric_limits<size_t>::max();
  for (const std::string& cand : candidates) {
    const std::string c = lower(cand);
    size_t d = edit_distance(w, c);
    const size_t limit = std::max<size_t>(1, std::min(w.size(), c.size()) / 3);
    // A containment match ("kernel" in "kernel_size") ranks after real typos.
    const bool contains = w.size() >= 3 && c.size() >= 3 &&
                          (c.find(w) != std::string::npos || w.find(c) != std::string::npos);
    size_t score;
    if (d <= limit) score = d;
    else if (contains) score = 100 + d;
    else continue;
    if (score < best_score) best_score = score, best = cand;
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto m = closest_match(word, candidates);
  return m ? " (did you mean '" + *m + "'?)" : "";
}

std::string join_alternatives(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += (i + 1 == words.size()) ? " or " : ", ";
    out += words[i];
  }
  return out;
}

}  // namespace fusejit::spec_detail
