// Dense vs sampled reference on random graphs, the memory budget, errors, and
// the sampled reference on the real seed problem sizes (timed).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <thread>

#include "fusejit/builder.h"
#include "fusejit/reference.h"

namespace fusejit {
namespace {

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// PyTorch's pooling output size (ceil_mode drops a window starting in the right padding).
int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// A random chain: an anchor, then 3..8 steps of elementwise ops (with new
// broadcast inputs or earlier values), keepdim reductions folded back,
// softmax-like ops and pooling.
class RandomGraph {
 public:
  explicit RandomGraph(uint64_t seed) : rng_(seed) {}

  Expected<Graph> make() {
    GraphBuilder g(Precision::FP32, "random");
    Value v = anchor(g);
    earlier_.push_back({v, shape_});
    for (int s = pick(3, 8); s > 0; --s) {
      v = step(g, v);
      earlier_.push_back({v, shape_});
    }
    g.output("y", v);
    if (pick(0, 2) == 0) g.output("y2", earlier_[1].first.sigmoid());  // a second output
    return g.build();
  }

 private:
  std::mt19937_64 rng_;
  Shape shape_;  // of the current value
  std::vector<std::pair<Value, Shape>> earlier_;
  int inputs_ = 0;

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  Value input(GraphBuilder& g, Shape s, InitKind init = InitKind::Auto) {
    return g.input("in" + std::to_string(inputs_++), std::move(s), std::nullopt, init);
  }

  Value anchor(GraphBuilder& g) {
    int64_t kind = pick(0, 2);
    if (kind == 0) {  // linear, 2-D or 3-D x
      int64_t k = pick(1, 40), n = pick(2, 12);
      Shape xs = pick(0, 1) ? Shape{pick(1, 9), k} : Shape{pick(1, 3), pick(1, 5), k};
      Value x = input(g, xs);
      Value w = input(g, {n, k});
      shape_ = xs;
      shape_.back() = n;
      if (pick(0, 1)) return g.linear(x, w);
      Value b = input(g, {n});
      return g.linear(x, w, b);
    }
    if (kind == 1) {  // matmul with a broadcast batch
      int64_t batch = pick(1, 3), m = pick(1, 7), k = pick(1, 20), n = pick(2, 9);
      Value a = input(g, {batch, m, k});
      Value b = input(g, {k, n});
      shape_ = {batch, m, n};
      return g.matmul(a, b);
    }
    Conv2dOptions o;
    int64_t groups = pick(1, 2), cg = pick(1, 3), ocg = pick(1, 3), kh = pick(1, 3), kw = pick(1, 3);
    o.stride = {pick(1, 2), pick(1, 2)};
    o.padding = {pick(0, 1), pick(0, 1)};
    o.dilation = {pick(1, 2), pick(1, 2)};
    o.groups = groups;
    int64_t batch = pick(1, 2), h = pick(5, 10), w = pick(5, 10);
    Value x = input(g, {batch, groups * cg, h, w});
    shape_ = {batch, groups * ocg, pooled(h, kh, o.stride[0], o.padding[0], o.dilation[0], false),
              pooled(w, kw, o.stride[1], o.padding[1], o.dilation[1], false)};
    if (pick(0, 3) == 0) {  // the conv's dW from x and a gradient of z's shape
      Value dz = input(g, shape_);
      shape_ = {groups * ocg, cg, kh, kw};
      return g.conv2d_weight_grad(x, dz, {kh, kw}, o);
    }
    Value wt = input(g, {groups * ocg, cg, kh, kw});
    if (pick(0, 1)) return g.conv2d(x, wt, std::nullopt, o);
    Value b = input(g, {groups * ocg});
    return g.conv2d(x, wt, b, o);
  }

