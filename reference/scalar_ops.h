// Elementwise op semantics in fp64, PyTorch's formulas (NaN propagates).
#pragma once

#include <cmath>
#include <limits>
#include <numbers>

#include "reference/plan.h"

namespace fusejit::ref {

inline double nan_value() { return std::numeric_limits<double>::quiet_NaN(); }

// clamp that keeps NaN (comparisons with NaN are false).
inline double clamp_keep_nan(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

inline double softplus(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

inline double apply_unary(const NodePlan& p, double x) {
  switch (p.op) {
    case OpKind::Relu: return x < 0 ? 0.0 : x;
    case OpKind::LeakyRelu: return x > 0 ? x : p.p0 * x;
    case OpKind::Gelu:
      if (p.gelu_tanh) {
        const double k = std::sqrt(2.0 / std::numbers::pi);
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case OpKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Silu: return x / (1.0 + std::exp(-x));
    case OpKind::Mish: return x * std::tanh(std::log1p(std::exp(x)));
    case OpKind::Softplus: return softplus(x, p.p0, p.p1);
    case OpKind::Hardswish: return x * clamp_keep_nan(x + 3.0, 0.0, 6.0) / 6.0;
    case OpKind::Hardsigmoid: return clamp_keep_nan(x + 3.0, 0.0, 6.0) / 6.0;
    case OpKind::Hardtanh:
    case OpKind::Clamp: return clamp_keep_nan(x, p.p0, p.p1);
    case OpKind::Elu: return x > 0 ? x : p.p0 * std::expm1(x);
    case OpKind::Exp: return std::exp(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Neg: return -x;
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return 1.0 / std::sqrt(x);
    case OpKind::Square: return x * x;
    case OpKind::Erf: return std::erf(x);
    // Through float, as a kernel converts its fp32 value (NaN stays NaN, overflow gives inf).
    case OpKind::Cast: return round_to_dtype(static_cast<float>(x), p.cast_to);
    default: return nan_value();  // not a unary op (build_plans never lets this happen)
  }
}

inline double apply_binary(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div: return a / b;
    case OpKind::Minimum: return std::isnan(a) || std::isnan(b) ? nan_value() : std::min(a, b);
    case OpKind::Maximum: return std::isnan(a) || std::isnan(b) ? nan_value() : std::max(a, b);
    case OpKind::Pow: return std::pow(a, b);
    // Comparisons give 1 or 0 (false with a NaN, like PyTorch's bool result).
    case OpKind::Gt: return a > b ? 1.0 : 0.0;
    case OpKind::Ge: return a >= b ? 1.0 : 0.0;
    case OpKind::Lt: return a < b ? 1.0 : 0.0;
    case OpKind::Le: return a <= b ? 1.0 : 0.0;
    case OpKind::Eq: return a == b ? 1.0 : 0.0;
    default: return nan_value();
  }
}

}  // namespace fusejit::ref
