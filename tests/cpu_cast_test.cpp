// The CPU backend's cast against the fp64 reference, bit for bit: bf16 and
// f16 round to nearest, ties to even (ties both ways, overflow, subnormals,
// NaN, inf), in a pointwise program and in an anchor's epilogue. Skipped in
// builds without LLVM.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/cpu_program.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"

namespace fusejit {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

// f32 values where rounding to bf16 or f16 is delicate.
std::vector<float> delicate_values() {
  return {1.00390625f,    1.01171875f,     -1.00390625f, 1.005f,     1.00048828125f, 1.00146484375f,
          70000.0f,       65519.0f,        65520.0f,     3.3895e38f, -3.3895e38f,    1e-6f,
          -2.98e-8f,      1e-40f,          0.0f,         -0.0f,      kInf,           -kInf,
          std::nanf(""),  3.14159265f,     -2.5e-3f,     123456.7f,  0.333333343f,   65504.0f};
}

// Runs `g` on the CPU and compares each output with the reference exactly.
void expect_exact(const Graph& g, const std::vector<HostTensor>& inputs) {
  Engine engine;
  CompileOptions opts;
  opts.backend = Backend::Cpu;
  auto k = engine.compile(g, opts);
  ASSERT_TRUE(k) << k.error().str();
  auto ref = evaluate_reference(g, inputs);
  ASSERT_TRUE(ref) << ref.error().str();
  std::vector<std::vector<uint8_t>> in_bytes, out_bytes;
  std::vector<DevicePtr> in_ptrs, out_ptrs;
  for (const HostTensor& t : inputs) in_bytes.push_back(to_device_bytes(t));
  for (auto& b : in_bytes) in_ptrs.push_back(reinterpret_cast<DevicePtr>(b.data()));
  for (const Output& o : g.outputs) {
    const TensorType& t = g.node(o.value).type;
    out_bytes.emplace_back(static_cast<size_t>(t.numel() * dtype_size(t.dtype)), 0xFF);
  }
  for (auto& b : out_bytes) out_ptrs.push_back(reinterpret_cast<DevicePtr>(b.data()));
  Status s = (*k)->launch(in_ptrs, out_ptrs);
  ASSERT_TRUE(s) << s.error().str();
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const TensorType& t = g.node(g.outputs[o].value).type;
    const HostTensor got = from_device_bytes(t, out_bytes[o].data());
    for (size_t i = 0; i < got.data.size(); ++i) {
      const double want = (*ref)[o][i];
      const float have = got.data[i];
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(have)) << g.outputs[o].name << "[" << i << "]";
      else EXPECT_EQ(static_cast<double>(have), want) << g.outputs[o].name << "[" << i << "] of " << delicate_values()[i % 24];
    }
  }
}

TEST(CpuCast, PointwiseRoundsAsTheReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  const std::vector<float> v = delicate_values();
  GraphBuilder b(Precision::FP32, "casts");
  Value x = b.input("x", {4, static_cast<int64_t>(v.size())});
  b.output("bf", x.cast(DType::BF16).cast(DType::F32));  // f32 outputs: the cast's rounding alone
  b.output("hf", x.cast(DType::F16).cast(DType::F32));
  b.output("bf_stored", x.cast(DType::BF16));              // stored as bf16
  b.output("hf_twice", x.abs().cast(DType::BF16).cast(DType::F16));
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  std::vector<float> data;
  for (int r = 0; r < 4; ++r) data.insert(data.end(), v.begin(), v.end());
  expect_exact(*g, {HostTensor{{DType::F32, {4, static_cast<int64_t>(v.size())}}, data}});
}

TEST(CpuCast, EpilogueRoundsAsTheReference) {
  if (!cpu_backend_available()) GTEST_SKIP() << "this build has no LLVM CPU backend";
  const std::vector<float> v = delicate_values();
  const int64_t n = static_cast<int64_t>(v.size());
  GraphBuilder b(Precision::FP32, "epilogue_casts");
  Value x = b.input("x", {3, n});
  Value a = b.input("a", {3, 1});
  Value m = b.input("m", {1, n});
  Value z = b.matmul(a, m) + x;  // zeros + x: exactly x, inf and NaN kept
  b.output("bf", z.cast(DType::BF16).cast(DType::F32));
  b.output("hf", z.cast(DType::F16).cast(DType::F32));
  auto g = b.build();
  ASSERT_TRUE(g) << g.error().str();
  std::vector<float> data;
  for (int r = 0; r < 3; ++r) data.insert(data.end(), v.begin(), v.end());
  expect_exact(*g, {HostTensor{{DType::F32, {3, n}}, data}, HostTensor{{DType::F32, {3, 1}}, {0, 0, 0}},
                    HostTensor{{DType::F32, {1, n}}, std::vector<float>(static_cast<size_t>(n), 0.0f)}});
}

}  // namespace
}  // namespace fusejit
