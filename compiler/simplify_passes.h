// compiler/simplify_passes.h — the simplification passes behind
// simplify_graph (simplify.cpp), one per file, and the Rewriter they share.
//
// A pass reads a prepared graph and builds a new one node by node (so SSA
// order holds): each node is copied with its operands remapped, or replaced
// by a value of the new graph. Replaced nodes are left for
// remove_dead_values; the driver then re-prepares (types, canonical order).
#pragma once

#include <string>
#include <vector>

#include "fusejit/ir.h"

namespace fusejit::simplify {

class Rewriter {
 public:
  Rewriter(const Graph& old, std::vector<std::string>* notes);

  const Graph& old() const { return old_; }
  // A node of the new graph (ids returned by emit*/map).
  const Node& node(ValueId v) const { return out_.node(v); }
  // The new value standing for old value `v` (visited already).
  ValueId map(ValueId v) const { return map_.at(static_cast<size_t>(v)); }

  // Copies the visited node unchanged (what a pass returns when nothing applies).
  ValueId keep(Node n) {
    kept_ = true;
    return emit(std::move(n));
  }
  // Appends a node (operands are new ids; type set by the caller).
  ValueId emit(Node n);
  ValueId emit_constant(double value, const SourceLoc& loc);
  ValueId emit_op(OpKind op, std::vector<ValueId> operands, const TensorType& type, const SourceLoc& loc,
                  AttrMap attrs = {}, std::string name = {});

  // Whether old value `v` may become new value `w`: the same type; where `v`
  // is an output, `w` must be no output yet and computed (from the anchor,
  // where there is one): an output cannot be an input, a constant, or
  // another output's value.
  bool can_replace(ValueId v, ValueId w) const;
  bool is_constant(ValueId w, double* value = nullptr) const;

  // "logsumexp 'lse'" or "logsumexp %5" (old graph), for notes.
  std::string describe(ValueId v) const { return old_.describe(v); }
  void note(const std::string& text);

  // Visits every old node in order: `fn(old id, node with mapped operands)`
  // returns the new value (rw.keep(node) to keep it). Outputs are remapped.
  template <class Fn>
  Graph run(Fn&& fn) {
    for (size_t i = 0; i < old_.nodes.size(); ++i) {
      Node n = old_.nodes[i];
      for (ValueId& o : n.operands) o = map(o);
      const ValueId w = fn(static_cast<ValueId>(i), std::move(n));
      map_[i] = w;
      if (is_output_[i]) output_target_.at(static_cast<size_t>(w)) = true;
      changed_ = changed_ || !kept_;
      kept_ = false;
    }
    for (Output& o : out_.outputs) o.value = map(o.value);
    return std::move(out_);
  }
  bool changed() const { return changed_; }

 private:
  const Graph& old_;
  std::vector<std::string>* notes_;
  Graph out_;
  std::vector<ValueId> map_;
  std::vector<bool> is_output_;      // old ids
  std::vector<bool> output_target_;  // new ids: some output maps here
  std::vector<bool> from_anchor_;    // new ids: depends on the anchor
  bool anchored_ = true;             // the graph has an anchor (else outputs need only be computed)
  bool changed_ = false;
  bool kept_ = false;  // the visited node was copied as is
};

// Whether v is computed from the graph's anchor (simplify.cpp).
bool from_anchor(const Graph& g, ValueId v);

// simplify_size1.cpp: reductions / softmax / log_softmax / pools over dims of
// size 1 (identity, x - x, (x - x) + 1, or fewer reduced dims).
bool fold_size1_dims(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_algebra.cpp: x + x -> x * 2, exact identities (x * 1, x / 1,
// x - 0, x + -0, pow(x, 1), neg(neg(x))), chains of scalar mul/div and
// add/sub.
bool fold_algebra(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_layout.cpp: layout ops that keep the shape or undo each other,
// and chains of reshapes / expands, folded.
bool fold_layout(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_constants.cpp: elementwise ops on constants only become a constant.
bool fold_constants(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_pool_backward.cpp: a sum over H and W of max_pool2d_backward (or of
// an avg_pool2d_backward whose divisor counts the window's elements) -> the
// same sum of its gradient operand.
bool fold_pool_backward_sums(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_logsumexp.cpp: a softmax / log_softmax of x along d beside a
// logsumexp of x over [d] -> that logsumexp (keepdim) broadcast back, one row
// reduction for both (NaN rows kept as PyTorch's).
bool fold_normalize_into_logsumexp(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_split_reduction.cpp: a sum / mean / max / min to one value of a
// value of the linear / matmul output's shape -> the same along the rows (the
// last dim), then over the rows' values: the epilogue reduces the rows and the
// row-finish kernel the rows' values, instead of the value going to memory.
bool split_reductions_along_rows(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_sink_reshapes.cpp: an elementwise op of reshapes of values of
// one shape (and scalar constants) -> the reshape of the op on the values.
bool sink_reshapes(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_cse.cpp: identical nodes (same op, operands, attributes) merge.
bool eliminate_common_subexpressions(const Graph& g, Graph& out, std::vector<std::string>* notes);

// simplify_dce.cpp: drops values no output needs (inputs always stay, in
// order: the kernel ABI indexes them). Returns how many were dropped.
int remove_dead_values(Graph& g);

// simplify_batch_norm.cpp: batch_norm (inference) -> sub / mul / add with
// rsqrt of the running variance, its [C] operands viewed as [C, 1, ...]; the
// result is prepared. Run before planning whether or not simplify is on.
Status lower_batch_norms(const Graph& g, Graph& out, bool& changed, std::vector<std::string>* notes);

}  // namespace fusejit::simplify
