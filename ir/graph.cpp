#include "fusejit/ir.h"

namespace fusejit {

double Node::constant_value() const { return attr_float("value"); }

int64_t Node::attr_int(const std::string& key) const { return std::get<int64_t>(attrs.at(key)); }

double Node::attr_float(const std::string& key) const {
  const AttrValue& v = attrs.at(key);
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

bool Node::attr_bool(const std::string& key) const { return std::get<bool>(attrs.at(key)); }

const std::string& Node::attr_string(const std::string& key) const {
  return std::get<std::string>(attrs.at(key));
}

const std::vector<int64_t>& Node::attr_ints(const std::string& key) const {
  return std::get<std::vector<int64_t>>(attrs.at(key));
}

ValueId Graph::add(Node n) {
  nodes.push_back(std::move(n));
  return static_cast<ValueId>(nodes.size() - 1);
}

std::vector<ValueId> Graph::inputs() const {
  std::vector<ValueId> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].op == OpKind::Input) out.push_back(static_cast<ValueId>(i));
  return out;
}

std::optional<ValueId> Graph::anchor() const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (is_anchor(nodes[i].op)) return static_cast<ValueId>(i);
  return std::nullopt;
}

std::vector<std::vector<ValueId>> Graph::users() const {
  std::vector<std::vector<ValueId>> u(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].operands)
      if (o >= 0 && static_cast<size_t>(o) < nodes.size()) u[static_cast<size_t>(o)].push_back(static_cast<ValueId>(i));
  return u;
}

std::string Graph::describe(ValueId id) const {
  const Node& n = node(id);
  std::string s(op_name(n.op));
  if (!n.name.empty()) s += " '" + n.name + "'";
  else s += " %" + std::to_string(id);
  return s;
}

}  // namespace fusejit
