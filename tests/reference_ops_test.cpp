// The fp64 reference against hand-computed values, for every op of the op
// table. Expected numbers were worked out by hand or with Python's math module
// and a naive Python conv/pool (written independently of this code), never by
// the reference itself. Each case also checks that the sampled reference
// agrees with the dense one at every index.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "fusejit/builder.h"
#include "fusejit/reference.h"

namespace fusejit {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();

struct Tensor {
  Shape shape;
  std::vector<float> data;
};

// build(g, x, extras): x is input "x" passed through `x + z1 @ z2` (z1 = z2 =
// [[0]], so exactly x) to give the graph its anchor; with own_anchor the case
// receives the raw input and creates the anchor itself (or none: a pointwise
// program).
using Build = std::function<Value(GraphBuilder&, Value, std::vector<Value>&)>;
struct HandCase {
  std::string name;
  Tensor x;
  std::vector<Tensor> extra;
  Build build;
  std::vector<double> want;
  bool own_anchor = false;
};

Build un(std::function<Value(Value)> f) {
  return [f](GraphBuilder&, Value v, std::vector<Value>&) { return f(v); };
}
Build bin(std::function<Value(Value, Value)> f) {
  return [f](GraphBuilder&, Value v, std::vector<Value>& e) { return f(v, e.at(0)); };
}
Build op(OpKind kind, AttrMap attrs) {
  return [kind, attrs](GraphBuilder& g, Value v, std::vector<Value>&) { return g.op(kind, {v}, attrs); };
}
std::vector<float> iota(int n, float start = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

const Tensor kX{{2, 3}, {-4.0f, -2.0f, -0.5f, 0.0f, 1.5f, 4.0f}};
const Tensor kPos{{2, 3}, {0.25f, 1.0f, 2.0f, 4.0f, 9.0f, 0.5f}};
const Tensor kEdge{{1, 3}, {0.0f, -1.0f, 1.0f}};
const Tensor kRows{{2, 3}, iota(6)};       // [[1,2,3],[4,5,6]]
const Tensor kCube{{2, 2, 3}, iota(12)};   // 1..12
const Tensor kPi{{1, 1, 4, 4}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}};
const Tensor kNegPi{{1, 1, 4, 4}, {-3, -1, -4, -1, -5, -9, -2, -6, -5, -3, -5, -8, -9, -7, -9, -3}};
const Tensor kRamp5{{1, 1, 5, 5}, iota(25, 0.0f)};  // 0..24
const Tensor kNine{{1, 1, 3, 3}, iota(9)};          // 1..9
const Tensor kCastIn{{2, 3}, {1.00390625f, 1.01171875f, 1.005f, 70000.0f, kNaNf, -1.0f}};

std::vector<HandCase> unary_cases() {
  return {
      {"relu", kX, {}, un([](Value v) { return v.relu(); }), {0, 0, 0, 0, 1.5, 4}},
      {"leaky_relu", kX, {}, un([](Value v) { return v.leaky_relu(0.1); }), {-0.4, -0.2, -0.05, 0, 1.5, 4}},
      {"leaky_relu_default", kX, {}, un([](Value v) { return v.leaky_relu(); }), {-0.04, -0.02, -0.005, 0, 1.5, 4}},
      {"elu", kX, {}, un([](Value v) { return v.elu(0.5); }),
       {-0.4908421805556329, -0.43233235838169365, -0.1967346701436833, 0.0, 1.5, 4.0}},
      {"gelu", kX, {}, un([](Value v) { return v.gelu(); }),
       {-0.00012668496733247991, -0.04550026389635842, -0.15426876936299344, 0.0, 1.399789198096713,
        3.9998733150326675}},
      {"gelu_tanh", kX, {}, un([](Value v) { return v.gelu(true); }),
       {-7.024594819227126e-05, -0.04540230591222494, -0.15428599017485606, 0.0, 1.3995715769802328,
        3.9999297540518075}},
      {"sigmoid", kX, {}, un([](Value v) { return v.sigmoid(); }),
       {0.01798620996209156, 0.11920292202211755, 0.3775406687981454, 0.5, 0.8175744761936437, 0.9820137900379085}},
      {"tanh", kX, {}, un([](Value v) { return v.tanh(); }),
       {-0.999329299739067, -0.9640275800758169, -0.46211715726000974, 0.0, 0.9051482536448664, 0.999329299739067}},
      {"silu", kX, {}, un([](Value v) { return v.silu(); }),
       {-0.07194483984836623, -0.2384058440442351, -0.1887703343990727, 0.0, 1.2263617142904655, 3.928055160151634}},
      {"mish", kX, {}, un([](Value v) { return v.mish(); }),
       {-0.07259174079202552, -0.2525014826957091, -0.22074377465173, 0.0, 1.4033782663958028, 3.9974128069762385}},
      {"softplus", kX, {}, un([](Value v) { return v.softplus(); }),
       {0.01814992791780978, 0.1269280110429726, 0.4740769841801067, 0.6931471805599453, 1.7014132779827524,
        4.0181499279178094}},
      // beta 2, threshold 2: 2 * 1.5 and 2 * 4 exceed the threshold, so those stay linear.
      {"softplus_beta_threshold", kX, {}, un([](Value v) { return v.softplus(2.0, 2.0); }),
       {0.0001677031864478312, 0.00907496395890489, 0.15663084375911143, 0.34657359027997264, 1.5, 4.0}},
      {"hardswish", kX, {}, un([](Value v) { return v.hardswish(); }), {0, -2.0 / 6, -1.25 / 6, 0, 6.75 / 6, 4}},
      {"hardsigmoid", kX, {}, un([](Value v) { return v.hardsigmoid(); }), {0, 1.0 / 6, 2.5 / 6, 0.5, 4.5 / 6, 1}},
      {"hardtanh", kX, {}, un([](Value v) { return v.hardtanh(); }), {-1, -1, -0.5, 0, 1, 1}},
      {"hardtanh_range", kX, {}, un([](Value v) { return v.hardtanh(-1.0, 2.0); }), {-1, -1, -0.5, 0, 1.5, 2}},
      {"clamp_min", kX, {}, un([](Value v) { return v.clamp(-1.0, std::nullopt); }), {-1, -1, -0.5, 0, 1.5, 4}},
      {"clamp_max", kX, {}, un([](Value v) { return v.clamp(std::nullopt, 1.0); }), {-4, -2, -0.5, 0, 1, 1}},
      {"clamp_both", kX, {}, un([](Value v) { return v.clamp(-0.5, 0.5); }), {-0.5, -0.5, -0.5, 0, 0.5, 0.5}},
      {"exp", kX, {}, un([](Value v) { return v.exp(); }),
       {0.01831563888873418, 0.1353352832366127, 0.6065306597126334, 1.0, 4.4816890703380645, 54.598150033144236}},
      {"log", kPos, {}, un([](Value v) { return v.log(); }),
       {-1.3862943611198906, 0.0, 0.6931471805599453, 1.3862943611198906, 2.1972245773362196, -0.6931471805599453}},
      {"abs", kX, {}, un([](Value v) { return v.abs(); }), {4, 2, 0.5, 0, 1.5, 4}},
      {"neg", kX, {}, un([](Value v) { return v.neg(); }), {4, 2, 0.5, 0, -1.5, -4}},
      {"sqrt", kPos, {}, un([](Value v) { return v.sqrt(); }),
       {0.5, 1.0, 1.4142135623730951, 2.0, 3.0, 0.7071067811865476}},
      {"rsqrt", kPos, {}, un([](Value v) { return v.rsqrt(); }),
       {2.0, 1.0, 0.7071067811865475, 0.5, 1.0 / 3, 1.414213562373095}},
      {"square", kX, {}, un([](Value v) { return v.square(); }), {16, 4, 0.25, 0, 2.25, 16}},
      {"log_edges", kEdge, {}, un([](Value v) { return v.log(); }), {-kInf, kNaN, 0}},
      {"sqrt_edges", kEdge, {}, un([](Value v) { return v.sqrt(); }), {0, kNaN, 1}},
      {"rsqrt_edges", kEdge, {}, un([](Value v) { return v.rsqrt(); }), {kInf, kNaN, 1}},
      {"relu_nan", {{1, 2}, {kNaNf, -1.0f}}, {}, un([](Value v) { return v.relu(); }), {kNaN, 0}},
      {"clamp_nan", {{1, 2}, {kNaNf, 3.0f}}, {}, un([](Value v) { return v.clamp(0.0, 1.0); }), {kNaN, 1}},
      {"hardtanh_nan", {{1, 2}, {kNaNf, 3.0f}}, {}, un([](Value v) { return v.hardtanh(); }), {kNaN, 1}},
  };
}

std::vector<HandCase> binary_cases() {
  Tensor b{{3}, {0.5f, -2.0f, 4.0f}};  // broadcast over the rows of kX
  Tensor e{{3}, {0.5f, -2.0f, 3.0f}};
  Tensor col{{2, 1}, {10.0f, -1.0f}};
  Tensor nan_a{{1, 3}, {kNaNf, 1.0f, 2.0f}}, nan_b{{3}, {0.0f, kNaNf, 3.0f}};
  return {
      {"add", kX, {b}, bin([](Value x, Value y) { return x + y; }), {-3.5, -4, 3.5, 0.5, -0.5, 8}},
      {"sub", kX, {b}, bin([](Value x, Value y) { return x - y; }), {-4.5, 0, -4.5, -0.5, 3.5, 0}},
      {"mul", kX, {b}, bin([](Value x, Value y) { return x * y; }), {-2, 4, -2, 0, -3, 16}},
      {"div", kX, {b}, bin([](Value x, Value y) { return x / y; }), {-8, 1, -0.125, 0, -0.75, 1}},
      {"minimum", kX, {b}, bin([](Value x, Value y) { return x.minimum(y); }), {-4, -2, -0.5, 0, -2, 4}},
      {"maximum", kX, {b}, bin([](Value x, Value y) { return x.maximum(y); }), {0.5, -2, 4, 0.5, 1.5, 4}},
      {"pow", kPos, {e}, bin([](Value x, Value y) { return x.pow(y); }), {0.5, 1, 8, 2, 1.0 / 81, 0.125}},
      {"add_column", kX, {col}, bin([](Value x, Value y) { return x + y; }), {6, 8, 9.5, -1, 0.5, 3}},
      // [2,1] * [3] stretches both sides to [2,3].
      {"mul_both_sides", {{2, 1}, {1.0f, 2.0f}}, {{{3}, {1.0f, 10.0f, 100.0f}}},
       bin([](Value x, Value y) { return x * y; }), {1, 10, 100, 2, 20, 200}},
      {"scalar_mul_add", kX, {}, un([](Value v) { return v * 2.0 + 1.0; }), {-7, -3, 0, 1, 4, 9}},
      {"scalar_pow", kPos, {}, un([](Value v) { return v.pow(2.0); }), {0.0625, 1, 4, 16, 81, 0.25}},
      {"scalar_div_sub", kX, {}, un([](Value v) { return v / 4.0 - 1.0; }), {-2, -1.5, -1.125, -1, -0.625, 0}},
      {"minimum_nan", nan_a, {nan_b}, bin([](Value x, Value y) { return x.minimum(y); }), {kNaN, kNaN, 2}},
      {"maximum_nan", nan_a, {nan_b}, bin([](Value x, Value y) { return x.maximum(y); }), {kNaN, kNaN, 3}},
  };
}

std::vector<HandCase> reduction_cases() {
  Tensor ninf{{2, 2}, {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 1000.0f, 1000.0f}};
  Tensor with_nan{{2, 2}, {1.0f, kNaNf, 2.0f, 3.0f}};
  return {
      {"sum_middle", kCube, {}, un([](Value v) { return v.sum({1}); }), {5, 7, 9, 17, 19, 21}},
      {"sum_outer_inner", kCube, {}, un([](Value v) { return v.sum({0, 2}); }), {30, 48}},
      {"sum_last_keepdim", kCube, {}, un([](Value v) { return v.sum({-1}, true); }), {6, 15, 24, 33}},
      {"mean_last", kCube, {}, un([](Value v) { return v.mean({2}); }), {2, 5, 8, 11}},
      {"mean_all", kCube, {}, un([](Value v) { return v.mean({0, 1, 2}); }), {6.5}},
      {"max_middle", kCube, {}, un([](Value v) { return v.max({1}); }), {4, 5, 6, 10, 11, 12}},
      {"min_last", kCube, {}, un([](Value v) { return v.min({2}); }), {1, 4, 7, 10}},
      {"max_nan", with_nan, {}, un([](Value v) { return v.max({1}); }), {kNaN, 3}},
      {"min_nan", with_nan, {}, un([](Value v) { return v.min({1}); }), {kNaN, 2}},
      // log(e^1 + e^2 + e^3) = 3.40760596444438; each row of 3 is 3 higher.
      {"logsumexp", kCube, {}, un([](Value v) { return v.logsumexp({2}); }),
       {3.40760596444438, 6.407605964444381, 9.40760596444438, 12.40760596444438}},
      // All -inf stays -inf; large values are shifted by the max (1000 + log 2).
      {"logsumexp_edges", ninf, {}, un([](Value v) { return v.logsumexp({1}); }), {-kInf, 1000.6931471805599}},
      {"softmax_rows", kRows, {}, un([](Value v) { return v.softmax(1); }),
       {0.09003057317038046, 0.24472847105479767, 0.6652409557748219, 0.09003057317038046, 0.24472847105479767,
        0.6652409557748219}},
      // Columns are [1,4], [2,5], [3,6]: softmax([a, a+3]) = [0.0474.., 0.9525..].
      {"softmax_cols", kRows, {}, un([](Value v) { return v.softmax(0); }),
       {0.04742587317756678, 0.04742587317756678, 0.04742587317756678, 0.9525741268224331, 0.9525741268224331,
        0.9525741268224331}},
      {"softmax_middle", kCube, {}, un([](Value v) { return v.softmax(1); }),
       {0.04742587317756678, 0.04742587317756678, 0.04742587317756678, 0.9525741268224331, 0.9525741268224331,
        0.9525741268224331, 0.04742587317756678, 0.04742587317756678, 0.04742587317756678, 0.9525741268224331,
        0.9525741268224331, 0.9525741268224331}},
      {"log_softmax", kRows, {}, un([](Value v) { return v.log_softmax(-1); }),
       {-2.40760596444438, -1.40760596444438, -0.40760596444438, -2.40760596444438, -1.40760596444438,
        -0.40760596444438}},
  };
}

std::vector<HandCase> pool_cases() {
  Pool2dOptions k2;
  k2.kernel = {2, 2};
  Pool2dOptions k2p1 = k2;
  k2p1.padding = {1, 1};
  Pool2dOptions k2ceil = k2;
  k2ceil.ceil_mode = true;
  Pool2dOptions avg_s1p1 = k2p1;
  avg_s1p1.stride = {1, 1};
  Pool2dOptions avg_s1p1_ex = avg_s1p1;
  avg_s1p1_ex.count_include_pad = false;
  Pool2dOptions avg_ceil{{3, 3}, {2, 2}, {1, 1}, true, true};
  Pool2dOptions avg_ceil_ex{{3, 3}, {2, 2}, {1, 1}, true, false};
  Tensor seq{{1, 6}, {1, 5, 2, 8, 3, 0}}, neg{{1, 6}, {-1, -5, -2, -8, -3, -0.5f}};
  return {
      {"max_pool2d", kPi, {}, un([=](Value v) { return v.max_pool2d(k2); }), {9, 6, 9, 9}},
      // -inf padding: all-negative input, windows that hang over the border.
      {"max_pool2d_padding", kNegPi, {}, un([=](Value v) { return v.max_pool2d(k2p1); }),
       {-3, -1, -1, -5, -2, -6, -9, -7, -3}},
      {"max_pool2d_ceil", kRamp5, {}, un([=](Value v) { return v.max_pool2d(k2ceil); }),
       {6, 8, 9, 16, 18, 19, 21, 23, 24}},
      {"max_pool2d_dilation", kPi, {},
       op(OpKind::MaxPool2d, {{"kernel_size", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{1, 1}},
                              {"dilation", std::vector<int64_t>{2, 2}}}),
       {5, 8, 9, 9}},
      {"avg_pool2d", kPi, {}, un([=](Value v) { return v.avg_pool2d(k2); }), {4.5, 3.25, 6, 6.25}},
      // count_include_pad: every window is 2x2 of the padded input, so /4.
      {"avg_pool2d_pad_include", kNine, {}, un([=](Value v) { return v.avg_pool2d(avg_s1p1); }),
       {0.25, 0.75, 1.25, 0.75, 1.25, 3.0, 4.0, 2.25, 2.75, 6.0, 7.0, 3.75, 1.75, 3.75, 4.25, 2.25}},
      {"avg_pool2d_pad_exclude", kNine, {}, un([=](Value v) { return v.avg_pool2d(avg_s1p1_ex); }),
       {1.0, 1.5, 2.5, 3.0, 2.5, 3.0, 4.0, 4.5, 5.5, 6.0, 7.0, 7.5, 7.0, 7.5, 8.5, 9.0}},
      {"avg_pool2d_ceil_include", kRamp5, {}, un([=](Value v) { return v.avg_pool2d(avg_ceil); }),
       {12.0 / 9, 3.0, 24.0 / 9, 7.0, 12.0, 9.0, 8.0, 13.0, 84.0 / 9}},
      {"avg_pool2d_ceil_exclude", kRamp5, {}, un([=](Value v) { return v.avg_pool2d(avg_ceil_ex); }),
       {3.0, 4.5, 6.0, 10.5, 12.0, 13.5, 18.0, 19.5, 21.0}},
      {"global_avg_pool", {{1, 2, 2, 2}, iota(8)}, {}, un([](Value v) { return v.global_avg_pool(); }), {2.5, 6.5}},
      {"max_pool1d", seq, {}, un([](Value v) { return v.max_pool1d({.kernel = 2}); }), {5, 8, 3}},
      {"max_pool1d_pad", neg, {}, un([](Value v) { return v.max_pool1d({.kernel = 3, .stride = 2, .padding = 1}); }),
       {-1, -2, -0.5}},
      {"avg_pool1d", seq, {}, un([](Value v) { return v.avg_pool1d({.kernel = 3}); }), {8.0 / 3, 11.0 / 3}},
      // ceil_mode: the last window [4, 6) is clipped to the input: divisor 1.
      {"avg_pool1d_ceil", {{1, 5}, iota(5)}, {},
       un([](Value v) { return v.avg_pool1d({.kernel = 2, .ceil_mode = true}); }), {1.5, 3.5, 5}},
      // The last window [5, 8) is clipped to the padded extent [5, 7): divisor 2, or 1 in-bounds.
      {"avg_pool1d_ceil_pad_include", {{1, 6}, iota(6)}, {},
       un([](Value v) { return v.avg_pool1d({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true}); }),
       {1, 3, 5, 3}},
      {"avg_pool1d_ceil_pad_exclude", {{1, 6}, iota(6)}, {},
       un([](Value v) {
         return v.avg_pool1d({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
       }),
       {1.5, 3, 5, 6}},
  };
}

// Anchors get their own graph: the case declares the other operands as extras.
Build conv(Conv2dOptions o, bool bias) {
  return [=](GraphBuilder& g, Value x, std::vector<Value>& e) {
    return g.conv2d(x, e.at(0), bias ? std::optional<Value>(e.at(1)) : std::nullopt, o);
  };
}

// conv2d_weight_grad(x, grad): dW[o, c, r, s] = sum over n, p, q of grad[n, o, p, q] x[n, c, p*stride + r*dilation -
// padding, ...] (in each group).
Build wgrad(std::array<int64_t, 2> kernel, Conv2dOptions o) {
  return [=](GraphBuilder& g, Value x, std::vector<Value>& e) { return g.conv2d_weight_grad(x, e.at(0), kernel, o); };
}

std::vector<HandCase> anchor_cases() {
  Tensor w22{{1, 1, 2, 2}, {1, 2, 3, 4}};
  Tensor x4{{1, 4, 3, 3}, {}}, w4{{2, 2, 3, 3}, {}};
  for (int i = 0; i < 36; ++i) x4.data.push_back(static_cast<float>(i % 7 - 3));  // c*9 + i*3 + j
  for (int i = 0; i < 36; ++i) w4.data.push_back(static_cast<float>(i % 5 - 2));  // o*18 + c*9 + i*3 + j
  Tensor lin_x{{2, 3}, iota(6)}, lin_w{{2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f}}, lin_b{{2}, {10, -1}};
  auto linear = [](bool bias) {
    return Build([=](GraphBuilder& g, Value x, std::vector<Value>& e) {
      return g.linear(x, e.at(0), bias ? std::optional<Value>(e.at(1)) : std::nullopt);
    });
  };
  auto matmul = Build([](GraphBuilder& g, Value a, std::vector<Value>& e) { return g.matmul(a, e.at(0)); });
  HandCase cases[] = {
      {"conv2d_bias", kNine, {w22, {{1}, {0.5f}}}, conv({}, true), {37.5, 47.5, 67.5, 77.5}},
      {"conv2d_stride_pad", kNine, {w22}, conv({.stride = {2, 2}, .padding = {1, 1}}, false), {4, 18, 36, 77}},
      {"conv2d_dilation", kNine, {w22}, conv({.dilation = {2, 2}}, false), {64}},
      {"conv2d_channels", {{1, 2, 2, 2}, iota(8)}, {{{1, 2, 1, 1}, {1, 10}}, {{1}, {1}}}, conv({}, true),
       {52, 63, 74, 85}},
      {"conv2d_depthwise", {{1, 2, 2, 2}, iota(8)}, {{{2, 1, 1, 1}, {2, -1}}}, conv({.groups = 2}, false),
       {2, 4, 6, 8, -5, -6, -7, -8}},
      {"conv2d_groups_pad_stride", x4, {w4, {{2}, {0.25f, -1}}},
       conv({.stride = {2, 1}, .padding = {1, 1}, .groups = 2}, true),
       {-3.75, -7.75, -6.75, 1.25, 0.25, 1.25, 4, -6, 5, -5, -9, -8}},
      // dW[r, s] = x[r, s] + 2 x[r, s + 1] - x[r + 1, s + 1] of the plane 1..9
      {"conv2d_weight_grad", kNine, {{{1, 1, 2, 2}, {1, 2, 0, -1}}}, wgrad({2, 2}, {}), {0, 2, 6, 8}},
      // the adjoint of conv2d_stride_pad: <grad, conv2d(x, w22)> = 456 = <dW, w22>
      {"conv2d_weight_grad_stride_pad", kNine, {{{1, 1, 2, 2}, {1, 2, 3, 4}}},
       wgrad({2, 2}, {.stride = {2, 2}, .padding = {1, 1}}), {20, 36, 36, 64}},
      {"conv2d_weight_grad_dilation", kNine, {{{1, 1, 1, 1}, {3}}}, wgrad({2, 2}, {.dilation = {2, 2}}), {3, 9, 21, 27}},
      // 1x1, 2 groups: dW[0] = 1*1 + 1*4, dW[1] = 2*5 - 1*6
      {"conv2d_weight_grad_depthwise", {{1, 2, 2, 2}, iota(8)}, {{{1, 2, 2, 2}, {1, 0, 0, 1, 2, -1, 0, 0}}},
       wgrad({1, 1}, {.groups = 2}), {5, 4}},
      // a batch of 2, 2 channels, a 1x2 kernel: dW[0, c, 0, s] = 2 x[0, c, 0, s] + x[1, c, 0, s]
      {"conv2d_weight_grad_batch", {{2, 2, 1, 2}, iota(8)}, {{{2, 1, 1, 1}, {2, 1}}}, wgrad({1, 2}, {}),
       {7, 10, 13, 16}},
      {"linear_bias", lin_x, {lin_w, lin_b}, linear(true), {8, 2, 8, 6.5}},
      {"linear_3d_no_bias", {{2, 1, 3}, iota(6)}, {lin_w}, linear(false), {-2, 3, -2, 7.5}},
      {"matmul_batch_a", {{2, 2, 2}, iota(8)}, {{{2, 2}, {1, 1, 0, -1}}}, matmul, {1, -1, 3, -1, 5, -1, 7, -1}},
      {"matmul_batch_b", {{2, 2}, iota(4)}, {{{2, 2, 1}, {1, 0, 0, 1}}}, matmul, {1, 3, 2, 4}},
  };
  std::vector<HandCase> out;
  for (auto& c : cases) {
    c.own_anchor = true;
    out.push_back(std::move(c));
  }
  return out;
}

// Per-sample norms (eps 1e-5, biased variance), worked out with Python's math.
std::vector<HandCase> norm_cases() {
  // A row [1, 2, 3]: mean 2, variance 2/3 -> (-1, 0, 1) / sqrt(2/3 + 1e-5).
  const double r = 1.2247356859083902;
  // The six values 1..6 (or 7..12) as one group: mean 3.5, variance 35/12.
  const std::vector<double> six = {-1.4638475999719223, -0.8783085599831534, -0.29276951999438444,
                                   0.29276951999438444, 0.8783085599831534,  1.4638475999719223};
  std::vector<double> six_twice = six;
  six_twice.insert(six_twice.end(), six.begin(), six.end());
  return {
      {"group_norm_one_group", kCube, {}, un([](Value v) { return v.group_norm(1); }), six_twice},
      {"group_norm_per_channel", kCube, {}, un([](Value v) { return v.group_norm(2); }),
       {-r, 0, r, -r, 0, r, -r, 0, r, -r, 0, r}},
      {"instance_norm", kCube, {}, un([](Value v) { return v.instance_norm(); }), {-r, 0, r, -r, 0, r, -r, 0, r, -r, 0, r}},
      // weight (1, 2, 3), bias (0.5, 0, -1) along the normalized dim.
      {"layer_norm_affine", kRows, {{{3}, {1, 2, 3}}, {{3}, {0.5f, 0, -1}}},
       [](GraphBuilder&, Value v, std::vector<Value>& e) { return v.layer_norm({3}, e.at(0), e.at(1)); },
       {-r + 0.5, 0, 3 * r - 1, -r + 0.5, 0, 3 * r - 1}},
      // running mean (1, 2), running var (4, 0.25) over channel dim 1 of [2, 2, 3].
      {"batch_norm", kCube, {{{2}, {1, 2}}, {{2}, {4, 0.25f}}},
       [](GraphBuilder&, Value v, std::vector<Value>& e) { return v.batch_norm(e.at(0), e.at(1)); },
       {0.0, 0.49999937500117186, 0.9999987500023437, 3.9999200023999197, 5.99988000359988, 7.9998400047998395,
        2.999996250007031, 3.4999956250082027, 3.999995000009375, 15.999680009599679, 17.999640010799638,
        19.999600011999597}},
  };
}

// erf, the comparisons (1 or 0; 0 with a NaN) and the layout ops; some without an anchor.
std::vector<HandCase> layout_cases() {
  Tensor b{{3}, {0.5f, -2.0f, 4.0f}};  // broadcast over the rows of kX [[-4,-2,-0.5],[0,1.5,4]]
  Tensor nan_a{{1, 3}, {kNaNf, 1.0f, 2.0f}}, nan_b{{3}, {0.0f, kNaNf, 3.0f}};
  auto cmp = [](OpKind k) {
    return [k](GraphBuilder& g, Value x, std::vector<Value>& e) { return g.op(k, {x, e.at(0)}); };
  };
  return {
      {"erf", kX, {}, un([](Value v) { return v.erf(); }),
       {-0.9999999845827421, -0.9953222650189527, -0.5204998778130465, 0.0, 0.9661051464753108, 0.9999999845827421}},
      // cast rounds to nearest, ties to even: 1 + 2^-8 is a bf16 tie (down to 1), 1 + 3 * 2^-8 one up
      // (to 1 + 2^-6); 1 + 2^-11 an f16 tie; 70000 overflows f16 (inf), is 70144 in bf16; NaN stays NaN;
      // then back to f32 (exact).
      {"cast_bf16", kCastIn, {}, un([](Value v) { return v.cast(DType::BF16); }),
       {1.0, 1.015625, 1.0078125, 70144.0, kNaN, -1.0}},
      {"cast_f16", kCastIn, {}, un([](Value v) { return v.cast(DType::F16); }),
       {1.00390625, 1.01171875, 1.0048828125, kInf, kNaN, -1.0}},
      {"cast_f16_tie_no_anchor", {{1, 2}, {1.00048828125f, 1.00146484375f}}, {},
       un([](Value v) { return v.cast(DType::F16).cast(DType::F32); }), {1.0, 1.001953125}, true},
      {"gt", kX, {b}, cmp(OpKind::Gt), {0, 0, 0, 0, 1, 0}},
      {"ge", kX, {b}, cmp(OpKind::Ge), {0, 1, 0, 0, 1, 1}},
      {"lt", kX, {b}, cmp(OpKind::Lt), {1, 0, 1, 1, 0, 0}},
      {"le", kX, {b}, cmp(OpKind::Le), {1, 1, 1, 1, 0, 1}},
      {"eq", kX, {b}, cmp(OpKind::Eq), {0, 1, 0, 0, 0, 1}},
      {"gt_scalar_no_anchor", kX, {}, un([](Value v) { return v.gt(0.0); }), {0, 0, 0, 0, 1, 1}, true},
      {"gt_nan", nan_a, {nan_b}, cmp(OpKind::Gt), {0, 0, 0}},
      {"le_nan", nan_a, {nan_b}, cmp(OpKind::Le), {0, 0, 1}},
      {"eq_nan", nan_a, {nan_a}, cmp(OpKind::Eq), {0, 1, 1}, true},
      // [2, 1] -> [2, 3]; [3] -> [2, 2, 3] (a new leading dim)
      {"expand", {{2, 1}, {1.0f, 2.0f}}, {}, un([](Value v) { return v.expand({2, 3}); }), {1, 1, 1, 2, 2, 2}},
      {"expand_leading_no_anchor", {{3}, {1.0f, 2.0f, 3.0f}}, {}, un([](Value v) { return v.expand({2, 2, 3}); }),
       {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}, true},
      // [[1,2,3],[4,5,6]] as [[1,2],[3,4],[5,6]], plus [10, 20] per column
      {"reshape", kRows, {{{2}, {10.0f, 20.0f}}},
       [](GraphBuilder&, Value v, std::vector<Value>& e) { return v.reshape({3, 2}) + e.at(0); },
       {11, 22, 13, 24, 15, 26}},
      {"reshape_sum_no_anchor", kRows, {}, un([](Value v) { return v.sum({1}).reshape({1, 2}); }), {6, 15}, true},
      {"transpose", kRows, {}, un([](Value v) { return v.transpose(0, 1); }), {1, 4, 2, 5, 3, 6}},
      // out[i][j][k] = in[k][j][i] of 1..12 as [2, 2, 3]
      {"transpose_3d_no_anchor", kCube, {}, un([](Value v) { return v.transpose(0, -1); }),
       {1, 7, 4, 10, 2, 8, 5, 11, 3, 9, 6, 12}, true},
  };
}

// The gather ops, without an anchor, on small hand-made tensors.
std::vector<HandCase> gather_cases() {
  const Tensor plane{{1, 1, 2, 4}, {0, 0, 3, 5, 0, 0, 5, 1}};  // two 2x2 windows, both with ties
  const Tensor g{{1, 1, 1, 2}, {2, 7}};
  auto op = [](OpKind k, AttrMap a, bool with_extra = false) -> Build {
    return [k, a, with_extra](GraphBuilder& b, Value v, std::vector<Value>& e) {
      return with_extra ? b.op(k, {v, e.at(0)}, a) : b.op(k, {v}, a);
    };
  };
  using V = std::vector<int64_t>;
  return {
      {"flip", kRows, {}, op(OpKind::Flip, {{"dims", V{-1}}}), {3, 2, 1, 6, 5, 4}, true},
      // rows (c, i, j) = (0, 0, 0), (0, 0, 1); columns (ho, wo) of the 2x2 outputs of a 1x2 kernel
      {"im2col", {{1, 1, 2, 3}, {1, 2, 3, 4, 5, 6}}, {}, op(OpKind::Im2col, {{"kernel_size", V{1, 2}}}),
       {1, 2, 4, 5, 2, 3, 5, 6}, true},
      // each window's grad at its first maximum: window 0 (columns 0-1) is all 0: its first element;
      // window 1 is {3, 5 / 5, 1}: the first 5, at [3]
      {"max_pool2d_backward", plane, {g}, op(OpKind::MaxPool2dBackward, {{"kernel_size", V{2, 2}}}, true),
       {2, 0, 0, 7, 0, 0, 0, 0}, true},
      {"avg_pool2d_backward", {{1, 1, 1, 2}, {4, 8}}, {},
       op(OpKind::AvgPool2dBackward, {{"kernel_size", V{2, 2}}, {"input_shape", V{1, 1, 2, 4}}}),
       {1, 1, 2, 2, 1, 1, 2, 2}, true},
      {"insert_zeros", {{1, 1, 2, 2}, {1, 2, 3, 4}}, {},
       op(OpKind::InsertZeros, {{"stride", V{2, 1}}, {"extra", V{0, 1}}}), {1, 2, 0, 0, 0, 0, 3, 4, 0}, true},
      // spread [1 0 2 / 0 0 0 / 3 0 4 / 0 0 0] (stride 2, extra 1 row), then crop 1 row / 0 columns at each side
      {"insert_zeros_cropped", {{1, 1, 2, 2}, {1, 2, 3, 4}}, {},
       op(OpKind::InsertZeros, {{"stride", V{2, 2}}, {"extra", V{1, 0}}, {"crop", V{1, 0}}}), {0, 0, 0, 3, 0, 4}, true},
      // stride 1: a plain crop of the 3x3 plane's border
      {"insert_zeros_crop_only", {{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {},
       op(OpKind::InsertZeros, {{"stride", V{1, 1}}, {"crop", V{1, 1}}}), {5}, true},
      // col2im of the im2col case's shapes: row 0 (tap j = 0) of column (ho, wo) read x[ho, wo], row 1 x[ho, wo + 1]
      {"im2col_backward", {{2, 4}, {1, 2, 3, 4, 10, 20, 30, 40}}, {},
       op(OpKind::Im2colBackward, {{"kernel_size", V{1, 2}}, {"input_shape", V{1, 1, 2, 3}}}),
       {1, 2 + 10, 20, 3, 4 + 30, 40}, true},
      // all-ones columns of 2x2 windows over a 3x3 plane: each x element counts the windows that read it
      {"im2col_backward_counts", {{4, 4}, std::vector<float>(16, 1.0f)}, {},
       op(OpKind::Im2colBackward, {{"kernel_size", V{2, 2}}, {"input_shape", V{1, 1, 3, 3}}}),
       {1, 2, 1, 2, 4, 2, 1, 2, 1}, true},
      // 3x3 windows, padding 1, stride 2 over a 2x3 plane: one window row (rows -1..1), window columns starting
      // at -1 and 1; the padding taps (row -1, columns -1 and 3) read nothing. x column 1 lies in both windows.
      {"im2col_backward_padded", {{9, 2}, std::vector<float>(18, 1.0f)}, {},
       op(OpKind::Im2colBackward, {{"kernel_size", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}},
                                   {"input_shape", V{1, 1, 2, 3}}}),
       {1, 2, 1, 1, 2, 1}, true},
      // the plane of max_pool2d_backward's case: window 0 (all 0) picks its first element, window 1 its first 5
      // (offset 3); grad (x's shape) 1..8 read there
      {"max_pool2d_double_backward", plane, {{{1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}}},
       op(OpKind::MaxPool2dDoubleBackward, {{"kernel_size", V{2, 2}}}, true), {1, 4}, true},
      // grad 1..12 as [4, 3]; stride 2, extra 1 row, crop 1 row: x [3, 2], x[i, j] = grad[2i - 1, 2j] (row -1: 0)
      {"insert_zeros_backward", {{1, 1, 4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}, {},
       op(OpKind::InsertZerosBackward, {{"stride", V{2, 2}}, {"extra", V{1, 0}}, {"crop", V{1, 0}}}),
       {0, 0, 4, 6, 10, 12}, true},
  };
}

std::vector<HandCase> all_cases() {
  std::vector<HandCase> all;
  for (auto list : {unary_cases(), binary_cases(), reduction_cases(), pool_cases(), anchor_cases(), norm_cases(),
                    layout_cases(), gather_cases()})
    for (auto& c : list) all.push_back(std::move(c));
  return all;
}

Expected<Graph> build_case(const HandCase& c) {
  GraphBuilder g;
  Value x = g.input("x", c.x.shape, std::nullopt, InitKind::Normal);
  std::vector<Value> extras;
  for (size_t i = 0; i < c.extra.size(); ++i)
    extras.push_back(g.input("e" + std::to_string(i), c.extra[i].shape, std::nullopt, InitKind::Normal));
  if (!c.own_anchor) {
    Value z1 = g.input("z1", {1, 1});
    Value z2 = g.input("z2", {1, 1});
    x = x + g.matmul(z1, z2);
  }
  g.output("y", c.build(g, x, extras));
  return g.build();
}

std::vector<HostTensor> case_inputs(const HandCase& c) {
  std::vector<HostTensor> inputs;
  auto add = [&](const Tensor& t) { inputs.push_back({TensorType{DType::F32, t.shape}, t.data}); };
  add(c.x);
  for (const auto& t : c.extra) add(t);
  if (!c.own_anchor) add({{1, 1}, {0.0f}}), add({{1, 1}, {0.0f}});
  return inputs;
}

void PrintTo(const HandCase& c, std::ostream* os) { *os << c.name; }

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

class HandComputed : public ::testing::TestWithParam<HandCase> {};

TEST_P(HandComputed, MatchesDenseAndSampled) {
  const HandCase& c = GetParam();
  auto graph = build_case(c);
  ASSERT_TRUE(graph) << graph.error().str();
  std::vector<HostTensor> inputs = case_inputs(c);
  auto dense = evaluate_reference(*graph, inputs);
  ASSERT_TRUE(dense) << dense.error().str();
  const std::vector<double>& got = (*dense)[0];
  ASSERT_EQ(got.size(), c.want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double w = c.want[i];
    if (std::isnan(w) || std::isinf(w)) {
      EXPECT_TRUE(same(got[i], w)) << "element " << i << ": " << got[i] << " vs " << w;
    } else {
      EXPECT_NEAR(got[i], w, 1e-13 * (1 + std::fabs(w))) << "element " << i;
    }
  }
  // Sampled mode, every index in reverse order: the same values, bit for bit.
  std::vector<int64_t> idx;
  for (size_t i = got.size(); i-- > 0;) idx.push_back(static_cast<int64_t>(i));
  auto sampled = evaluate_reference_at(*graph, inputs, 0, idx);
  ASSERT_TRUE(sampled) << sampled.error().str();
  for (size_t k = 0; k < idx.size(); ++k)
    EXPECT_TRUE(same((*sampled)[k], got[static_cast<size_t>(idx[k])])) << "sample " << idx[k];
}

INSTANTIATE_TEST_SUITE_P(ReferenceOps, HandComputed, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<HandCase>& info) { return info.param.name; });

// Adding an op to the table without a hand-computed case here fails this test.
TEST(ReferenceOps, EveryOpOfTheTableHasAHandComputedCase) {
  std::set<OpKind> seen;
  for (const HandCase& c : all_cases()) {
    auto graph = build_case(c);
    ASSERT_TRUE(graph) << c.name << ": " << graph.error().str();
    for (const Node& n : graph->nodes) seen.insert(n.op);
  }
  for (const OpInfo& info : all_ops()) EXPECT_TRUE(seen.count(info.op)) << "no hand-computed case uses " << info.name;
}

}  // namespace
}  // namespace fusejit
