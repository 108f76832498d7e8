// One element of one node, in fp64. Shared by the dense and the sampled
// evaluator, which differ only in their context `Ctx`:
//   double ctx.value(ValueId, int64_t flat)      operand values
//   RowStats ctx.row_stats(ValueId, int64_t row)  softmax row statistics
//   const float* ctx.input_data(ValueId)          raw input tensors (anchors)
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/plan.h"
#include "reference/scalar_ops.h"

namespace fusejit::ref {

// A softmax row: its max and sum(exp(x - max)); a norm row (group, instance,
// layer norm): its mean and 1 / sqrt(var + eps).
struct RowStats {
  double max = 0;
  double sum = 0;
  double mean = 0;
  double rstd = 0;
};

// Whether a node keeps per-row statistics, and how many rows it has.
inline bool has_row_stats(const NodePlan& p) {
  return p.category == OpCategory::Normalize || (p.category == OpCategory::Norm && p.op != OpKind::BatchNorm);
}
inline int64_t stats_rows(const NodePlan& p) {
  if (p.category == OpCategory::Norm) return p.norm.len ? p.numel / p.norm.len : 0;
  return p.normalize.dim_size ? p.numel / p.normalize.dim_size : 0;
}

// Mean and biased variance of a norm row, two-pass in fp64 (a NaN or an
// infinity anywhere makes both NaN, like PyTorch).
template <class Ctx>
RowStats compute_norm_stats(const NodePlan& p, int64_t row, Ctx& ctx) {
  const NormPlan& q = p.norm;
  const ValueId x = p.operands[0];
  const int64_t first = row * q.len;
  double sum = 0;
  for (int64_t j = 0; j < q.len; ++j) sum += ctx.value(x, first + j);
  RowStats s;
  s.mean = sum / static_cast<double>(q.len);
  double m2 = 0;
  for (int64_t j = 0; j < q.len; ++j) {
    const double d = ctx.value(x, first + j) - s.mean;
    m2 += d * d;
  }
  s.rstd = 1.0 / std::sqrt(m2 / static_cast<double>(q.len) + q.eps);
  return s;
}

// Element `idx` of a norm node: (x - mean) * rstd, then * weight + bias.
template <class Ctx>
double norm_at(const NodePlan& p, ValueId id, int64_t idx, Ctx& ctx) {
  const NormPlan& q = p.norm;
  const double x = ctx.value(p.operands[0], idx);
  int64_t a;
  double v;
  if (p.op == OpKind::BatchNorm) {
    a = (idx / q.inner) % q.channels;
    v = (x - ctx.value(q.mean, a)) / std::sqrt(ctx.value(q.var, a) + q.eps);
  } else {
    const RowStats s = ctx.row_stats(id, idx / q.len);
    a = (idx % (q.groups * q.len)) / q.affine_div;
    v = (x - s.mean) * s.rstd;
  }
  if (q.weight >= 0) v *= ctx.value(q.weight, a);
  if (q.bias >= 0) v += ctx.value(q.bias, a);
  return v;
}

inline int64_t broadcast_index(const BroadcastMap& m, const std::vector<int64_t>& out_shape, int64_t idx) {
  if (m.identity) return idx;
  if (m.scalar) return 0;
  int64_t off = 0;
  for (size_t d = out_shape.size(); d-- > 0;) {
    int64_t e = out_shape[d];
    off += (idx % e) * m.strides[d];
    idx /= e;
  }
  return off;
}

// Calls fn(offset) for every input element reduced into output `idx`.
template <class Fn>
void for_each_reduced(const ReductionPlan& r, int64_t idx, Fn&& fn) {
  int64_t base = 0;
  for (size_t d = r.kept_extent.size(); d-- > 0;) {
    base += (idx % r.kept_extent[d]) * r.kept_stride[d];
    idx /= r.kept_extent[d];
  }
  size_t nd = r.red_extent.size();
  if (nd == 0) return fn(base);
  int64_t inner_e = r.red_extent[nd - 1], inner_s = r.red_stride[nd - 1];
  int64_t outer = inner_e ? r.count / inner_e : 0;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off = base, rest = o;
    for (size_t d = nd - 1; d-- > 0;) {
      off += (rest % r.red_extent[d]) * r.red_stride[d];
      rest /= r.red_extent[d];
    }
    for (int64_t i = 0; i < inner_e; ++i) fn(off + i * inner_s);
  }
}

