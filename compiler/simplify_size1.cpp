// Reductions, softmax, log_softmax and pools over dims of size 1.
//
// Over one element (the fp64 reference and PyTorch agree):
//   sum, mean, max, min, logsumexp -> x (logsumexp of x is x for ±inf and
//     NaN too; sum and mean differ only in the sign of a zero: 0 + -0 = +0)
//   log_softmax -> x - x: 0 where x is finite, NaN for ±inf and NaN
//     (x - max is inf - inf); never a constant 0
//   softmax -> (x - x) + 1: 1 where x is finite, NaN for ±inf and NaN
//   pools whose every window is one element at its own place (kernel 1 and
//     stride 1 or an extent of 1; global_avg_pool over 1x1) -> x
// The identity only where the shape is kept (keepdim, or a same-shape op): a
// reduction without keepdim drops the dim and there is no reshape op, except
// where its operand is a keepdim reduction over the same dims (the size-1
// dims are the ones it kept): then the pair is that reduction without keepdim.
// A keepdim reduction over some size-1 dims and others just drops the size-1
// ones. `x - mean(x)` over a size-1 dim thus becomes x - x, kept as is (it
// is not 0 for ±inf and NaN).
// Where the value is an output and x is already one (or not computed from the
// anchor), the identity becomes x * 1 (exact, NaN and ±inf included): a
// pointwise op in the epilogue instead of a kernel of its own.
#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

// Each output element of the pool is the input element at the same place.
bool pool_is_identity(const Node& n, const Shape& in) {
  if (n.op == OpKind::GlobalAvgPool) return in.size() == 4 && in[2] == 1 && in[3] == 1;
  if (n.type.shape != in) return false;
  if (n.op == OpKind::MaxPool1d || n.op == OpKind::AvgPool1d)
    return n.attr_int("kernel_size") == 1 && (n.attr_int("stride") == 1 || in.back() == 1);
  const auto& k = n.attr_ints("kernel_size");
  const auto& s = n.attr_ints("stride");
  for (size_t i = 0; i < 2; ++i)
    if (k[i] != 1 || (s[i] != 1 && in[2 + i] != 1)) return false;
  return true;  // kernel 1: padding is 0 (at most half the kernel), dilation moot
}

std::string what(const Rewriter& rw, ValueId v, const std::string& detail) {
  return rw.describe(v) + detail;
}

// `x` for old value `v`, or x * 1 where v is an output that cannot be x.
ValueId identity(Rewriter& rw, ValueId v, ValueId x, const std::string& detail) {
  if (rw.can_replace(v, x)) {
    rw.note(what(rw, v, detail) + " -> identity");
    return x;
  }
  const Node& old = rw.old().node(v);
  const ValueId one = rw.emit_constant(1.0, old.loc);
  rw.note(what(rw, v, detail) + " -> x * 1 (an output that cannot share its operand's buffer)");
  return rw.emit_op(OpKind::Mul, {x, one}, old.type, old.loc, {}, old.name);
}

// r(p(y, D, keepdim), D) without keepdim, every dim of D of size 1 -> p(y, D)
// without keepdim: one element reduced is itself (±inf and NaN too). p stays
// where it has other users (DCE drops it otherwise).
ValueId drop_kept_dims(Rewriter& rw, ValueId v, Node n) {
  const Node& p = rw.node(n.operands[0]);
  if (op_category(p.op) != OpCategory::Reduction || !p.attr_bool("keepdim") ||
      p.attr_ints("dims") != n.attr_ints("dims"))
    return rw.keep(std::move(n));
  rw.note(what(rw, v, " over " + shape_str(n.attr_ints("dims")) + " of size 1") + " -> " + std::string(op_name(p.op)) +
          " '" + p.name + "' without keepdim");
  n.op = p.op;
  n.operands = p.operands;
  n.attrs = p.attrs;
  n.attrs["keepdim"] = false;
  return rw.emit(std::move(n));
}

ValueId reduction(Rewriter& rw, ValueId v, Node n) {
  const ValueId x = n.operands[0];
  const Shape& in = rw.node(x).type.shape;
  const std::vector<int64_t> dims = n.attr_ints("dims");
  std::vector<int64_t> wide;  // the reduced dims of size > 1
  for (int64_t d : dims)
    if (in.at(static_cast<size_t>(d)) != 1) wide.push_back(d);
  if (wide.empty() && !n.attr_bool("keepdim")) return drop_kept_dims(rw, v, std::move(n));
  if (wide.size() == dims.size() || !n.attr_bool("keepdim")) return rw.keep(std::move(n));
  const std::string detail = " over " + shape_str(dims) + " of size 1";
  if (wide.empty()) return identity(rw, v, x, detail);
  rw.note(what(rw, v, " over " + shape_str(dims)) + " -> over " + shape_str(wide) + " (the others have size 1)");
  n.attrs["dims"] = wide;
  return rw.emit(std::move(n));
}

ValueId normalize(Rewriter& rw, ValueId v, Node n) {
  const ValueId x = n.operands[0];
  const int64_t dim = n.attr_int("dim");
  if (rw.node(x).type.shape.at(static_cast<size_t>(dim)) != 1) return rw.keep(std::move(n));
  const TensorType type = n.type;
  const bool log = n.op == OpKind::LogSoftmax;
  const ValueId diff = rw.emit_op(OpKind::Sub, {x, x}, type, n.loc, {}, log ? n.name : std::string());
  const std::string detail = " over [" + std::to_string(dim) + "] of size 1";
  if (log) {
    rw.note(what(rw, v, detail) + " -> x - x (0, NaN where x is +-inf or NaN)");
    return diff;
  }
  rw.note(what(rw, v, detail) + " -> (x - x) + 1 (1, NaN where x is +-inf or NaN)");
  const ValueId one = rw.emit_constant(1.0, n.loc);
  return rw.emit_op(OpKind::Add, {diff, one}, type, n.loc, {}, n.name);
}

}  // namespace

bool fold_size1_dims(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    switch (op_category(n.op)) {
      case OpCategory::Reduction: return reduction(rw, v, std::move(n));
      case OpCategory::Normalize: return normalize(rw, v, std::move(n));
      case OpCategory::Pool: {
        const ValueId x = n.operands[0];
        if (!pool_is_identity(n, rw.node(x).type.shape)) return rw.keep(std::move(n));
        return identity(rw, v, x, n.op == OpKind::GlobalAvgPool ? " over 1x1" : " with one-element windows");
      }
      default: return rw.keep(std::move(n));
    }
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
