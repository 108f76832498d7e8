// Puts a graph into canonical order so that printing and hashing do not depend
// on how the spec listed its ops.
#include <cstring>

#include "ir/passes.h"

namespace fusejit {

void canonicalize_order(Graph& g) {
  const size_t n = g.nodes.size();
  std::vector<ValueId> order;
  std::vector<ValueId> remap(n, -1);
  for (size_t i = 0; i < n; ++i)
    if (g.nodes[i].op == OpKind::Input) {
      remap[i] = static_cast<ValueId>(order.size());
      order.push_back(static_cast<ValueId>(i));
    }
  // Identical constants become one node (keyed by the value's bits).
  std::vector<std::pair<uint64_t, ValueId>> constants;
  auto visit = [&](auto&& self, ValueId v) -> void {
    if (remap[static_cast<size_t>(v)] >= 0) return;
    const Node& node = g.node(v);
    if (node.op == OpKind::Constant) {
      double value = node.constant_value();
      uint64_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      for (auto& [b, id] : constants)
        if (b == bits) {
          remap[static_cast<size_t>(v)] = remap[static_cast<size_t>(id)];
          return;
        }
      constants.push_back({bits, v});
    }
    for (ValueId o : node.operands) self(self, o);
    remap[static_cast<size_t>(v)] = static_cast<ValueId>(order.size());
    order.push_back(v);
  };
  for (const Output& out : g.outputs) visit(visit, out.value);

  std::vector<Node> nodes;
  nodes.reserve(order.size());
  for (ValueId old : order) {
    Node node = std::move(g.nodes[static_cast<size_t>(old)]);
    for (ValueId& o : node.operands) o = remap[static_cast<size_t>(o)];
    nodes.push_back(std::move(node));
  }
  g.nodes = std::move(nodes);
  for (Output& out : g.outputs) out.value = remap[static_cast<size_t>(out.value)];
}

}  // namespace fusejit
