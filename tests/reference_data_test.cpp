// Host tensors (f16/bf16 conversions, device bytes), seeded random inputs,
// sample picking, and the tolerance logic of compare_outputs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "fusejit/builder.h"
#include "fusejit/reference.h"

namespace fusejit {
namespace {

// ---- f16 / bf16 ------------------------------------------------------------------

TEST(ReferenceDtype, Bf16KnownValuesAndTiesToEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3F80);      // halfway, even below
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3F82);  // halfway, even above
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // just above halfway
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_bits_to_float(0x3FC0), 1.5f);
}

TEST(ReferenceDtype, F16KnownValuesSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7BFF);  // the largest f16
  EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7BFF);  // below the halfway point to 65536
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7C00);  // halfway rounds to even: inf
  EXPECT_EQ(float_to_f16_bits(0x1p-14f), 0x0400);  // the smallest normal
  EXPECT_EQ(float_to_f16_bits(0x1p-24f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000);  // halfway to it: even is 0
  EXPECT_EQ(float_to_f16_bits(3 * 0x1p-25f), 0x0002);  // 1.5 units: even is 2
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3C00);  // halfway, even below
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f16_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f16_bits_to_float(0xFC00), -std::numeric_limits<float>::infinity());
}

TEST(ReferenceDtype, EveryHalfValueRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    auto bits = static_cast<uint16_t>(b);
    float f = f16_bits_to_float(bits), g = bf16_bits_to_float(bits);
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_f16_bits(f), bits) << std::hex << b;
    }
    if (!std::isnan(g)) {
      EXPECT_EQ(float_to_bf16_bits(g), bits) << std::hex << b;
    }
  }
}

// Rounding picks the nearer neighbour, checked against the f16 grid directly.
TEST(ReferenceDtype, F16RoundsToTheNearestValue) {
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f = std::ldexp(static_cast<float>(state >> 8) / 16777216.0f, static_cast<int>(state % 40) - 26);
    uint16_t h = float_to_f16_bits(f);
    float r = f16_bits_to_float(h);
    if (std::isinf(r)) continue;
    float up = f16_bits_to_float(static_cast<uint16_t>(h + 1));
    float down = h & 0x7FFF ? f16_bits_to_float(static_cast<uint16_t>(h - 1)) : -up;
    double err = std::fabs(static_cast<double>(f) - r);
    EXPECT_LE(err, std::fabs(static_cast<double>(f) - up)) << f;
    EXPECT_LE(err, std::fabs(static_cast<double>(f) - down)) << f;
  }
}

TEST(ReferenceDtype, DeviceBytes) {
  HostTensor t{TensorType{DType::F16, {3}}, {1.0f, -2.0f, 0.5f}};
  std::vector<uint8_t> bytes = to_device_bytes(t);
  ASSERT_EQ(bytes.size(), 6u);
  uint16_t h[3];
  std::memcpy(h, bytes.data(), 6);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0xC000);
  EXPECT_EQ(h[2], 0x3800);
  HostTensor back = from_device_bytes(t.type, bytes.data());
  EXPECT_EQ(back.data, t.data);

  HostTensor b{TensorType{DType::BF16, {2}}, {1.5f, -0.25f}};
  bytes = to_device_bytes(b);
  ASSERT_EQ(bytes.size(), 4u);
  EXPECT_EQ(from_device_bytes(b.type, bytes.data()).data, b.data);

  HostTensor f{TensorType{DType::F32, {2, 2}}, {1.0f, 0.1f, -3.5f, 1e30f}};
  bytes = to_device_bytes(f);
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_EQ(from_device_bytes(f.type, bytes.data()).data, f.data);
}

// ---- random inputs --------------------------------------------------------------

Graph linear_graph(Precision p, int64_t m, int64_t k, int64_t n) {
  GraphBuilder g(p);
  Value x = g.input("x", {m, k});
  Value w = g.input("w", {n, k});
  Value b = g.input("b", {n});
  Value extra = g.input("extra", {n}, DType::F32);
  g.output("y", g.linear(x, w, b) + extra);
  auto graph = g.build();
  EXPECT_TRUE(graph) << graph.error().str();
  return graph.take();
}

TEST(ReferenceRandom, ReproducibleAndSeedDependent) {
  Graph g = linear_graph(Precision::FP32, 64, 100, 32);
  auto a = make_random_inputs(g, 7), b = make_random_inputs(g, 7), c = make_random_inputs(g, 8);
  ASSERT_EQ(a.size(), 4u);
  for (size_t j = 0; j < a.size(); ++j) {
    EXPECT_EQ(a[j].type, g.node(g.inputs()[j]).type);
    EXPECT_EQ(a[j].data, b[j].data) << "input " << j;
    EXPECT_NE(a[j].data, c[j].data) << "input " << j;
  }
}

// Element i depends only on (seed, input, i): a bigger tensor starts with the smaller one's data.
TEST(ReferenceRandom, CounterBasedPrefix) {
  Graph small = linear_graph(Precision::FP32, 16, 8, 4), big = linear_graph(Precision::FP32, 4096, 8, 4);
  auto a = make_random_inputs(small, 3), b = make_random_inputs(big, 3);
  ASSERT_GE(b[0].data.size(), a[0].data.size());
  EXPECT_TRUE(std::equal(a[0].data.begin(), a[0].data.end(), b[0].data.begin()));
}

