// tests/random_chains.h — a seeded generator of random valid chains for the
// codegen tests: an anchor of each kind (linear, matmul, conv2d) with small
// shapes, a random DAG of elementwise ops with scalar / per-channel /
// per-feature / per-row / full broadcast operands and values used twice, and
// often a reduction, softmax or pool (with consumers) at the end. Every chain
// is a prepared Graph; the same seed gives the same chain.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fusejit/ir.h"

namespace fusejit::testing {

class ChainRng {
 public:
  explicit ChainRng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t range(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double real(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return real(0, 1) < p; }
  template <class T>
  T pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  uint64_t state_;
};

class RandomChainBuilder {
 public:
  explicit RandomChainBuilder(uint64_t seed) : rng_(seed), seed_(seed) {}

  // A prepared graph, or the prepare_graph error (the caller retries).
  Expected<Graph> build() {
    g_.name = "random_" + std::to_string(seed_);
    const int p = static_cast<int>(rng_.range(0, 9));
    g_.precision = p < 7 ? Precision::FP32 : p == 7 ? Precision::TF32 : p == 8 ? Precision::BF16 : Precision::F16;
    adt_ = anchor_dtype(g_.precision);
    const int kind = static_cast<int>(rng_.range(0, 99));
    ValueId anchor = kind < 40 ? linear() : kind < 65 ? matmul() : conv();
    std::vector<ValueId> avail = {anchor};
    const int steps = static_cast<int>(rng_.range(0, 6));
    for (int s = 0; s < steps; ++s) avail.push_back(elementwise(avail, anchor_shape_));
    ValueId last = avail.back();
    if (rng_.chance(0.25) && avail.size() > 1) output(avail[static_cast<size_t>(rng_.range(0, avail.size() - 2))]);
    if (rng_.chance(0.65)) {
      ValueId t = tail(last);
      if (t >= 0) {
        last = t;
        const Node& tn = g_.node(t);
        const bool broadcasts_back = (op_category(tn.op) == OpCategory::Reduction && tn.attr_bool("keepdim")) ||
                                     op_category(tn.op) == OpCategory::Normalize;
        if (broadcasts_back && rng_.chance(0.4)) {  // e.g. x - max(x): a pointwise kernel after the row kernel
          const OpKind k = rng_.pick<OpKind>({OpKind::Sub, OpKind::Mul, OpKind::Add, OpKind::Maximum});
          last = op(k, {rng_.pick(avail), t});
        } else if (rng_.chance(0.5)) {
          last = elementwise({t}, tn.type.shape);
        }
      }
    }
    output(last);
    // Every value must be used: leftovers become outputs too.
    std::vector<int> uses(g_.nodes.size(), 0);
    for (const Node& n : g_.nodes)
      for (ValueId o : n.operands) ++uses[static_cast<size_t>(o)];
    for (const Output& o : g_.outputs) ++uses[static_cast<size_t>(o.value)];
    for (size_t v = 0; v < g_.nodes.size(); ++v)
      if (!uses[v] && g_.nodes[v].op != OpKind::Input) output(static_cast<ValueId>(v));
    if (Status st = prepare_graph(g_); !st) return st.error();
    return g_;
  }

 private:
  ChainRng rng_;
  uint64_t seed_;
  Graph g_;
  DType adt_ = DType::F32;
  Shape anchor_shape_;
  OpKind anchor_op_ = OpKind::Linear;
  int inputs_ = 0;

  ValueId input(const Shape& shape, DType dt) {
    Node n;
    n.op = OpKind::Input;
    n.type = {dt, shape};
    n.name = "in" + std::to_string(inputs_++);
    return g_.add(std::move(n));
  }
  ValueId constant(double v) {
    Node n;
    n.op = OpKind::Constant;
    n.attrs["value"] = v;
    return g_.add(std::move(n));
  }
  ValueId op(OpKind k, std::vector<ValueId> operands, AttrMap attrs = {}) {
    Node n;
    n.op = k;
    n.operands = std::move(operands);
    n.attrs = std::move(attrs);
    return g_.add(std::move(n));
  }
  void output(ValueId v) {
    for (const Output& o : g_.outputs)
      if (o.value == v) return;
    g_.outputs.push_back({"y" + std::to_string(g_.outputs.size()), v, {}});
  }
  DType extra_dtype() { return rng_.chance(0.5) ? adt_ : DType::F32; }

