// Dead values: what no output needs after the other passes replaced it.
// Inputs stay, in declaration order, even where none is read any more: the
// kernel ABI indexes them by position (prepare_graph then reports an unused
// input, and the driver plans the graph as written).
#include "compiler/simplify_passes.h"

namespace fusejit::simplify {

int remove_dead_values(Graph& g) {
  const size_t n = g.nodes.size();
  std::vector<bool> live(n, false);
  for (const Output& o : g.outputs) live.at(static_cast<size_t>(o.value)) = true;
  for (size_t i = n; i-- > 0;) {  // operands come before their users
    if (g.nodes[i].op == OpKind::Input) live[i] = true;
    if (!live[i]) continue;
    for (ValueId o : g.nodes[i].operands) live.at(static_cast<size_t>(o)) = true;
  }
  std::vector<ValueId> remap(n, -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < n; ++i) {
    if (!live[i]) continue;
    Node node = std::move(g.nodes[i]);
    for (ValueId& o : node.operands) o = remap.at(static_cast<size_t>(o));
    remap[i] = static_cast<ValueId>(kept.size());
    kept.push_back(std::move(node));
  }
  const int removed = static_cast<int>(n - kept.size());
  g.nodes = std::move(kept);
  for (Output& o : g.outputs) o.value = remap.at(static_cast<size_t>(o.value));
  return removed;
}

}  // namespace fusejit::simplify