struct Stats {
  double mean = 0, var = 0, min = 1e300, max = -1e300;
};
Stats stats_of(const std::vector<float>& v) {
  Stats s;
  for (float x : v) s.mean += x, s.min = std::min<double>(s.min, x), s.max = std::max<double>(s.max, x);
  s.mean /= static_cast<double>(v.size());
  for (float x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= static_cast<double>(v.size());
  return s;
}

TEST(ReferenceRandom, DistributionsByInitKind) {
  Graph g = linear_graph(Precision::FP32, 1000, 1024, 1000);
  auto in = make_random_inputs(g, 1);
  Stats x = stats_of(in[0].data);  // uniform01
  EXPECT_NEAR(x.mean, 0.5, 0.005);
  EXPECT_NEAR(x.var, 1.0 / 12, 0.002);
  EXPECT_GE(x.min, 0.0);
  EXPECT_LT(x.max, 1.0);
  double bound = 1.0 / std::sqrt(1024.0);  // torch_weight/bias, fan_in = K
  Stats w = stats_of(in[1].data);
  EXPECT_NEAR(w.mean, 0.0, 0.01 * bound);
  EXPECT_NEAR(w.var, bound * bound / 3, 0.01 * bound * bound);
  EXPECT_GE(w.min, -static_cast<float>(bound));
  EXPECT_LE(w.max, static_cast<float>(bound));
  EXPECT_GT(w.max, 0.99 * bound);
  Stats b = stats_of(in[2].data);
  EXPECT_GE(b.min, -static_cast<float>(bound));
  EXPECT_LE(b.max, static_cast<float>(bound));
  Stats n = stats_of(in[3].data);  // normal, only 1000 values
  EXPECT_NEAR(n.mean, 0.0, 0.15);
  EXPECT_NEAR(n.var, 1.0, 0.15);
}

TEST(ReferenceRandom, HalfInputsAreRepresentable) {
  for (Precision p : {Precision::BF16, Precision::F16}) {
    Graph g = linear_graph(p, 256, 512, 64);
    auto in = make_random_inputs(g, 5);
    DType dt = anchor_dtype(p);
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(in[j].type.dtype, dt);
      for (float v : in[j].data) ASSERT_EQ(round_to_dtype(v, dt), v) << "input " << j;
    }
    for (float v : in[0].data) ASSERT_LT(v, 1.0f);  // U[0,1) stays below 1 after rounding
  }
}

TEST(ReferenceRandom, PickSamples) {
  EXPECT_EQ(pick_samples(5, 10, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(pick_samples(5, 0, 1).empty());
  for (int64_t numel : {int64_t{1000}, int64_t{260112384}}) {
    std::vector<int64_t> s = pick_samples(numel, 500, 42);
    ASSERT_EQ(s.size(), 500u);
    EXPECT_EQ(s.front(), 0);
    EXPECT_EQ(s.back(), numel - 1);
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), s.size());
    EXPECT_EQ(s, pick_samples(numel, 500, 42));
    EXPECT_NE(s, pick_samples(numel, 500, 43));
  }
  // Spread over the range, not bunched: each quarter of a big range gets about a quarter.
  std::vector<int64_t> s = pick_samples(int64_t{1} << 30, 4000, 9);
  for (int q = 0; q < 4; ++q) {
    auto lo = static_cast<int64_t>(q) << 28, hi = static_cast<int64_t>(q + 1) << 28;
    auto cnt = std::count_if(s.begin(), s.end(), [&](int64_t i) { return i >= lo && i < hi; });
    EXPECT_NEAR(static_cast<double>(cnt), 1000.0, 150.0) << "quarter " << q;
  }
}

// ---- comparison -----------------------------------------------------------------

std::vector<double> smooth_ref(int n) {
  std::vector<double> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = std::sin(0.37 * i) + 0.1;
  return r;
}
std::vector<float> as_float(const std::vector<double>& r, double rel_noise = 0) {
  std::vector<float> o(r.size());
  for (size_t i = 0; i < r.size(); ++i)
    o[i] = static_cast<float>(r[i] * (1 + rel_noise * ((i * 7919 % 201) / 100.0 - 1.0)));
  return o;
}

TEST(ReferenceCompare, Tolerances) {
  EXPECT_EQ(tolerance_for(Precision::FP32).rel_l2, 1e-5);
  EXPECT_EQ(tolerance_for(Precision::TF32).rel_l2, 2e-3);
  EXPECT_EQ(tolerance_for(Precision::BF16).rel_l2, 2e-2);
  EXPECT_EQ(tolerance_for(Precision::F16).rel_l2, 5e-3);
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    EXPECT_DOUBLE_EQ(tolerance_for(p).max_elem, 10 * tolerance_for(p).rel_l2);
}

