// A sum / mean / max / min to one value (a loss over every element) of a
// value the linear / matmul epilogue computes (elementwise ops of its output
// and of leaf values) becomes a reduction along the rows first, then over the
// rows' values:
//   op(x, D) -> op(op(x, [last], keepdim), D - {last}, keepdim)   (keepdim)
//   op(x, D) -> op(op(x, [last], keepdim), D)                     (without)
// The epilogue then reduces each tile's rows (whole, or as per-tile partials
// that the row-finish kernel combines) and the row-finish kernel reduces the
// rows' values (pass_fallback.cpp, fuse_reduction_across_rows): two kernels
// and no [.., M, N] scratch, where the value went to memory for a reduce
// kernel before. (The CPU backend's row-finish reduces at most
// kAcrossRowsMaxRows rows; more take a reduce kernel there, a third, small
// one.) In real arithmetic both are the same: a mean's rows hold equally many
// elements. NaN and ±inf: a NaN anywhere is NaN in the row's value, then in
// the total; sums of +inf and -inf are NaN either way; max / min propagate NaN
// (fj max_nan) and are exact.
#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

bool splits(OpKind op) { return op == OpKind::Sum || op == OpKind::Mean || op == OpKind::Max || op == OpKind::Min; }

// Whether v is what the anchor's epilogue computes: the anchor, or elementwise ops of its shape on such values and
// on values not computed from the anchor (leaf expressions). A value a later kernel computes (a softmax's, a row
// broadcast's) is not: its rows' values would take a reduce kernel of their own.
bool in_epilogue(const Graph& g, ValueId v, ValueId anchor) {
  std::vector<ValueId> stack = {v};
  std::vector<bool> seen(g.nodes.size(), false);
  while (!stack.empty()) {
    const ValueId u = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(u)] || u == anchor || !from_anchor(g, u)) continue;
    seen[static_cast<size_t>(u)] = true;
    const Node& n = g.node(u);
    if (!is_elementwise(n.op) || n.type.shape != g.node(anchor).type.shape) return false;
    stack.insert(stack.end(), n.operands.begin(), n.operands.end());
  }
  return true;
}

// Whether reduction `r` takes the rewrite: to one value, of a value the linear / matmul epilogue computes, with a
// last dim longer than 1 and at least 2 rows.
bool reduces_rows_and_more(const Graph& g, ValueId r) {
  const Node& n = g.node(r);
  const std::optional<ValueId> anchor = g.anchor();
  if (!splits(n.op) || !anchor) return false;
  const Node& a = g.node(*anchor);
  if (a.op != OpKind::Linear && a.op != OpKind::Matmul) return false;
  const Shape& shape = g.node(n.operands[0]).type.shape;
  if (shape != a.type.shape || shape.size() < 2 || shape.back() < 2) return false;
  const int64_t rows = numel(shape) / shape.back();
  if (n.type.numel() != 1 || rows < 2) return false;
  return from_anchor(g, n.operands[0]) && in_epilogue(g, n.operands[0], *anchor);
}

}  // namespace

bool split_reductions_along_rows(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  bool any = false;
  for (size_t i = 0; i < g.nodes.size() && !any; ++i) any = reduces_rows_and_more(g, static_cast<ValueId>(i));
  if (!any) return false;

  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (!reduces_rows_and_more(g, v)) return rw.keep(std::move(n));
    const ValueId x = n.operands[0];
    const bool keepdim = n.attr_bool("keepdim");
    const int64_t last = static_cast<int64_t>(rw.node(x).type.shape.size()) - 1;
    // The rows' values keep their dim (a row stage of the row-finish kernel only takes those: `sum((h - mu)^2)`);
    // without keepdim the total drops it with the others.
    TensorType rows = rw.node(x).type;
    rows.shape.back() = 1;
    const ValueId row_values =
        rw.emit_op(n.op, {x}, rows, n.loc, {{"dims", std::vector<int64_t>{last}}, {"keepdim", true}});
    std::vector<int64_t> rest;
    for (int64_t d : n.attr_ints("dims"))
      if (d != last || !keepdim) rest.push_back(d);
    auto list = [](const std::vector<int64_t>& ds) {
      std::string t;
      for (int64_t d : ds) t += (t.empty() ? "" : ",") + std::to_string(d);
      return "[" + t + "]";
    };
    rw.note(rw.describe(v) + " over dims " + list(n.attr_ints("dims")) + " -> " + std::string(op_name(n.op)) +
            " along the rows (dim " + std::to_string(last) + "), then over dims " + list(rest) +
            " of the rows' values: the epilogue reduces the rows");
    return rw.emit_op(n.op, {row_values}, n.type, n.loc, {{"dims", rest}, {"keepdim", keepdim}}, n.name);
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
