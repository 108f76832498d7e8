// Structural rules of a fusejit graph (no shapes needed).
#include <set>

#include "ir/passes.h"

namespace fusejit {
namespace {

// Marks every value reachable backwards from `roots`.
std::vector<bool> reachable_from(const Graph& g, const std::vector<ValueId>& roots) {
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<ValueId> stack = roots;
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(v)]) continue;
    seen[static_cast<size_t>(v)] = true;
    for (ValueId o : g.node(v).operands) stack.push_back(o);
  }
  return seen;
}

// Names reach the IR text (quoted) and comments in generated CUDA: no control
// characters (a newline would end the comment) and no '"'.
bool printable_name(const std::string& name) {
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f || c == '"') return false;
  return true;
}

}  // namespace

Status check_structure(const Graph& g) {
  if (!printable_name(g.name))
    return Error("the graph name must not contain control characters or '\"'",
                 g.nodes.empty() ? SourceLoc{} : g.nodes.front().loc);
  std::set<std::string> names;
  std::vector<ValueId> anchors;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ValueId id = static_cast<ValueId>(i);
    const Node& n = g.nodes[i];
    const OpInfo& info = op_info(n.op);
    int count = static_cast<int>(n.operands.size());
    if (count < info.min_operands || count > info.max_operands) {
      std::string want = info.min_operands == info.max_operands
                             ? std::to_string(info.min_operands)
                             : std::to_string(info.min_operands) + " or " + std::to_string(info.max_operands);
      std::string list;
      for (const auto& o : info.operand_names) list += (list.empty() ? "" : ", ") + o;
      return node_error(g, id, "takes " + want + " operand" + (want == "1" ? "" : "s") +
                                   (list.empty() ? "" : " (" + list + ")") + ", got " + std::to_string(count));
    }
    for (ValueId o : n.operands)
      if (o < 0 || o >= id) return node_error(g, id, "operand %" + std::to_string(o) + " is not defined before it");
    if (n.op == OpKind::Input && n.name.empty()) return node_error(g, id, "inputs need a name");
    if (!printable_name(n.name))
      return node_error(g, id, "the name must not contain control characters or '\"'");
    if (!n.name.empty() && !names.insert(n.name).second)
      return node_error(g, id, "the name '" + n.name + "' is used twice");
    if (is_anchor(n.op)) anchors.push_back(id);
  }
  if (anchors.size() > 1)
    return node_error(g, anchors[1], "a second anchor op (the first is " + g.describe(anchors[0]) +
                                         "); fusejit fuses one linear/matmul/conv2d per graph");
  // At most one anchor. Without one the graph is a pointwise program: its
  // outputs are elementwise, layout, reduction, ... ops of the inputs.
  const ValueId anchor = anchors.empty() ? -1 : anchors[0];
  if (anchor >= 0) {
    const auto& anchor_operands = g.node(anchor).operands;
    for (size_t k = 0; k < anchor_operands.size(); ++k) {
      ValueId o = anchor_operands[k];
      if (g.node(o).op != OpKind::Input)
        return node_error(g, anchor, "operand '" + op_info(g.node(anchor).op).operand_names[k] +
                                          "' must be a graph input, not " + g.describe(o) +
                                          " (ops before the anchor are not supported)");
    }
  }

  if (g.outputs.empty()) return Error("the graph has no outputs", g.nodes.empty() ? SourceLoc{} : g.nodes.back().loc);
  std::set<ValueId> out_values;
  std::set<std::string> out_names;
  std::vector<ValueId> roots;
  for (const Output& out : g.outputs) {
    if (out.value < 0 || static_cast<size_t>(out.value) >= g.nodes.size())
      return Error("output '" + out.name + "' refers to no value", out.loc);
    if (!out_names.insert(out.name).second) return Error("output name '" + out.name + "' is used twice", out.loc);
    if (!printable_name(out.name))
      return Error("output names must not contain control characters or '\"'", out.loc);
    if (!out_values.insert(out.value).second)
      return Error("output '" + out.name + "': " + g.describe(out.value) + " is already an output", out.loc);
    if (anchor >= 0 && !reachable_from(g, {out.value})[static_cast<size_t>(anchor)])
      return Error("output '" + out.name + "' does not depend on the anchor " + g.describe(anchor), out.loc);
    const OpKind op = g.node(out.value).op;
    if (anchor < 0 && (op == OpKind::Input || op == OpKind::Constant))
      return Error("output '" + out.name + "' is " + g.describe(out.value) +
                       ": a graph without an anchor op must compute each output (an op, not " +
                       (op == OpKind::Input ? "an input" : "a constant") + ")",
                   out.loc);
    roots.push_back(out.value);
  }
  std::vector<bool> used = reachable_from(g, roots);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (used[i]) continue;
    ValueId id = static_cast<ValueId>(i);
    std::string what = g.describe(id) + " is never used";
    if (g.nodes[i].op != OpKind::Input) what += " (it is not an output and no op reads it)";
    return Error(what, g.nodes[i].loc);
  }
  return {};
}

}  // namespace fusejit
