// Algebraic folds that keep PyTorch's results, NaN and ±inf included.
//
//   x + x -> x * 2          exact (inf + inf = 2 * inf, overflow alike)
//   x * 1, 1 * x, x / 1, pow(x, 1), x - 0, x + -0, neg(neg(x)) -> x   exact
//   (x op1 a) op2 b -> x op (a . b)   for op in {*, /} or in {+, -}
// Deliberately not folded: x - x (NaN for ±inf), x * 0 and 0 * x (NaN for
// ±inf and NaN), x + 0 (turns -0 into +0, so 1 / (x + 0) is +inf not -inf),
// a cast to x's own dtype (x computes unrounded, in fp32: the cast rounds it).
// Scalar chains fold only where the intermediate cannot overflow or flush to
// 0 while the folded op does not (or the other way round): both factors
// scale the same way (|a|, |b| both >= 1 or both <= 1), both offsets have
// the same sign; constants finite, non-zero, and the folded one within
// float's normal range. Otherwise only rounding changes (one rounding
// instead of two).
#include <cfloat>
#include <cmath>

#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

std::string num(double v) { return attr_str(AttrValue(v)); }

bool usable(double c) { return std::isfinite(c) && c != 0.0; }
bool float_normal(double c) { return std::fabs(c) >= FLT_MIN && std::fabs(c) <= FLT_MAX; }

// A scalar step applied to `x`: x * factor (mul, div) or x + offset (add, sub).
struct Step {
  enum Kind { None, Scale, Shift } kind = None;
  ValueId x = -1;
  OpKind op = OpKind::Mul;  // as written: Mul, Div, Add or Sub
  double c = 0;             // the constant as written
  double effect = 0;        // the multiplier (1 / c for div) or the signed offset
};

Step step_of(const Rewriter& rw, const Node& n) {
  Step s;
  if (n.operands.size() != 2) return s;
  double a = 0, b = 0;
  const bool ca = rw.is_constant(n.operands[0], &a), cb = rw.is_constant(n.operands[1], &b);
  if (ca == cb) return s;  // both or neither constant
  const bool commutes = n.op == OpKind::Mul || n.op == OpKind::Add;
  if (ca && !commutes) return s;  // c / x, c - x: not a step of x
  s.x = n.operands[ca ? 1 : 0];
  s.c = ca ? a : b;
  s.op = n.op;
  if (!usable(s.c)) return s;
  switch (n.op) {
    case OpKind::Mul: s.kind = Step::Scale, s.effect = s.c; break;
    case OpKind::Div: s.kind = Step::Scale, s.effect = 1.0 / s.c; break;
    case OpKind::Add: s.kind = Step::Shift, s.effect = s.c; break;
    case OpKind::Sub: s.kind = Step::Shift, s.effect = -s.c; break;
    default: break;
  }
  return s;
}

std::string step_str(const Step& s) {
  const char* sym = s.op == OpKind::Mul ? " * " : s.op == OpKind::Div ? " / " : s.op == OpKind::Add ? " + " : " - ";
  return sym + num(s.c);
}

// (x s1) s2 as one op on x, or -1.
ValueId fold_chain(Rewriter& rw, ValueId v, const Node& n) {
  const Step outer = step_of(rw, n);
  if (outer.kind == Step::None) return -1;
  const Node& inner_node = rw.node(outer.x);
  const Step inner = step_of(rw, inner_node);
  if (inner.kind != outer.kind || rw.is_constant(inner.x)) return -1;
  OpKind op;
  double c;
  if (outer.kind == Step::Scale) {
    const bool up = std::fabs(inner.effect) >= 1 && std::fabs(outer.effect) >= 1;
    const bool down = std::fabs(inner.effect) <= 1 && std::fabs(outer.effect) <= 1;
    if (!up && !down) return -1;
    if (inner.op == OpKind::Mul && outer.op == OpKind::Mul) op = OpKind::Mul, c = inner.c * outer.c;
    else if (inner.op == OpKind::Div && outer.op == OpKind::Div) op = OpKind::Div, c = inner.c * outer.c;
    else if (inner.op == OpKind::Mul) op = OpKind::Mul, c = inner.c / outer.c;
    else op = OpKind::Mul, c = outer.c / inner.c;
    if (!float_normal(c)) return -1;
  } else {
    if ((inner.effect > 0) != (outer.effect > 0)) return -1;
    op = OpKind::Add;
    c = inner.effect + outer.effect;
    if (!(std::fabs(c) <= FLT_MAX)) return -1;
  }
  const ValueId k = rw.emit_constant(c, n.loc);
  const ValueId w = rw.emit_op(op, {inner.x, k}, n.type, n.loc, {}, n.name);
  rw.note(rw.describe(v) + ": x" + step_str(inner) + step_str(outer) + " -> x" +
          (op == OpKind::Mul ? " * " : op == OpKind::Div ? " / " : " + ") + num(c));
  return w;
}

// The operand `x` when `n` is an exact identity on it, else -1.
ValueId identity_operand(const Rewriter& rw, const Node& n) {
  if (n.op == OpKind::Neg) {
    const Node& in = rw.node(n.operands[0]);
    return in.op == OpKind::Neg ? in.operands[0] : -1;
  }
  if (n.operands.size() != 2) return -1;
  const ValueId a = n.operands[0], b = n.operands[1];
  double ca = 0, cb = 0;
  const bool ka = rw.is_constant(a, &ca), kb = rw.is_constant(b, &cb);
  if (ka == kb) return -1;
  const bool neg_zero = kb && cb == 0.0 && std::signbit(cb);
  const bool pos_zero = kb && cb == 0.0 && !std::signbit(cb);
  switch (n.op) {
    case OpKind::Mul: return kb && cb == 1.0 ? a : ka && ca == 1.0 ? b : -1;
    case OpKind::Div:
    case OpKind::Pow: return kb && cb == 1.0 ? a : -1;
    case OpKind::Sub: return pos_zero ? a : -1;
    case OpKind::Add: return neg_zero ? a : ka && ca == 0.0 && std::signbit(ca) ? b : -1;
    default: return -1;
  }
}

}  // namespace

bool fold_algebra(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (!is_elementwise(n.op)) return rw.keep(std::move(n));
    if (ValueId x = identity_operand(rw, n); x >= 0 && rw.can_replace(v, x)) {
      rw.note(rw.describe(v) + " is an identity on its operand -> removed");
      return x;
    }
    if (n.op == OpKind::Add && n.operands[0] == n.operands[1] && !rw.is_constant(n.operands[0])) {
      const ValueId two = rw.emit_constant(2.0, n.loc);
      rw.note(rw.describe(v) + ": x + x -> x * 2");
      return rw.emit_op(OpKind::Mul, {n.operands[0], two}, n.type, n.loc, {}, n.name);
    }
    if (ValueId w = fold_chain(rw, v, n); w >= 0) return w;
    return rw.keep(std::move(n));
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