  ValueId linear() {
    anchor_op_ = OpKind::Linear;
    const int64_t k = rng_.pick<int64_t>({1, 3, 8, 16, 33, 64, 100});
    const int64_t n = rng_.pick<int64_t>({1, 5, 16, 32, 64, 100, 128, 130, 200});
    const int rank = static_cast<int>(rng_.pick<int64_t>({1, 2, 2, 2, 3}));
    Shape xs;
    if (rank == 2) xs = {rng_.pick<int64_t>({1, 7, 32, 64, 100, 129, 200})};
    if (rank == 3) xs = {rng_.range(1, 4), rng_.range(1, 40)};
    xs.push_back(k);
    std::vector<ValueId> ops = {input(xs, adt_), input({n, k}, adt_)};
    if (rng_.chance(0.6)) ops.push_back(input({n}, adt_));
    ValueId a = op(OpKind::Linear, ops);
    anchor_shape_ = xs;
    anchor_shape_.back() = n;
    return a;
  }

  ValueId matmul() {
    anchor_op_ = OpKind::Matmul;
    const int nb = static_cast<int>(rng_.range(0, 2));
    Shape batch, ab, bb;
    for (int d = 0; d < nb; ++d) {
      const int64_t e = rng_.range(1, 3);
      batch.push_back(e);
      ab.push_back(rng_.chance(0.3) ? 1 : e);
      bb.push_back(rng_.chance(0.3) ? 1 : e);
    }
    if (rng_.chance(0.2) && !ab.empty()) ab.erase(ab.begin());  // fewer batch dims on one side
    const int64_t m = rng_.pick<int64_t>({1, 9, 32, 64, 130});
    const int64_t k = rng_.pick<int64_t>({1, 4, 17, 64});
    const int64_t n = rng_.pick<int64_t>({1, 8, 31, 64, 128, 150});
    Shape as = ab, bs = bb;
    as.insert(as.end(), {m, k});
    bs.insert(bs.end(), {k, n});
    ValueId a = op(OpKind::Matmul, {input(as, adt_), input(bs, adt_)});
    Shape out;
    const size_t rank_batch = std::max(ab.size(), bb.size());
    for (size_t d = 0; d < rank_batch; ++d) {
      auto dim = [&](const Shape& s) -> int64_t {
        const size_t off = rank_batch - s.size();
        return d < off ? 1 : s[d - off];
      };
      out.push_back(std::max(dim(ab), dim(bb)));
    }
    out.insert(out.end(), {m, n});
    anchor_shape_ = out;
    return a;
  }

  ValueId conv() {
    anchor_op_ = OpKind::Conv2d;
    const int64_t nb = rng_.range(1, 3);
    int64_t cin = rng_.pick<int64_t>({1, 3, 4, 8, 16});
    int64_t cout = rng_.pick<int64_t>({1, 4, 8, 16, 32, 48, 130});
    int64_t groups = 1;
    if (rng_.chance(0.2)) {
      groups = rng_.pick<int64_t>({2, 4});
      cin = groups * rng_.range(1, 3);
      cout = groups * rng_.range(1, 6);
    } else if (rng_.chance(0.08)) {
      groups = cin;  // depthwise
      cout = cin * rng_.range(1, 2);
    }
    const int64_t kh = rng_.pick<int64_t>({1, 2, 3, 3, 5}), kw = rng_.chance(0.7) ? kh : rng_.pick<int64_t>({1, 3});
    const int64_t sh = rng_.pick<int64_t>({1, 1, 2}), sw = rng_.chance(0.8) ? sh : 1;
    const int64_t ph = rng_.range(0, 2), pw = rng_.chance(0.8) ? ph : 0;
    const int64_t dh = rng_.pick<int64_t>({1, 1, 1, 2}), dw = rng_.chance(0.8) ? dh : 1;
    const int64_t h = rng_.range(5, 33), w = rng_.range(5, 33);
    std::vector<ValueId> ops = {input({nb, cin, h, w}, adt_), input({cout, cin / groups, kh, kw}, adt_)};
    if (rng_.chance(0.6)) ops.push_back(input({cout}, adt_));
    AttrMap at;
    at["stride"] = std::vector<int64_t>{sh, sw};
    at["padding"] = std::vector<int64_t>{ph, pw};
    at["dilation"] = std::vector<int64_t>{dh, dw};
    at["groups"] = groups;
    ValueId a = op(OpKind::Conv2d, ops, at);
    const int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    anchor_shape_ = {nb, cout, oh, ow};
    return a;
  }

