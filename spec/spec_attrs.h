// spec/spec_attrs.h — op attributes and operand lists as a spec writes them.
#pragma once

#include <optional>
#include <string>

#include <yaml-cpp/yaml.h>

#include "fusejit/ir.h"

namespace fusejit::spec_detail {

// Converts a YAML value to an attribute of the given kind; nullopt when it
// does not fit. Float accepts ints; Ints accepts one int as a list of one;
// Pair accepts an int n (stored as [n, n]) or a list of two ints.
std::optional<AttrValue> convert_attr(AttrKind kind, const YAML::Node& value);

// "relu 'act': unknown attribute 'slope' (did you mean ...?)", with a hint
// naming the ops that do have such an attribute when there is no close match.
std::string unknown_attr_message(const OpInfo& info, const std::string& what,
                                 const std::string& key);

// "1 operand (x)", "2 to 3 operands (x, weight, bias)".
std::string operand_count_text(const OpInfo& info);

}  // namespace fusejit::spec_detail
