// compiler/simplify.h — graph simplification before planning (issue 10 §1).
//
// simplify_graph rewrites a prepared graph into a cheaper one with the same
// meaning (PyTorch semantics, NaN and ±inf included): reductions, softmax,
// log_softmax and pools over dims of size 1, x + x, scalar mul/add chains,
// constant expressions, repeated subexpressions, dead values. One pass per
// file (simplify_*.cpp, declared in simplify_passes.h); the driver
// (simplify.cpp) runs them to a fixed point.
//
// The result keeps the kernel ABI: the same inputs (order, names, types) and
// the same outputs (order, names, dtypes, shapes). The structural hash and the
// fp64 reference keep using the graph as written; only planning sees this one.
#pragma once

#include <string>
#include <vector>

#include "fusejit/error.h"
#include "fusejit/ir.h"

namespace fusejit {

// `prepared` must pass verify_graph. Appends one "simplify: ..." line per
// rewrite to `notes` (may be null). Returns the graph unchanged (a copy) when
// nothing applies, or when a rewrite would break the ABI (with a note).
Expected<Graph> simplify_graph(const Graph& prepared, std::vector<std::string>* notes);

// What the codegens plan: the verified graph, simplified unless the codegen
// config says `simplify=0`, and the notes for Plan::notes.
struct SimplifiedGraph {
  Graph graph;
  std::vector<std::string> notes;
};

// verify_graph (the error reads "codegen needs a prepared graph: ..."), then
// simplify_graph unless `config` holds `simplify=0` (the last such item wins;
// the value itself is checked by parse_heuristics).
Expected<SimplifiedGraph> simplify_for_codegen(const Graph& g, const std::string& config);

}  // namespace fusejit
