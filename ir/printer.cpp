// Canonical text form of a graph (documented in docs/ir.md).
#include "ir/passes.h"

namespace fusejit {

std::string print_graph_with(const Graph& g, const PrintOptions& opts) {
  std::string s = "fusejit.graph ";
  if (opts.names && !g.name.empty()) s += "\"" + g.name + "\" ";
  s += "precision=" + std::string(precision_name(g.precision)) + " {\n";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    s += "  %" + std::to_string(i) + " = " + std::string(op_name(n.op));
    if (n.op == OpKind::Input) {
      if (opts.names) s += " \"" + n.name + "\"";
    } else if (!n.operands.empty()) {
      s += "(";
      for (size_t k = 0; k < n.operands.size(); ++k) s += (k ? ", %" : "%") + std::to_string(n.operands[k]);
      s += ")";
    }
    for (const auto& [key, value] : n.attrs) s += " " + key + "=" + attr_str(value);
    s += " : " + n.type.str();
    if (n.op == OpKind::Input && opts.init) s += " init=" + std::string(init_name(n.init));
    if (n.op != OpKind::Input && opts.names && !n.name.empty()) s += "  // " + n.name;
    s += "\n";
  }
  for (const Output& out : g.outputs) {
    s += "  output ";
    if (opts.names) s += "\"" + out.name + "\" ";
    s += "= %" + std::to_string(out.value) + "\n";
  }
  return s + "}\n";
}

std::string print_graph(const Graph& g) { return print_graph_with(g, PrintOptions{}); }

}  // namespace fusejit
