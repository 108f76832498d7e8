// spec/spec_attrs.cpp — attribute conversion and op-specific messages.
#include "spec/spec_attrs.h"

#include <vector>

#include "spec/yaml_helpers.h"

namespace fusejit::spec_detail {

namespace {

std::optional<int64_t> as_int(const YAML::Node& n) {
  return n.IsScalar() ? parse_int_scalar(n.Scalar()) : std::nullopt;
}

std::optional<std::vector<int64_t>> as_int_list(const YAML::Node& n) {
  if (!n.IsSequence()) return std::nullopt;
  std::vector<int64_t> out;
  for (const YAML::Node& item : n) {
    auto v = as_int(item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

}  // namespace

std::optional<AttrValue> convert_attr(AttrKind kind, const YAML::Node& value) {
  switch (kind) {
    case AttrKind::Int:
      if (auto v = as_int(value)) return AttrValue{*v};
      return std::nullopt;
    case AttrKind::Float:
      if (!value.IsScalar()) return std::nullopt;
      if (auto v = parse_float_scalar(value.Scalar(), /*allow_bare_inf=*/true)) return AttrValue{*v};
      return std::nullopt;
    case AttrKind::Bool:
      if (!value.IsScalar()) return std::nullopt;
      if (auto v = parse_bool_scalar(value.Scalar())) return AttrValue{*v};
      return std::nullopt;
    case AttrKind::String:
      if (!value.IsScalar()) return std::nullopt;
      return AttrValue{value.Scalar()};
    case AttrKind::Ints:
      if (auto v = as_int(value)) return AttrValue{std::vector<int64_t>{*v}};
      if (auto list = as_int_list(value)) return AttrValue{*list};
      return std::nullopt;
    case AttrKind::Pair:
      if (auto v = as_int(value)) return AttrValue{std::vector<int64_t>{*v, *v}};
      if (auto list = as_int_list(value); list && list->size() == 2) return AttrValue{*list};
      return std::nullopt;
  }
  return std::nullopt;
}

std::string unknown_attr_message(const OpInfo& info, const std::string& what,
                                 const std::string& key) {
  std::vector<std::string> valid;
  for (const AttrSpec& a : info.attrs) valid.push_back(a.name);
  std::string msg = what + ": unknown attribute '" + key + "'";
  std::vector<std::string> keys = valid;
  for (const char* k : {"name", "op", "args"}) keys.push_back(k);
  if (auto close = closest_match(key, keys)) return msg + " (did you mean '" + *close + "'?)";
  std::vector<std::string> owners;
  for (const OpInfo& other : all_ops())
    if (other.find_attr(key)) owners.push_back(other.name);
  if (!owners.empty()) msg += " ('" + key + "' is an attribute of " + join_alternatives(owners) + ")";
  msg += valid.empty() ? "; " + info.name + " takes no attributes"
                       : "; " + info.name + " takes " + join_alternatives(valid);
  return msg;
}

std::string operand_count_text(const OpInfo& info) {
  std::string count = std::to_string(info.min_operands);
  if (info.max_operands != info.min_operands) count += " to " + std::to_string(info.max_operands);
  count += info.max_operands == 1 ? " operand" : " operands";
  if (info.operand_names.empty()) return count;
  std::string names;
  for (const std::string& n : info.operand_names) names += (names.empty() ? "" : ", ") + n;
  return count + " (" + names + ")";
}

}  // namespace fusejit::spec_detail
