// A softmax or log_softmax of x along d beside a logsumexp of the same x over
// [d] (a loss that reads both, e.g. cross-entropy with PaLM's z-loss on the
// log-partition function) along the anchor's N, wider than any tile (over
// 256 columns): the normalization becomes that logsumexp broadcast back, so
// the row reduction the epilogue does in parts serves both and its row-finish
// kernel runs the broadcast, instead of a softmax kernel of its own reading
// the stored anchor output (three kernels -> two). Rows a tile can hold keep
// the softmax, which the epilogue finishes whole:
//   log_softmax(x, d) -> (x - L) + (L - L)
//   softmax(x, d)     -> exp((x - L) + (L - L))
//   logsumexp(x, [d]) without keepdim -> reshape(L)
// with L = logsumexp(x, [d], keepdim). In real arithmetic x - L is PyTorch's
// x - max - log(sum(exp(x - max))). For ±inf and NaN: PyTorch's softmax shifts
// by the row max, so a row with +inf (inf - inf) or NaN is NaN everywhere and
// a row all -inf too, while its logsumexp does not shift by an infinite max
// (+inf, -inf). L - L is NaN for exactly those rows and 0 for the others, so
// the results are NaN where PyTorch's are.
#include <map>
#include <set>

#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

using RowKey = std::pair<ValueId, int64_t>;  // (x, d) in the old graph

// wgmma's widest column tile: a row up to this long may be whole in one tile (pass_fuse_reduction.cpp's
// max_epilogue_cols), and its softmax then fuses into the epilogue.
constexpr int64_t kWidestTileN = 256;

// Whether the softmax / logsumexp pair over (x, d) takes the rewrite: rows along the anchor output's last dim,
// wider than any tile.
bool wide_anchor_rows(const Graph& g, const RowKey& key) {
  const Shape& shape = g.node(key.first).type.shape;
  return g.anchor() && key.second == static_cast<int64_t>(shape.size()) - 1 && shape.back() > kWidestTileN &&
         from_anchor(g, key.first);
}

}  // namespace

bool fold_normalize_into_logsumexp(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  // The logsumexps over one dim, and the softmaxes that have one beside them.
  std::map<RowKey, ValueId> lse;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpKind::LogSumExp || n.attr_ints("dims").size() != 1) continue;
    const RowKey key{n.operands[0], n.attr_ints("dims")[0]};
    auto [it, fresh] = lse.emplace(key, static_cast<ValueId>(i));
    if (!fresh && n.attr_bool("keepdim") && !g.node(it->second).attr_bool("keepdim")) it->second = static_cast<ValueId>(i);
  }
  std::set<RowKey> paired;
  for (const Node& n : g.nodes)
    if (op_category(n.op) == OpCategory::Normalize)
      if (const RowKey key{n.operands[0], n.attr_int("dim")}; lse.count(key) && wide_anchor_rows(g, key))
        paired.insert(key);
  if (paired.empty()) return false;

  Rewriter rw(g, notes);
  std::map<RowKey, ValueId> kept;  // (old x, d) -> L (keepdim) in the new graph
  auto keepdim_lse = [&](const RowKey& key, ValueId x, const SourceLoc& loc) {
    if (auto it = kept.find(key); it != kept.end()) return it->second;
    const Node& old = g.node(lse.at(key));
    TensorType type = rw.node(x).type;
    type.shape[static_cast<size_t>(key.second)] = 1;
    const ValueId l = rw.emit_op(OpKind::LogSumExp, {x}, type, loc,
                                 {{"dims", std::vector<int64_t>{key.second}}, {"keepdim", true}},
                                 old.attr_bool("keepdim") ? old.name : std::string());
    kept[key] = l;
    return l;
  };
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    const Node& old = g.node(v);
    if (old.op == OpKind::LogSumExp && old.attr_ints("dims").size() == 1) {
      const RowKey key{old.operands[0], old.attr_ints("dims")[0]};
      if (!paired.count(key) || lse.at(key) != v) return rw.keep(std::move(n));
      const ValueId l = keepdim_lse(key, n.operands[0], n.loc);
      if (old.attr_bool("keepdim")) return l;
      rw.note(rw.describe(v) + " -> a view of the keepdim logsumexp its softmax shares");
      return rw.emit_op(OpKind::Reshape, {l}, n.type, n.loc, {{"shape", n.type.shape}}, n.name);
    }
    if (op_category(old.op) != OpCategory::Normalize) return rw.keep(std::move(n));
    const RowKey key{old.operands[0], old.attr_int("dim")};
    if (!paired.count(key)) return rw.keep(std::move(n));
    const ValueId x = n.operands[0];
    const ValueId l = keepdim_lse(key, x, n.loc);
    const TensorType row_type = rw.node(l).type;
    const bool log = old.op == OpKind::LogSoftmax;
    const ValueId centered = rw.emit_op(OpKind::Sub, {x, l}, n.type, n.loc);
    const ValueId nan_rows = rw.emit_op(OpKind::Sub, {l, l}, row_type, n.loc);
    const ValueId logp = rw.emit_op(OpKind::Add, {centered, nan_rows}, n.type, n.loc, {}, log ? n.name : std::string());
    rw.note(rw.describe(v) + " -> " + (log ? "" : "exp of ") + "(x - L) + (L - L), L = " + rw.describe(lse.at(key)) +
            " with keepdim (one row reduction for both; L - L: NaN for the rows PyTorch's softmax makes NaN)");
    return log ? logp : rw.emit_op(OpKind::Exp, {logp}, n.type, n.loc, {}, n.name);
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