  Value unary(Value v) {
    switch (pick(0, 19)) {
      case 0: return v.relu();
      case 1: return v.leaky_relu(0.2);
      case 2: return v.gelu(pick(0, 1) == 1);
      case 3: return v.sigmoid();
      case 4: return v.tanh();
      case 5: return v.silu();
      case 6: return v.mish();
      case 7: return v.softplus(static_cast<double>(pick(1, 3)), 2.0);
      case 8: return v.hardswish();
      case 9: return v.hardsigmoid();
      case 10: return v.hardtanh(-0.5, 0.7);
      case 11: return v.elu(0.7);
      case 12: return (v * 0.3).exp();
      case 13: return (v.abs() + 1.0).log();
      case 14: return v.neg();
      case 15: return v.abs().sqrt();
      case 16: return (v.abs() + 1.0).rsqrt();
      case 17: return v.square();
      case 18: return v.clamp(-0.3, 0.4);
      default: return (v.abs() + 0.5).pow(1.5);
    }
  }

  Value binary(GraphBuilder& g, Value v) {
    Value other;
    std::vector<Value> same_shape;
    for (const auto& [e, s] : earlier_)
      if (s == shape_) same_shape.push_back(e);
    switch (pick(0, 3)) {
      case 0: other = input(g, shape_, InitKind::Normal); break;
      case 1: other = input(g, {shape_.back()}, InitKind::Normal); break;
      case 2: {  // [C,1,1]-like: one dim kept, the rest broadcast
        Shape s(shape_.size(), 1);
        auto d = static_cast<size_t>(pick(0, static_cast<int64_t>(shape_.size()) - 1));
        s[d] = shape_[d];
        other = input(g, s, InitKind::Normal);
        break;
      }
      default: other = same_shape[static_cast<size_t>(pick(0, static_cast<int64_t>(same_shape.size()) - 1))];
    }
    switch (pick(0, 6)) {
      case 0: return v + other;
      case 1: return v - other;
      case 2: return v * other;
      case 3: return v / (other.abs() + 1.0);
      case 4: return v.minimum(other);
      case 5: return v.maximum(other);
      default: return (v.abs() + 0.5).pow(other.clamp(-2.0, 2.0));
    }
  }

  Value step(GraphBuilder& g, Value v) {
    auto rank = static_cast<int64_t>(shape_.size());
    int64_t d = pick(0, rank - 1);
    switch (pick(0, 7)) {
      case 7: return layout(v, d);
      case 0:
      case 1: return unary(v);
      case 2: return binary(g, v);
      case 3:  // a keepdim reduction folded back (layernorm-like)
        switch (pick(0, 4)) {
          case 0: return v - v.mean({d}, true);
          case 1: return v / (v.abs().max({d}, true) + 1.0);
          case 2: return v - v.logsumexp({d}, true);
          case 3: return v * v.min({d}, true);
          default: return d == rank - 1 ? v + v.sum({d}, true) : v + v.sum({d, rank - 1}, true);
        }
      case 4:
        if (rank >= 3 && pick(0, 2) == 0) {  // a per-sample norm
          switch (pick(0, 2)) {
            case 0: return v.group_norm(1);
            case 1: return v.instance_norm();
            default: return v.layer_norm({shape_.back()});
          }
        }
        if (rank >= 2 && pick(0, 3) == 0) {  // batch_norm with its own [C] statistics
          Value mean = input(g, {shape_[1]}, InitKind::Normal);
          Value var = input(g, {shape_[1]}, InitKind::Uniform01);  // a variance: >= 0
          return v.batch_norm(mean, var);
        }
        return pick(0, 1) ? v.softmax(d) : v.log_softmax(d);
      case 5: return pool(g, v);
      default:
        if (rank == 4 && pick(0, 2) == 0) {
          shape_[2] = shape_[3] = 1;
          return v.global_avg_pool();
        }
        return unary(v);
    }
  }

