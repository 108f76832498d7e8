// Constant folding: an elementwise op whose operands are all constants
// becomes a constant, computed in double as the fp64 reference does
// (reference/scalar_ops.h). Only finite results fold (a NaN or inf constant
// stays the op that makes it). Not where the fold changes a user's dtype: a
// binary op with one constant operand takes the other's dtype, with a
// computed f32 scalar it promotes, so `h_f16 + exp(c)` is f32 but
// `h_f16 + c'` would be f16.
#include <algorithm>
#include <cmath>
#include <optional>

#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

std::optional<double> eval(const Node& n, const std::vector<double>& a) {
  switch (n.op) {
    case OpKind::Neg: return -a[0];
    case OpKind::Abs: return std::fabs(a[0]);
    case OpKind::Square: return a[0] * a[0];
    case OpKind::Sqrt: return std::sqrt(a[0]);
    case OpKind::Rsqrt: return 1.0 / std::sqrt(a[0]);
    case OpKind::Exp: return std::exp(a[0]);
    case OpKind::Log: return std::log(a[0]);
    case OpKind::Relu: return a[0] < 0 ? 0.0 : a[0];
    case OpKind::Tanh: return std::tanh(a[0]);
    case OpKind::Sigmoid: return 1.0 / (1.0 + std::exp(-a[0]));
    case OpKind::Clamp: {
      const double lo = n.attr_float("min"), hi = n.attr_float("max");
      return a[0] < lo ? lo : a[0] > hi ? hi : a[0];
    }
    case OpKind::Add: return a[0] + a[1];
    case OpKind::Sub: return a[0] - a[1];
    case OpKind::Mul: return a[0] * a[1];
    case OpKind::Div: return a[0] / a[1];
    case OpKind::Minimum: return std::min(a[0], a[1]);  // operands are finite here
    case OpKind::Maximum: return std::max(a[0], a[1]);
    case OpKind::Pow: return std::pow(a[0], a[1]);
    case OpKind::Erf: return std::erf(a[0]);
    case OpKind::Gt: return a[0] > a[1] ? 1.0 : 0.0;  // operands are finite here
    case OpKind::Ge: return a[0] >= a[1] ? 1.0 : 0.0;
    case OpKind::Lt: return a[0] < a[1] ? 1.0 : 0.0;
    case OpKind::Le: return a[0] <= a[1] ? 1.0 : 0.0;
    case OpKind::Eq: return a[0] == a[1] ? 1.0 : 0.0;
    default: return std::nullopt;  // the rest are rarely written on scalars
  }
}

// Whether every user of old value `v` keeps its dtype when `v` is a constant.
bool users_keep_dtype(const Graph& g, const std::vector<ValueId>& users, ValueId v) {
  for (ValueId u : users) {
    const Node& n = g.node(u);
    if (op_category(n.op) != OpCategory::Binary) continue;  // unary: f32[] either way
    for (ValueId o : n.operands)
      if (o != v && g.node(o).op != OpKind::Constant && g.node(o).type.dtype != DType::F32) return false;
  }
  return true;
}

}  // namespace

bool fold_constants(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  const std::vector<std::vector<ValueId>> users = g.users();
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (!is_elementwise(n.op)) return rw.keep(std::move(n));
    std::vector<double> args;
    for (ValueId o : n.operands) {
      double c = 0;
      if (!rw.is_constant(o, &c) || !std::isfinite(c)) return rw.keep(std::move(n));
      args.push_back(c);
    }
    const std::optional<double> value = eval(n, args);
    if (!value || !std::isfinite(*value) || !users_keep_dtype(g, users[static_cast<size_t>(v)], v))
      return rw.keep(std::move(n));
    const ValueId c = rw.emit_constant(*value, n.loc);
    rw.note(rw.describe(v) + " of constants -> " + attr_str(AttrValue(*value)));
    return c;
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