// Row number and the offset of its first element, for a normalize node.
inline void normalize_row(const NormalizePlan& q, int64_t idx, int64_t& row, int64_t& first) {
  int64_t outer = idx / (q.dim_size * q.inner), in = idx % q.inner;
  row = outer * q.inner + in;
  first = outer * q.dim_size * q.inner + in;
}

template <class Ctx>
RowStats compute_row_stats(const NodePlan& p, int64_t row, Ctx& ctx) {
  if (p.category == OpCategory::Norm) return compute_norm_stats(p, row, ctx);
  const NormalizePlan& q = p.normalize;
  int64_t first = (row / q.inner) * q.dim_size * q.inner + row % q.inner;
  ValueId x = p.operands[0];
  RowStats s{-std::numeric_limits<double>::infinity(), 0.0};
  for (int64_t j = 0; j < q.dim_size; ++j) {
    double v = ctx.value(x, first + j * q.inner);
    if (std::isnan(v) || v > s.max) s.max = v;
    if (std::isnan(s.max)) break;
  }
  for (int64_t j = 0; j < q.dim_size; ++j) s.sum += std::exp(ctx.value(x, first + j * q.inner) - s.max);
  return s;
}

// Dot product of a length-k float row with a strided float column, in double.
inline double dot(const float* a, const float* b, int64_t k, int64_t b_stride) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= k; i += 4)
    for (int j = 0; j < 4; ++j)
      acc[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[(i + j) * b_stride]);
  for (; i < k; ++i) acc[0] += static_cast<double>(a[i]) * static_cast<double>(b[i * b_stride]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

inline double conv2d_at(const AnchorPlan& a, int64_t idx, const float* x, const float* w) {
  int64_t ox = idx % a.ow, oy = (idx / a.ow) % a.oh, o = (idx / (a.ow * a.oh)) % a.oc, b = idx / (a.ow * a.oh * a.oc);
  int64_t cg = a.c / a.groups, group = o / (a.oc / a.groups);
  double acc = 0;
  for (int64_t c = 0; c < cg; ++c) {
    const float* xp = x + ((b * a.c + group * cg + c) * a.h) * a.w_in;
    const float* wp = w + ((o * cg + c) * a.kh) * a.kw;
    for (int64_t i = 0; i < a.kh; ++i) {
      int64_t iy = oy * a.sh - a.ph + i * a.dh;
      if (iy < 0 || iy >= a.h) continue;
      for (int64_t j = 0; j < a.kw; ++j) {
        int64_t ix = ox * a.sw - a.pw + j * a.dw;
        if (ix < 0 || ix >= a.w_in) continue;
        acc += static_cast<double>(xp[iy * a.w_in + ix]) * static_cast<double>(wp[i * a.kw + j]);
      }
    }
  }
  return acc;
}

// conv2d_weight_grad: element idx of [Cout, Cin/groups, kh, kw] = the sum over the images and output
// pixels of grad[b, o, oy, ox] * x[b, c, oy*sh - ph + i*dh, ox*sw - pw + j*dw] (0 in the padding).
inline double conv2d_weight_grad_at(const AnchorPlan& a, int64_t idx, const float* x, const float* dz) {
  const int64_t cg = a.c / a.groups;
  const int64_t j = idx % a.kw, i = (idx / a.kw) % a.kh, cl = (idx / (a.kw * a.kh)) % cg, o = idx / (a.kw * a.kh * cg);
  const int64_t c = o / (a.oc / a.groups) * cg + cl;
  double acc = 0;
  for (int64_t b = 0; b < a.batch; ++b) {
    const float* xp = x + (b * a.c + c) * a.h * a.w_in;
    const float* gp = dz + (b * a.oc + o) * a.oh * a.ow;
    for (int64_t oy = 0; oy < a.oh; ++oy) {
      const int64_t iy = oy * a.sh - a.ph + i * a.dh;
      if (iy < 0 || iy >= a.h) continue;
      for (int64_t ox = 0; ox < a.ow; ++ox) {
        const int64_t ix = ox * a.sw - a.pw + j * a.dw;
        if (ix < 0 || ix >= a.w_in) continue;
        acc += static_cast<double>(gp[oy * a.ow + ox]) * static_cast<double>(xp[iy * a.w_in + ix]);
      }
    }
  }
  return acc;
}

template <class Ctx>
double anchor_at(const NodePlan& p, int64_t idx, Ctx& ctx) {
  const AnchorPlan& a = p.anchor;
  const float* x = ctx.input_data(a.x);
  const float* w = ctx.input_data(a.w);
  double bias = 0;
  if (p.op == OpKind::Linear) {
    int64_t row = idx / a.n, col = idx % a.n;
    if (a.bias >= 0) bias = ctx.value(a.bias, col);
    return dot(x + row * a.k, w + col * a.k, a.k, 1) + bias;
  }
  if (p.op == OpKind::Matmul) {
    int64_t col = idx % a.n, row = (idx / a.n) % a.m, rest = idx / (a.n * a.m);
    int64_t xo = row * a.k, wo = col;
    for (size_t d = a.batch_extent.size(); d-- > 0;) {
      int64_t c = rest % a.batch_extent[d];
      rest /= a.batch_extent[d];
      xo += c * a.a_batch_stride[d];
      wo += c * a.b_batch_stride[d];
    }
    return dot(x + xo, w + wo, a.k, a.n);
  }
  if (p.op == OpKind::Conv2dWeightGrad) return conv2d_weight_grad_at(a, idx, x, w);
  if (a.bias >= 0) bias = ctx.value(a.bias, (idx / (a.ow * a.oh)) % a.oc);
  return conv2d_at(a, idx, x, w) + bias;
}

template <class Ctx>
double pool_at(const NodePlan& p, int64_t idx, Ctx& ctx) {
  const PoolPlan& q = p.pool;
  ValueId x = p.operands[0];
  int64_t ox = idx % q.out_w, oy = (idx / q.out_w) % q.out_h, plane = idx / (q.out_w * q.out_h);
  int64_t base = plane * q.in_h * q.in_w;
  int64_t y0 = oy * q.sh - q.ph, x0 = ox * q.sw - q.pw;
  if (p.op == OpKind::MaxPool2d || p.op == OpKind::MaxPool1d) {
    double m = -std::numeric_limits<double>::infinity();  // the padding
    for (int64_t i = 0; i < q.kh; ++i) {
      int64_t iy = y0 + i * q.dh;
      if (iy < 0 || iy >= q.in_h) continue;
      for (int64_t j = 0; j < q.kw; ++j) {
        int64_t ix = x0 + j * q.dw;
        if (ix < 0 || ix >= q.in_w) continue;
        double v = ctx.value(x, base + iy * q.in_w + ix);
        if (v > m || std::isnan(v)) m = v;
        if (std::isnan(m)) return m;
      }
    }
    return m;
  }
  // Average (PyTorch's divisor rules); global_avg_pool is one window over the plane.
  int64_t y1 = std::min(y0 + q.kh, q.in_h + q.ph), x1 = std::min(x0 + q.kw, q.in_w + q.pw);
  int64_t padded = (y1 - y0) * (x1 - x0);
  y0 = std::max<int64_t>(y0, 0), x0 = std::max<int64_t>(x0, 0);
  y1 = std::min(y1, q.in_h), x1 = std::min(x1, q.in_w);
  double sum = 0;
  for (int64_t iy = y0; iy < y1; ++iy)
    for (int64_t ix = x0; ix < x1; ++ix) sum += ctx.value(x, base + iy * q.in_w + ix);
  int64_t divisor = q.count_include_pad ? padded : (y1 - y0) * (x1 - x0);
  return sum / static_cast<double>(divisor);
}

// The windows of a pool over one axis that hold input position `pos`: calls
// f(window, tap) for each (in the padded, dilated coordinates of the forward;
// tap: pos's place in the window).
template <class F>
void window_taps_holding(int64_t pos, int64_t k, int64_t s, int64_t pad, int64_t dil, int64_t out, F&& f) {
  for (int64_t t = 0; t < k; ++t) {
    const int64_t start = pos + pad - t * dil;
    if (start < 0 || start % s != 0 || start / s >= out) continue;
    f(start / s, t);
  }
}
template <class F>
void windows_holding(int64_t pos, int64_t k, int64_t s, int64_t pad, int64_t dil, int64_t out, F&& f) {
  window_taps_holding(pos, k, s, pad, dil, out, [&](int64_t o, int64_t) { f(o); });
}

// The first maximum of x's window (oh, ow) in the plane at xbase (the last
// NaN), as PyTorch's max_pool2d picks it: its offset in the plane, -1 if the
// window holds no element.
template <class Ctx>
int64_t window_argmax(const PoolPlan& q, ValueId x, int64_t xbase, int64_t oh, int64_t ow, Ctx& ctx) {
  const int64_t y0 = oh * q.sh - q.ph, x0 = ow * q.sw - q.pw;
  double m = -std::numeric_limits<double>::infinity();
  int64_t arg = -1;
  for (int64_t i = 0; i < q.kh; ++i) {
    const int64_t iy = y0 + i * q.dh;
    if (iy < 0 || iy >= q.in_h) continue;
    for (int64_t j = 0; j < q.kw; ++j) {
      const int64_t ix = x0 + j * q.dw;
      if (ix < 0 || ix >= q.in_w) continue;
      const double v = ctx.value(x, xbase + iy * q.in_w + ix);
      if (arg < 0 || v > m || std::isnan(v)) arg = iy * q.in_w + ix, m = v;
    }
  }
  return arg;
}

// The adjoints of insert_zeros, im2col and max_pool2d_backward at result element idx.
template <class Ctx>
double gather_adjoint_at(const NodePlan& p, int64_t idx, Ctx& ctx) {
  const PoolPlan& q = p.pool;
  const ValueId grad = p.operands[p.op == OpKind::MaxPool2dDoubleBackward ? 1 : 0];
  if (p.op == OpKind::MaxPool2dDoubleBackward) {  // idx = (plane, oh, ow): grad at the window's first maximum
    const int64_t ow = idx % q.out_w, oh = idx / q.out_w % q.out_h, plane = idx / (q.out_w * q.out_h);
    const int64_t arg = window_argmax(q, p.operands[0], plane * q.in_h * q.in_w, oh, ow, ctx);
    return arg < 0 ? 0.0 : ctx.value(grad, plane * q.in_h * q.in_w + arg);
  }
  const int64_t w = idx % q.in_w, h = idx / q.in_w % q.in_h, plane = idx / (q.in_w * q.in_h);
  if (p.op == OpKind::InsertZerosBackward) {  // the spread position of x[.., h, w], shifted by the crop
    const int64_t r = h * q.sh - q.ph, c = w * q.sw - q.pw;
    if (r < 0 || r >= q.out_h || c < 0 || c >= q.out_w) return 0.0;
    return ctx.value(grad, (plane * q.out_h + r) * q.out_w + c);
  }
  // col2im: the column entries (row (c, i, j), column (n, ho, wo)) that read x[n, c, h, w]
  const int64_t c = plane % q.channels, n = plane / q.channels;
  const int64_t cols = p.numel / (q.channels * q.in_h * q.in_w) * q.out_h * q.out_w;
  double sum = 0;
  window_taps_holding(h, q.kh, q.sh, q.ph, q.dh, q.out_h, [&](int64_t ho, int64_t i) {
    window_taps_holding(w, q.kw, q.sw, q.pw, q.dw, q.out_w, [&](int64_t wo, int64_t j) {
      const int64_t row = (c * q.kh + i) * q.kw + j, col = (n * q.out_h + ho) * q.out_w + wo;
      sum += ctx.value(grad, row * cols + col);
    });
  });
  return sum;
}

template <class Ctx>
double gather_at(const NodePlan& p, int64_t idx, Ctx& ctx) {
  const PoolPlan& q = p.pool;
  const ValueId x = p.operands[0];
  if (p.op == OpKind::Flip) {
    int64_t from = 0, stride = 1, rest = idx;
    for (size_t d = p.out_shape.size(); d-- > 0;) {
      const int64_t n = p.out_shape[d], c = rest % n;
      rest /= n;
      const bool flipped = std::find(q.flip_dims.begin(), q.flip_dims.end(), static_cast<int64_t>(d)) != q.flip_dims.end();
      from += (flipped ? n - 1 - c : c) * stride;
      stride *= n;
    }
    return ctx.value(x, from);
  }
  if (p.op == OpKind::InsertZeros) {
    // (i, j) in the spread tensor: the result's position shifted by the crop (ph, pw)
    const int64_t j = idx % q.out_w + q.pw, i = idx / q.out_w % q.out_h + q.ph, plane = idx / (q.out_w * q.out_h);
    if (i % q.sh || j % q.sw || i / q.sh >= q.in_h || j / q.sw >= q.in_w) return 0.0;
    return ctx.value(x, (plane * q.in_h + i / q.sh) * q.in_w + j / q.sw);
  }
  if (p.op == OpKind::Im2col) {
    const int64_t cols = p.out_shape[1], row = idx / cols, col = idx % cols;
    const int64_t c = row / (q.kh * q.kw), i = row / q.kw % q.kh, j = row % q.kw;
    const int64_t n = col / (q.out_h * q.out_w), ho = col / q.out_w % q.out_h, wo = col % q.out_w;
    const int64_t ih = ho * q.sh - q.ph + i * q.dh, iw = wo * q.sw - q.pw + j * q.dw;
    if (ih < 0 || ih >= q.in_h || iw < 0 || iw >= q.in_w) return 0.0;
    return ctx.value(x, ((n * q.channels + c) * q.in_h + ih) * q.in_w + iw);
  }
  if (p.op == OpKind::InsertZerosBackward || p.op == OpKind::Im2colBackward || p.op == OpKind::MaxPool2dDoubleBackward)
    return gather_adjoint_at(p, idx, ctx);
  // The pools' backward at input element idx = (plane, h, w).
  const int64_t w = idx % q.in_w, h = idx / q.in_w % q.in_h, plane = idx / (q.in_w * q.in_h);
  const ValueId grad = p.operands[p.op == OpKind::MaxPool2dBackward ? 1 : 0];
  const int64_t gbase = plane * q.out_h * q.out_w, xbase = plane * q.in_h * q.in_w;
  double sum = 0;
  windows_holding(h, q.kh, q.sh, q.ph, q.dh, q.out_h, [&](int64_t oh) {
    windows_holding(w, q.kw, q.sw, q.pw, q.dw, q.out_w, [&](int64_t ow) {
      const double g = ctx.value(grad, gbase + oh * q.out_w + ow);
      const int64_t y0 = oh * q.sh - q.ph, x0 = ow * q.sw - q.pw;
      if (p.op == OpKind::MaxPool2dBackward) {  // PyTorch: the first maximum, the last NaN
        if (window_argmax(q, x, xbase, oh, ow, ctx) == h * q.in_w + w) sum += g;
        return;
      }
      int64_t y1 = std::min(y0 + q.kh, q.in_h + q.ph), x1 = std::min(x0 + q.kw, q.in_w + q.pw);
      const int64_t padded = (y1 - y0) * (x1 - x0);
      const int64_t inside = (std::min(y1, q.in_h) - std::max<int64_t>(y0, 0)) * (std::min(x1, q.in_w) - std::max<int64_t>(x0, 0));
      sum += g / static_cast<double>(q.count_include_pad ? padded : inside);
    });
  });
  return sum;
}

template <class Ctx>
double reduction_at(const NodePlan& p, int64_t idx, Ctx& ctx) {
  const ReductionPlan& r = p.reduction;
  ValueId x = p.operands[0];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (p.op) {
    case OpKind::Sum:
    case OpKind::Mean: {
      double s = 0;
      for_each_reduced(r, idx, [&](int64_t off) { s += ctx.value(x, off); });
      return p.op == OpKind::Sum ? s : s / static_cast<double>(r.count);
    }
    case OpKind::Max:
    case OpKind::Min: {
      bool is_max = p.op == OpKind::Max;
      double m = is_max ? -kInf : kInf;
      for_each_reduced(r, idx, [&](int64_t off) {
        double v = ctx.value(x, off);
        if (std::isnan(v) || (is_max ? v > m : v < m)) m = std::isnan(m) ? m : v;
      });
      return m;
    }
    default: {  // logsumexp: PyTorch shifts by the max unless it is infinite
      double m = -kInf;
      for_each_reduced(r, idx, [&](int64_t off) {
        double v = ctx.value(x, off);
        if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
      });
      if (std::isnan(m)) return m;
      double shift = std::isinf(m) ? 0.0 : m, s = 0;
      for_each_reduced(r, idx, [&](int64_t off) { s += std::exp(ctx.value(x, off) - shift); });
      return std::log(s) + shift;
    }
  }
}

// Element `idx` of node `id` (never a leaf: contexts answer those themselves).
template <class Ctx>
double eval_at(const NodePlan& p, ValueId id, int64_t idx, Ctx& ctx) {
  switch (p.category) {
    case OpCategory::Anchor: return anchor_at(p, idx, ctx);
    case OpCategory::Unary: return apply_unary(p, ctx.value(p.operands[0], idx));
    case OpCategory::Binary: {
      double a = ctx.value(p.operands[0], broadcast_index(p.bcast[0], p.out_shape, idx));
      double b = ctx.value(p.operands[1], broadcast_index(p.bcast[1], p.out_shape, idx));
      return apply_binary(p.op, a, b);
    }
    case OpCategory::Reduction: return reduction_at(p, idx, ctx);
    case OpCategory::Normalize: {
      int64_t row, first;
      normalize_row(p.normalize, idx, row, first);
      RowStats s = ctx.row_stats(id, row);
      double v = ctx.value(p.operands[0], idx) - s.max;
      return p.op == OpKind::Softmax ? std::exp(v) / s.sum : v - std::log(s.sum);
    }
    case OpCategory::Pool: return pool_at(p, idx, ctx);
    case OpCategory::Gather: return gather_at(p, idx, ctx);
    case OpCategory::Norm: return norm_at(p, id, idx, ctx);
    case OpCategory::Layout:  // reshape: the same flat index; expand / transpose: strided
      return ctx.value(p.operands[0], p.op == OpKind::Reshape ? idx : broadcast_index(p.bcast[0], p.out_shape, idx));
    case OpCategory::Leaf: break;
  }
  return nan_value();
}

}  // namespace fusejit::ref