  // erf, a round trip through a 16-bit cast, a comparison mask, or a layout op (shape_ follows).
  Value layout(Value v, int64_t d) {
    const auto rank = static_cast<int64_t>(shape_.size());
    switch (pick(0, 5)) {
      case 0: return pick(0, 1) ? v.erf() : v.cast(pick(0, 1) ? DType::BF16 : DType::F16).cast(DType::F32);
      case 1:  // eq(v, relu(v)): 1 where v >= 0
        return v * v.gt(0.1) + v.ge(v.sigmoid()) - v.lt(-0.2) + v.le(0.0) * v.eq(v.relu());
      case 2: {
        if (rank < 2) return v.erf();
        const int64_t e = pick(0, rank - 1);
        std::swap(shape_[static_cast<size_t>(d)], shape_[static_cast<size_t>(e)]);
        return v.transpose(d, e);
      }
      case 3: return v * v.sum({d}, true).expand(shape_);
      default: {
        Shape to = shape_;
        if (rank >= 2 && pick(0, 1)) {  // the last two dims merged
          const int64_t last = to.back();
          to.pop_back();
          to.back() *= last;
        } else {
          to.insert(to.begin() + pick(0, rank), 1);  // a size-1 dim added
        }
        shape_ = to;
        return v.reshape(to);
      }
    }
  }

  // flip, im2col, insert_zeros or a pool's backward (its grad: the pool of v itself), or an adjoint:
  // col2im of im2col(v), max_pool2d_double_backward, insert_zeros_backward.
  Value gather(GraphBuilder& g, Value v) {
    using V = std::vector<int64_t>;
    const int64_t k = std::min({pick(1, 3), shape_[2], shape_[3]});
    Pool2dOptions o;
    o.kernel = {k, k};
    o.stride = {pick(1, 2), pick(1, 2)};
    const AttrMap window{{"kernel_size", V(o.kernel.begin(), o.kernel.end())},
                         {"stride", V(o.stride.begin(), o.stride.end())}};
    switch (pick(0, 7)) {
      case 0: return g.op(OpKind::Flip, {v}, {{"dims", V{pick(0, 3)}}});
      case 5: {  // grad shaped like v: tanh(v)
        const Value d = g.op(OpKind::MaxPool2dDoubleBackward, {v, v.tanh()}, window);
        shape_[2] = pooled(shape_[2], k, o.stride[0], 0, 1, false), shape_[3] = pooled(shape_[3], k, o.stride[1], 0, 1, false);
        return d;
      }
      case 6: {  // extra makes (H - 1 - extra + 2 crop) a multiple of the stride
        V stride{pick(1, 2), pick(1, 2)}, extra(2), crop{pick(0, 1), pick(0, 1)};
        for (size_t i = 0; i < 2; ++i) {
          extra[i] = (shape_[2 + i] - 1 + 2 * crop[i]) % stride[i];
          shape_[2 + i] = (shape_[2 + i] - 1 - extra[i] + 2 * crop[i]) / stride[i] + 1;
        }
        return g.op(OpKind::InsertZerosBackward, {v}, {{"stride", stride}, {"extra", extra}, {"crop", crop}});
      }
      case 7: {  // back to v's shape
        AttrMap a = window;
        a["input_shape"] = shape_;
        return g.op(OpKind::Im2colBackward, {g.op(OpKind::Im2col, {v}, window).tanh()}, a);
      }
      case 1: return g.op(OpKind::MaxPool2dBackward, {v, v.max_pool2d(o).sigmoid()}, window);
      case 2: {
        AttrMap a = window;
        a["input_shape"] = shape_;
        return g.op(OpKind::AvgPool2dBackward, {v.avg_pool2d(o).tanh()}, a);
      }
      case 3: {
        const V stride{pick(1, 2), pick(1, 2)}, extra{pick(0, 1), pick(0, 1)};
        for (size_t i = 0; i < 2; ++i) shape_[2 + i] = (shape_[2 + i] - 1) * stride[i] + 1 + extra[i];
        return g.op(OpKind::InsertZeros, {v}, {{"stride", stride}, {"extra", extra}});
      }
      default: {
        const int64_t oh = pooled(shape_[2], k, o.stride[0], 0, 1, false), ow = pooled(shape_[3], k, o.stride[1], 0, 1, false);
        shape_ = {shape_[1] * k * k, shape_[0] * oh * ow};
        return g.op(OpKind::Im2col, {v}, window);
      }
    }
  }