TEST(ReferenceCompare, ExactAndSmallNoisePass) {
  auto ref = smooth_ref(10000);
  auto out = as_float(ref);
  Comparison c = compare_outputs(out.data(), ref.data(), 10000, Precision::FP32);
  EXPECT_TRUE(c.pass) << c.summary();
  EXPECT_LT(c.rel_l2, 1e-7);  // only the float rounding of the reference
  EXPECT_EQ(c.n, 10000);
  EXPECT_EQ(c.summary().rfind("PASS", 0), 0u) << c.summary();
  auto noisy = as_float(ref, 2e-6);
  EXPECT_TRUE(compare_outputs(noisy.data(), ref.data(), 10000, Precision::FP32).pass);
}

TEST(ReferenceCompare, NoiseAboveTheToleranceFails) {
  auto ref = smooth_ref(10000);
  auto noisy = as_float(ref, 5e-3);  // fine for bf16, not for fp32 or tf32
  EXPECT_FALSE(compare_outputs(noisy.data(), ref.data(), 10000, Precision::FP32).pass);
  EXPECT_FALSE(compare_outputs(noisy.data(), ref.data(), 10000, Precision::TF32).pass);
  Comparison c = compare_outputs(noisy.data(), ref.data(), 10000, Precision::BF16);
  EXPECT_TRUE(c.pass) << c.summary();
}

TEST(ReferenceCompare, OneWrongElementFails) {
  auto ref = smooth_ref(10000);
  auto out = as_float(ref);
  out[4321] += 0.05f;  // rel_l2 stays small (~7e-4), the element error does not
  Comparison c = compare_outputs(out.data(), ref.data(), 10000, Precision::TF32);
  EXPECT_FALSE(c.pass) << c.summary();
  EXPECT_LT(c.rel_l2, c.tol.rel_l2);
  EXPECT_GT(c.max_rel, c.tol.max_elem);
  EXPECT_EQ(c.worst_index, 4321);
  EXPECT_NEAR(c.max_abs, 0.05, 1e-6);
  EXPECT_EQ(c.summary().rfind("FAIL", 0), 0u);
}

TEST(ReferenceCompare, NaNAndInf) {
  auto ref = smooth_ref(1000);
  auto out = as_float(ref);
  out[17] = std::numeric_limits<float>::quiet_NaN();  // an unwritten (poisoned) element
  Comparison c = compare_outputs(out.data(), ref.data(), 1000, Precision::BF16);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.nan_count, 1);
  EXPECT_EQ(c.worst_index, 17);
  EXPECT_NE(c.summary().find("NaN"), std::string::npos);

  out[17] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(compare_outputs(out.data(), ref.data(), 1000, Precision::BF16).pass);

  // Where the reference itself is NaN or inf, the same value matches.
  out = as_float(ref);
  ref[3] = std::numeric_limits<double>::quiet_NaN();
  ref[4] = -std::numeric_limits<double>::infinity();
  out[3] = std::numeric_limits<float>::quiet_NaN();
  out[4] = -std::numeric_limits<float>::infinity();
  c = compare_outputs(out.data(), ref.data(), 1000, Precision::FP32);
  EXPECT_TRUE(c.pass) << c.summary();
  out[4] = std::numeric_limits<float>::infinity();  // wrong sign
  EXPECT_FALSE(compare_outputs(out.data(), ref.data(), 1000, Precision::FP32).pass);
  out[4] = 0.0f;
  EXPECT_FALSE(compare_outputs(out.data(), ref.data(), 1000, Precision::FP32).pass);
}

TEST(ReferenceCompare, ZeroReferenceAndEmpty) {
  std::vector<double> ref(100, 0.0);
  std::vector<float> out(100, 0.0f);
  EXPECT_TRUE(compare_outputs(out.data(), ref.data(), 100, Precision::FP32).pass);
  out[5] = 1e-30f;
  EXPECT_FALSE(compare_outputs(out.data(), ref.data(), 100, Precision::FP32).pass);
  EXPECT_FALSE(compare_outputs(out.data(), ref.data(), 0, Precision::FP32).pass);  // nothing checked is no pass
}

TEST(ReferenceCompare, SampledIndices) {
  auto full = smooth_ref(5000);
  auto out = as_float(full);
  std::vector<int64_t> idx = pick_samples(5000, 300, 2);
  std::vector<double> ref;
  for (int64_t i : idx) ref.push_back(full[static_cast<size_t>(i)]);
  Comparison c = compare_outputs(out.data(), ref.data(), idx, Precision::FP32);
  EXPECT_TRUE(c.pass) << c.summary();
  EXPECT_EQ(c.n, 300);
  out[static_cast<size_t>(idx[100])] = std::numeric_limits<float>::quiet_NaN();
  c = compare_outputs(out.data(), ref.data(), idx, Precision::FP32);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.worst_index, idx[100]);  // reported as the flat index
  // An element outside the samples is not looked at.
  out = as_float(full);
  int64_t unsampled = 1;
  while (std::binary_search(idx.begin(), idx.end(), unsampled)) ++unsampled;
  out[static_cast<size_t>(unsampled)] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(compare_outputs(out.data(), ref.data(), idx, Precision::FP32).pass);
}

}  // namespace
}  // namespace fusejit