  // A shape that broadcasts to `s` without widening it.
  Shape broadcast_operand(const Shape& s) {
    const int r = static_cast<int>(s.size());
    std::vector<Shape> options = {Shape(s), Shape{1}};
    if (r >= 1) options.push_back({s.back()});  // per feature / last dim
    if (r >= 2) {
      Shape row(s.begin(), s.end() - 1);
      row.push_back(1);
      options.push_back(row);  // per row
    }
    if (anchor_op_ == OpKind::Conv2d && r == 4 && s == anchor_shape_) {
      options.push_back({s[1], 1, 1});      // per channel
      options.push_back({1, s[1], 1, 1});
      options.push_back({s[2], s[3]});      // per pixel
    }
    return rng_.pick(options);
  }

  // A value safe for log/sqrt/rsqrt/div/pow: |x| + c (a leaf expression when x is one).
  ValueId positive(ValueId x, double c) { return op(OpKind::Add, {op(OpKind::Abs, {x}), constant(c)}); }

  ValueId elementwise(const std::vector<ValueId>& avail, const Shape& shape) {
    ValueId x = rng_.chance(0.6) ? avail.back() : rng_.pick(avail);
    if (rng_.chance(0.5)) {
      const OpKind k = rng_.pick<OpKind>({OpKind::Relu, OpKind::LeakyRelu, OpKind::Gelu, OpKind::Sigmoid, OpKind::Tanh,
                                          OpKind::Silu, OpKind::Mish, OpKind::Softplus, OpKind::Hardswish,
                                          OpKind::Hardsigmoid, OpKind::Hardtanh, OpKind::Elu, OpKind::Exp,
                                          OpKind::Log, OpKind::Abs, OpKind::Neg, OpKind::Sqrt, OpKind::Rsqrt,
                                          OpKind::Square, OpKind::Clamp});
      AttrMap at;
      switch (k) {
        case OpKind::LeakyRelu: at["negative_slope"] = rng_.real(0.01, 0.3); break;
        case OpKind::Gelu: at["approximate"] = std::string(rng_.chance(0.5) ? "none" : "tanh"); break;
        case OpKind::Softplus:
          at["beta"] = rng_.pick<double>({1.0, 0.5, 2.0});
          at["threshold"] = rng_.pick<double>({20.0, 1.0});
          break;
        case OpKind::Hardtanh:
          at["min_val"] = -rng_.real(0.1, 2);
          at["max_val"] = rng_.real(0.1, 2);
          break;
        case OpKind::Elu: at["alpha"] = rng_.real(0.5, 1.5); break;
        case OpKind::Clamp:
          if (rng_.chance(0.7)) at["min"] = -rng_.real(0, 1);
          if (rng_.chance(0.7)) at["max"] = rng_.real(0, 1);
          break;
        default: break;
      }
      if (k == OpKind::Log || k == OpKind::Sqrt || k == OpKind::Rsqrt) x = positive(x, 0.5);
      if (k == OpKind::Exp) {  // keep exp finite
        AttrMap c;
        c["min"] = -10.0;
        c["max"] = 10.0;
        x = op(OpKind::Clamp, {x}, c);
      }
      return op(k, {x}, at);
    }
    const OpKind k = rng_.pick<OpKind>(
        {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Minimum, OpKind::Maximum, OpKind::Pow});
    ValueId y;
    const int which = static_cast<int>(rng_.range(0, 3));
    if (which == 0 && avail.size() > 1) {
      y = rng_.pick(avail);  // a value used twice
    } else if (which == 1 || k == OpKind::Pow) {
      y = constant(k == OpKind::Pow ? rng_.pick<double>({0.5, 1.5, 2.0, 3.0}) : rng_.real(-2, 2));
    } else {
      y = input(broadcast_operand(shape), extra_dtype());
    }
    if (k == OpKind::Pow) return op(k, {positive(x, 0.5), y});
    if (k == OpKind::Div) return op(k, {x, positive(y, 0.5)});
    return rng_.chance(0.5) ? op(k, {x, y}) : op(k, {y, x});
  }

