// Common-subexpression elimination: a node with the same op, operands (in
// either order for add, mul, minimum, maximum: IEEE makes them commutative,
// NaN included) and attributes as an earlier one is that value. Inputs and
// the anchor never merge; constants are merged by canonical_order already.
// Two outputs never merge (each output has its own value and buffer); where
// the later node is an output and the earlier is not, the output takes the
// earlier value.
#include <algorithm>
#include <map>

#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

bool commutative(OpKind op) {
  return op == OpKind::Add || op == OpKind::Mul || op == OpKind::Minimum || op == OpKind::Maximum;
}

}  // namespace

bool eliminate_common_subexpressions(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  using Key = std::pair<OpKind, std::vector<ValueId>>;
  std::map<Key, std::vector<std::pair<ValueId, ValueId>>> seen;  // key -> (old id, new id) with that key
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (n.op == OpKind::Input || n.op == OpKind::Constant || is_anchor(n.op)) return rw.keep(std::move(n));
    Key key{n.op, n.operands};
    if (commutative(n.op)) std::sort(key.second.begin(), key.second.end());
    auto& same = seen[key];
    for (const auto& [old_id, new_id] : same) {
      const Node& earlier = rw.node(new_id);
      if (earlier.attrs != n.attrs || earlier.type != n.type || !rw.can_replace(v, new_id)) continue;
      rw.note(rw.describe(v) + " repeats " + rw.describe(old_id) + " -> merged");
      return new_id;
    }
    const ValueId w = rw.keep(std::move(n));
    same.push_back({v, w});
    return w;
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
