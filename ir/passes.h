// Internal passes behind prepare_graph(), one per file.
#pragma once

#include "fusejit/ir.h"

namespace fusejit {

// "conv2d 'conv': <msg>" at the node's spec location.
Error node_error(const Graph& g, ValueId id, const std::string& msg);

// attr_normalize.cpp: rejects unknown attributes and wrong kinds, fills
// defaults and derived values (pool stride = kernel), checks value ranges
// that need no shapes (kernel >= 1, padding >= 0, ...).
Status normalize_attrs(Graph& g);

// shape_inference.cpp: infers node.type for every non-input node in order;
// normalizes dims that depend on rank (negative reduction/softmax dims).
Status infer_types(Graph& g);

// structure.cpp: SSA order, operand counts, at most one anchor (fed by inputs),
// names, outputs (computed; with an anchor, dependent on it), every value used.
Status check_structure(const Graph& g);

// init_resolution.cpp: resolves InitKind::Auto and the torch fan_in.
void resolve_inits(Graph& g);

// canonical_order.cpp: inputs first (declared order), identical constants
// merged, then a depth-first post-order from the outputs.
void canonicalize_order(Graph& g);

struct PrintOptions {
  bool names = true;  // input/output/value names
  bool init = true;   // input init kinds
};
std::string print_graph_with(const Graph& g, const PrintOptions& opts);

}  // namespace fusejit