  ValueId tail(ValueId x) {
    const Shape& s = anchor_shape_;  // every epilogue value has the anchor's shape
    const int r = static_cast<int>(s.size());
    const int64_t col_dim = anchor_op_ == OpKind::Conv2d ? 1 : r - 1;
    const int kind = static_cast<int>(rng_.range(0, 99));
    if (kind < 40) {  // reduction
      const OpKind k = rng_.pick<OpKind>({OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::LogSumExp});
      std::vector<int64_t> dims;
      if (rng_.chance(0.6)) {
        dims = {col_dim};
      } else if (rng_.chance(0.3)) {  // every GEMM row: a conv's pixels, a linear's / matmul's leading dims
        if (anchor_op_ == OpKind::Conv2d) dims = {2, 3};
        for (int d = 0; d < r - 1 && anchor_op_ != OpKind::Conv2d; ++d) dims.push_back(d);
      } else {
        for (int d = 0; d < r; ++d)
          if (rng_.chance(0.5)) dims.push_back(d);
        if (dims.empty()) dims.push_back(rng_.range(0, r - 1));
      }
      AttrMap at;
      at["dims"] = dims;
      at["keepdim"] = rng_.chance(0.5);
      return op(k, {x}, at);
    }
    if (kind < 60) {
      AttrMap at;
      at["dim"] = rng_.chance(0.6) ? col_dim : rng_.range(0, r - 1);
      return op(rng_.chance(0.5) ? OpKind::Softmax : OpKind::LogSoftmax, {x}, at);
    }
    if (anchor_op_ == OpKind::Conv2d) {
      if (kind < 68) return op(OpKind::GlobalAvgPool, {x});
      const bool is_max = rng_.chance(0.5);
      const int64_t limit = std::min(s[2], s[3]);
      AttrMap at;
      if (rng_.chance(0.6)) {  // the fusable kind: kernel == stride, no padding
        const int64_t k = std::min<int64_t>(rng_.pick<int64_t>({2, 2, 3, 4}), limit);
        at["kernel_size"] = std::vector<int64_t>{k, k};
      } else {
        const int64_t k = std::min<int64_t>(rng_.range(1, 4), limit + 1);
        at["kernel_size"] = std::vector<int64_t>{k, k};
        at["stride"] = std::vector<int64_t>{rng_.range(1, 3), rng_.range(1, 3)};
        at["padding"] = std::vector<int64_t>{rng_.range(0, k / 2), rng_.range(0, k / 2)};
        at["ceil_mode"] = rng_.chance(0.3);
        if (!is_max) at["count_include_pad"] = rng_.chance(0.5);
        if (is_max && rng_.chance(0.2)) at["dilation"] = std::vector<int64_t>{2, 1};
      }
      return op(is_max ? OpKind::MaxPool2d : OpKind::AvgPool2d, {x}, at);
    }
    if (kind < 80) {
      const int64_t k = std::min<int64_t>(rng_.range(1, 4), s.back());
      AttrMap at;
      at["kernel_size"] = k;
      at["stride"] = rng_.range(1, 3);
      at["padding"] = rng_.range(0, k / 2);
      at["ceil_mode"] = rng_.chance(0.3);
      const bool is_max = rng_.chance(0.5);
      if (!is_max) at["count_include_pad"] = rng_.chance(0.5);
      return op(is_max ? OpKind::MaxPool1d : OpKind::AvgPool1d, {x}, at);
    }
    return -1;
  }
};

// The chain for `seed` (retrying the next seeds if a draw is invalid, which
// the generator avoids but does not rule out, e.g. a pool wider than its input).
inline Expected<Graph> random_chain(uint64_t seed) {
  Error last;
  for (uint64_t attempt = 0; attempt < 100; ++attempt) {
    Expected<Graph> g = RandomChainBuilder(seed * 1000 + attempt).build();
    if (g) return g;
    last = g.error();
  }
  return last;
}

// `count` chains for seeds first_seed, first_seed + 1, ...
inline std::vector<Graph> random_chains(int count, uint64_t first_seed = 1) {
  std::vector<Graph> out;
  for (int i = 0; i < count; ++i) {
    Expected<Graph> g = random_chain(first_seed + static_cast<uint64_t>(i));
    if (g) out.push_back(g.take());
  }
  return out;
}

}  // namespace fusejit::testing