  Value pool(GraphBuilder& g, Value v) {
    auto rank = shape_.size();
    if (rank == 4 && pick(0, 1) == 0) return gather(g, v);
    if (rank == 4 && pick(0, 1)) {
      int64_t k = std::min({pick(1, 3), shape_[2], shape_[3]});
      Pool2dOptions o;
      o.kernel = {k, k};
      o.stride = {pick(1, 2), pick(1, 2)};
      o.padding = {pick(0, k / 2), pick(0, k / 2)};
      o.ceil_mode = pick(0, 1) == 1;
      o.count_include_pad = pick(0, 1) == 1;
      shape_[2] = pooled(shape_[2], k, o.stride[0], o.padding[0], 1, o.ceil_mode);
      shape_[3] = pooled(shape_[3], k, o.stride[1], o.padding[1], 1, o.ceil_mode);
      return pick(0, 1) ? v.max_pool2d(o) : v.avg_pool2d(o);
    }
    int64_t k = std::min(pick(1, 3), shape_.back());
    Pool1dOptions o{k, pick(1, 2), pick(0, k / 2), pick(0, 1) == 1, pick(0, 1) == 1};
    shape_.back() = pooled(shape_.back(), k, o.stride, o.padding, 1, o.ceil_mode);
    return pick(0, 1) ? v.max_pool1d(o) : v.avg_pool1d(o);
  }
};

TEST(ReferenceSampled, AgreesWithDenseOnRandomGraphs) {
  int checked = 0;
  std::set<OpKind> ops;
  for (uint64_t seed = 1; seed <= 300; ++seed) {  // 300: enough graphs to use every op
    auto graph = RandomGraph(seed).make();
    ASSERT_TRUE(graph) << "seed " << seed << ": " << graph.error().str();
    for (const Node& n : graph->nodes) ops.insert(n.op);
    std::vector<HostTensor> inputs = make_random_inputs(*graph, seed);
    auto dense = evaluate_reference(*graph, inputs);
    ASSERT_TRUE(dense) << dense.error().str();
    ASSERT_EQ(dense->size(), graph->outputs.size());
    for (size_t o = 0; o < graph->outputs.size(); ++o) {
      const std::vector<double>& full = (*dense)[o];
      ASSERT_EQ(static_cast<int64_t>(full.size()), graph->node(graph->outputs[o].value).type.numel());
      std::vector<int64_t> idx = pick_samples(static_cast<int64_t>(full.size()), 40, seed);
      idx.push_back(idx.front());  // a repeated index
      for (int threads : {1, 3}) {
        ReferenceOptions opts;
        opts.threads = threads;
        auto sampled = evaluate_reference_at(*graph, inputs, static_cast<int>(o), idx, opts);
        ASSERT_TRUE(sampled) << sampled.error().str();
        for (size_t k = 0; k < idx.size(); ++k)
          ASSERT_TRUE(same((*sampled)[k], full[static_cast<size_t>(idx[k])]))
              << "seed " << seed << " output " << o << " index " << idx[k] << ": sampled " << (*sampled)[k]
              << " dense " << full[static_cast<size_t>(idx[k])] << "\n"
              << print_graph(*graph);
        checked += static_cast<int>(idx.size());
      }
      // Not all NaN: the graphs keep values in range, so the agreement means something.
      EXPECT_TRUE(std::any_of(full.begin(), full.end(), [](double x) { return std::isfinite(x); }))
          << print_graph(*graph);
    }
  }
  EXPECT_GT(checked, 4000);
  // The graphs cover every op of the table.
  for (const OpInfo& info : all_ops()) EXPECT_TRUE(ops.count(info.op)) << "no random graph uses " << info.name;
}

Graph small_graph() {
  GraphBuilder g;
  Value x = g.input("x", {64, 256});
  Value w = g.input("w", {512, 256});
  g.output("y", g.linear(x, w).relu().softmax(1));
  auto graph = g.build();
  EXPECT_TRUE(graph) << graph.error().str();
  return graph.take();
}

TEST(ReferenceSampled, MemoryBudgetPointsToSampledMode) {
  Graph g = small_graph();
  auto inputs = make_random_inputs(g, 1);
  ReferenceOptions tight;
  tight.max_dense_bytes = 256 << 10;  // two live 64x512 fp64 buffers need 512 KiB
  auto dense = evaluate_reference(g, inputs, tight);
  ASSERT_FALSE(dense);
  EXPECT_NE(dense.error().message.find("evaluate_reference_at"), std::string::npos) << dense.error().message;
  auto sampled = evaluate_reference_at(g, inputs, 0, pick_samples(64 * 512, 100, 1), tight);
  EXPECT_TRUE(sampled);
  tight.max_dense_bytes = 1 << 20;
  EXPECT_TRUE(evaluate_reference(g, inputs, tight));
}

TEST(ReferenceSampled, BadArgumentsAreErrors) {
  Graph g = small_graph();
  auto inputs = make_random_inputs(g, 1);
  EXPECT_FALSE(evaluate_reference_at(g, inputs, 1, {0}));                // no output 1
  EXPECT_FALSE(evaluate_reference_at(g, inputs, 0, {64 * 512}));         // index past the end
  EXPECT_FALSE(evaluate_reference_at(g, inputs, 0, {-1}));
  auto fewer = inputs;
  fewer.pop_back();
  EXPECT_FALSE(evaluate_reference(g, fewer));
  auto wrong = inputs;
  wrong[1].data.resize(10);
  EXPECT_FALSE(evaluate_reference(g, wrong));
  auto empty = evaluate_reference_at(g, inputs, 0, {});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

// ---- the seed problems at their real sizes -------------------------------------------

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct SeedRun {
  Graph graph;
  std::vector<HostTensor> inputs;
  std::vector<int64_t> idx;
  std::vector<double> ref;
};

// Builds, fills and samples one seed problem; prints the timings.
SeedRun run_seed(const char* label, Expected<Graph> graph, int64_t samples) {
  EXPECT_TRUE(graph) << graph.error().str();
  SeedRun r{graph.take(), {}, {}, {}};
  auto t0 = std::chrono::steady_clock::now();
  r.inputs = make_random_inputs(r.graph, 1);
  double fill = seconds_since(t0);
  int64_t numel = r.graph.node(r.graph.outputs[0].value).type.numel();
  r.idx = pick_samples(numel, samples, 1);
  t0 = std::chrono::steady_clock::now();
  auto ref = evaluate_reference_at(r.graph, r.inputs, 0, r.idx);
  double eval = seconds_since(t0);
  EXPECT_TRUE(ref) << ref.error().str();
  if (ref) r.ref = ref.take();
  int64_t in_numel = 0;
  for (const auto& t : r.inputs) in_numel += static_cast<int64_t>(t.data.size());
  std::printf("[ timing   ] %s: inputs %.1fM floats filled in %.2f s; %lld samples of %lld in %.2f s (%u threads)\n",
              label, static_cast<double>(in_numel) / 1e6, fill, static_cast<long long>(r.idx.size()),
              static_cast<long long>(numel), eval, std::thread::hardware_concurrency());
  // Generous bounds for a 2-core CI machine; the aim is seconds.
  EXPECT_LT(fill, 15.0) << label;
  EXPECT_LT(eval, 30.0) << label;
  return r;
}

// Independent spot checks: plain loops over the raw inputs, written separately from the reference.
double conv_at(const SeedRun& r, int64_t n, int64_t o, int64_t i, int64_t j) {
  const Shape& xs = r.inputs[0].type.shape;
  const Shape& ws = r.inputs[1].type.shape;
  double acc = r.inputs[2].data[static_cast<size_t>(o)];
  for (int64_t c = 0; c < ws[1]; ++c)
    for (int64_t a = 0; a < ws[2]; ++a)
      for (int64_t b = 0; b < ws[3]; ++b)
        acc += static_cast<double>(r.inputs[0].data[static_cast<size_t>(((n * xs[1] + c) * xs[2] + i + a) * xs[3] + j + b)]) *
               r.inputs[1].data[static_cast<size_t>(((o * ws[1] + c) * ws[2] + a) * ws[3] + b)];
  return acc;
}

TEST(ReferenceSampled, SeedProblemSizes) {
  constexpr int64_t kSamples = 100000;
  {
    GraphBuilder g(Precision::FP32, "seed1");
    Value x = g.input("x", {128, 64, 128, 128});
    Value w = g.input("conv_w", {128, 64, 3, 3});
    Value b = g.input("conv_b", {128});
    Value bias = g.input("bias", {128, 1, 1}, DType::F32, InitKind::Normal);
    g.output("y", g.conv2d(x, w, b).relu() + bias);
    SeedRun r = run_seed("seed 1 conv 64->128 3x3 (128,128,126,126)", g.build(), kSamples);
    ASSERT_EQ(r.ref.size(), r.idx.size());
    for (size_t s = 0; s < r.idx.size(); s += 9973) {
      int64_t f = r.idx[s], j = f % 126, i = (f / 126) % 126, o = (f / (126 * 126)) % 128, n = f / (126 * 126 * 128);
      double want = std::max(conv_at(r, n, o, i, j), 0.0) + r.inputs[3].data[static_cast<size_t>(o)];
      EXPECT_NEAR(r.ref[s], want, 1e-12 * (1 + std::fabs(want))) << "index " << f;
    }
    // Dense would need 4 GiB of buffers here: over a 1 GiB budget it is refused, not attempted.
    ReferenceOptions small;
    small.max_dense_bytes = int64_t{1} << 30;
    EXPECT_FALSE(evaluate_reference(r.graph, r.inputs, small));
  }
  {
    GraphBuilder g(Precision::FP32, "seed2");
    Value x = g.input("x", {1024, 8192});
    Value w = g.input("w", {8192, 8192});
    Value bias = g.input("bias", {8192}, DType::F32, InitKind::Normal);
    g.output("y", (g.linear(x, w) + bias).relu());
    SeedRun r = run_seed("seed 2 linear K=8192 (1024,8192)", g.build(), kSamples);
    ASSERT_EQ(r.ref.size(), r.idx.size());
    for (size_t s = 0; s < r.idx.size(); s += 9973) {
      int64_t m = r.idx[s] / 8192, n = r.idx[s] % 8192;
      double acc = r.inputs[2].data[static_cast<size_t>(n)];
      for (int64_t k = 0; k < 8192; ++k)
        acc += static_cast<double>(r.inputs[0].data[static_cast<size_t>(m * 8192 + k)]) *
               r.inputs[1].data[static_cast<size_t>(n * 8192 + k)];
      EXPECT_NEAR(r.ref[s], std::max(acc, 0.0), 1e-12 * (1 + std::fabs(acc))) << "index " << r.idx[s];
    }
  }
  {
    GraphBuilder g(Precision::FP32, "seed3");
    Value x = g.input("x", {128, 8, 256, 256});
    Value w = g.input("conv_w", {64, 8, 3, 3});
    Value b = g.input("conv_b", {64});
    Value bias = g.input("bias", {64, 1, 1}, DType::F32, InitKind::Normal);
    Pool2dOptions pool;
    pool.kernel = {4, 4};
    g.output("y", ((g.conv2d(x, w, b).tanh() * 2.0) + bias).max_pool2d(pool));
    SeedRun r = run_seed("seed 3 conv 8->64 + maxpool 4 (128,64,63,63)", g.build(), kSamples);
    ASSERT_EQ(r.ref.size(), r.idx.size());
    for (size_t s = 0; s < r.idx.size(); s += 9973) {
      int64_t f = r.idx[s], j = f % 63, i = (f / 63) % 63, o = (f / (63 * 63)) % 64, n = f / (63 * 63 * 64);
      double m = -1e300;
      for (int64_t a = 0; a < 4; ++a)
        for (int64_t c = 0; c < 4; ++c)
          m = std::max(m, std::tanh(conv_at(r, n, o, 4 * i + a, 4 * j + c)) * 2.0 +
                              r.inputs[3].data[static_cast<size_t>(o)]);
      EXPECT_NEAR(r.ref[s], m, 1e-12 * (1 + std::fabs(m))) << "index " << f;
    }
  }
}

}  // namespace
}  // namespace fusejit
