// prepare_graph(): the one entry point that turns a freshly built graph
// (from a spec, the builder or IR text) into a checked, canonical one.
#include "ir/passes.h"

namespace fusejit {

Status prepare_graph(Graph& g) {
  if (Status s = check_structure(g); !s) return s;
  if (Status s = normalize_attrs(g); !s) return s;
  if (Status s = infer_types(g); !s) return s;
  resolve_inits(g);
  canonicalize_order(g);
  return {};
}

Status verify_graph(const Graph& g) {
  Graph fresh = g;
  if (Status s = prepare_graph(fresh); !s) return s;
  if (fresh.nodes.size() != g.nodes.size()) return Error("graph is not in canonical order (node count differs)");
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& a = g.nodes[i];
    const Node& b = fresh.nodes[i];
    if (a.op != b.op || a.operands != b.operands)
      return node_error(g, static_cast<ValueId>(i), "graph is not in canonical order");
    if (a.type != b.type)
      return node_error(g, static_cast<ValueId>(i), "type " + a.type.str() + " differs from the inferred " + b.type.str());
    if (a.attrs != b.attrs) return node_error(g, static_cast<ValueId>(i), "attributes are not normalized");
  }
  return {};
}

}  // namespace fusejit
