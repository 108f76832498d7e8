// GPU: fj_ops.cuh's branch-free sigmoid and silu (and fj::recip_refined, below) against fp64 on a dense sweep
// of fp32 inputs and the special values: within 3.5 ulps (sigmoid) and 4.5 (silu)
// where the result is a normal float (silu: or within |x| 2^-148 where its
// sigmoid is denormal), within 2^-126 below that, NaN for NaN,
// the limits at +-inf; erf and gelu (erff) likewise, below. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/program.h"
#include "runtime/cuda_driver.h"
#include "runtime/loaded_program.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

const char* kSource = R"(
#include "fusejit/fj_ops.cuh"
extern "C" __global__ void fj_test_ops(const float* x, float* sig, float* silu) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) {
    sig[i] = fj::op::sigmoid(x[i]);
    silu[i] = fj::op::silu(x[i]);
  }
}
)";

double ulps(float got, double want) {  // |got - want| in ulps of want (as a float)
  const float w = static_cast<float>(want);
  const double ulp = std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity()) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Runs kernel `name` of `body` (after `constexpr int kN = x.size();`, a thread an element: x in, `outputs`
// float arrays out, poisoned with NaN first) and returns the outputs.
Expected<std::vector<std::vector<float>>> run_elementwise(const std::string& name, const std::string& body,
                                                          const std::vector<float>& x, int outputs) {
  auto info = device_info(0);
  if (!info) return info.error();
  const int n = static_cast<int>(x.size());
  Program p;
  p.name = name;
  p.source = "constexpr int kN = " + std::to_string(n) + ";\n" + body;
  LaunchSpec launch{name, {static_cast<unsigned>((n + 255) / 256), 1, 1}, {256, 1, 1}, 0, {{BufferKind::Input, 0}}};
  for (int o = 0; o < outputs; ++o) launch.args.push_back({BufferKind::Output, o});
  p.launches.push_back(launch);
  NvrtcOptions opts;
  opts.arch = info->arch;
  auto cubin = compile_to_cubin(p.source, p.name, opts);
  if (!cubin) return cubin.error();
  auto lp = LoadedProgram::load(p, cubin->cubin, 1, outputs);
  if (!lp) return lp.error();
  const size_t bytes = x.size() * sizeof(float);
  auto dx = DeviceBuffer::allocate(bytes);
  if (!dx) return dx.error();
  if (Status s = dx->upload(x.data(), bytes); !s) return s.error();
  std::vector<DeviceBuffer> outs;
  std::vector<CUdeviceptr> out_ptrs;
  for (int o = 0; o < outputs; ++o) {
    auto b = DeviceBuffer::allocate(bytes);
    if (!b) return b.error();
    if (Status s = b->fill_bytes(0xFF); !s) return s.error();  // NaN poison
    out_ptrs.push_back(b->ptr());
    outs.push_back(b.take());
  }
  if (Status s = (*lp)->run({dx->ptr()}, out_ptrs, nullptr); !s) return s.error();
  if (Status s = stream_synchronize(nullptr); !s) return s.error();
  std::vector<std::vector<float>> host(static_cast<size_t>(outputs), std::vector<float>(x.size()));
  for (int o = 0; o < outputs; ++o)
    if (Status s = outs[static_cast<size_t>(o)].download(host[static_cast<size_t>(o)].data(), bytes); !s)
      return s.error();
  return host;
}

TEST(GpuOpAccuracy, SigmoidAndSiluWithinAFewUlps) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  std::vector<float> x;
  for (int i = -2000000; i <= 2000000; ++i) x.push_back(static_cast<float>(i) * 6e-5f);  // [-120, 120]
  for (float v = 1e-30f; v < 1e30f; v *= 1.7f) x.insert(x.end(), {v, -v});
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-45f, -1e-45f, 88.7f, -88.7f,
                     -87.3f, -103.f, 3.4e38f, -3.4e38f});
  const int n = static_cast<int>(x.size());
  auto outs = run_elementwise("fj_test_ops", kSource, x, 2);
  ASSERT_TRUE(outs) << outs.error().message;
  const std::vector<float>& sig = (*outs)[0];
  const std::vector<float>& silu = (*outs)[1];

  const double kMinNormal = std::numeric_limits<float>::min();
  double worst_sig = 0, worst_silu = 0;
  int bad = 0;
  // slack: an absolute allowance (silu below x = -87.3 multiplies x by a denormal sigmoid, whose last bit is
  // 2^-149: PyTorch's x / (1 + exp(-x)) gives -0 there)
  auto check = [&](const char* op, float xi, float got, double want, double& worst, double max_ulps,
                   double slack = 0) {
    if (std::isnan(want)) {
      if (!std::isnan(got) && ++bad <= 10) ADD_FAILURE() << op << "(" << xi << ") = " << got << ", want NaN";
      return;
    }
    if (std::isinf(want)) {
      if (got != static_cast<float>(want) && ++bad <= 10) ADD_FAILURE() << op << "(" << xi << ") = " << got;
      return;
    }
    if (std::fabs(want) < kMinNormal) {  // flushed or denormal: absolute
      if (std::fabs(got - want) > kMinNormal && ++bad <= 10)
        ADD_FAILURE() << op << "(" << xi << ") = " << got << ", want " << want;
      return;
    }
    if (std::fabs(got - want) <= slack) return;
    const double u = ulps(got, want);
    worst = std::max(worst, u);
    if (u > max_ulps && ++bad <= 10)
      ADD_FAILURE() << op << "(" << xi << ") = " << got << ", want " << want << " (" << u << " ulps)";
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    const double sg = std::isnan(xi) ? xi : 1.0 / (1.0 + std::exp(-xi));
    check("sigmoid", x[i], sig[i], sg, worst_sig, 3.5);
    const double sl = std::isnan(xi) || xi == -HUGE_VAL ? std::nan("") : xi == HUGE_VAL ? xi : xi * sg;
    check("silu", x[i], silu[i], sl, worst_silu, 4.5, std::fabs(xi) * std::ldexp(1.0, -148));
  }
  EXPECT_EQ(bad, 0);
  std::printf("sigmoid: worst %.2f ulps, silu: worst %.2f ulps over %d inputs\n", worst_sig, worst_silu, n);
}

// fj::recip_refined over [2^-126, 2^126] (a softmax's row sums are in [1, N]): within an ulp of 1 / d.
TEST(GpuOpAccuracy, RefinedReciprocalWithinAnUlp) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  std::vector<float> d;
  for (float v = 1.17549435e-38f; v < 8.5e37f; v *= 1.0009765f) d.insert(d.end(), {v, -v});
  for (int i = 1; i <= 100000; ++i) d.push_back(1.f + static_cast<float>(i) * 1e-5f);  // [1, 2]
  d.push_back(std::numeric_limits<float>::quiet_NaN());
  const int n = static_cast<int>(d.size());
  auto outs = run_elementwise("fj_test_recip", R"(
#include "fusejit/fj_common.cuh"
extern "C" __global__ void fj_test_recip(const float* d, float* r) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) r[i] = fj::recip_refined(d[i]);
}
)", d, 1);
  ASSERT_TRUE(outs) << outs.error().message;
  const std::vector<float>& r = (*outs)[0];
  double worst = 0;
  int bad = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    if (std::isnan(d[i])) {
      EXPECT_TRUE(std::isnan(r[i]));
      continue;
    }
    const double u = ulps(r[i], 1.0 / static_cast<double>(d[i]));
    worst = std::max(worst, u);
    if (u > 1.0 && ++bad <= 10) ADD_FAILURE() << "1 / " << d[i] << " = " << r[i] << " (" << u << " ulps)";
  }
  EXPECT_EQ(bad, 0);
  std::printf("recip_refined: worst %.2f ulps over %d inputs\n", worst, n);
}

// fj::op::erf_ and gelu_erf (erff) over a dense sweep of [-5, 5] and every
// binade down to the denormals: within 2 ulps of erf (erff's documented bound), NaN for
// NaN, +-1 at +-inf; gelu within 3 ulps plus erf's error scaled by x (the formula cancels below 0).
TEST(GpuOpAccuracy, ErfAndGeluWithinAFewUlps) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  std::vector<float> x;
  for (int i = -2000000; i <= 2000000; ++i) x.push_back(static_cast<float>(i) * 2.5e-6f);  // [-5, 5]
  const float inf = std::numeric_limits<float>::infinity();
  for (float v = 1e-44f; v < 1e6f; v = std::max(v * 1.001f, std::nextafter(v, inf))) x.insert(x.end(), {v, -v});
  x.insert(x.end(), {0.f, -0.f, 1.25f, -1.25f, 4.f, -4.f, inf, -inf, std::numeric_limits<float>::quiet_NaN()});
  const int n = static_cast<int>(x.size());
  auto outs = run_elementwise("fj_test_erf", R"(
#include "fusejit/fj_ops.cuh"
extern "C" __global__ void fj_test_erf(const float* x, float* erf, float* gelu) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) {
    erf[i] = fj::op::erf_(x[i]);
    gelu[i] = fj::op::gelu_erf(x[i]);
  }
}
)", x, 2);
  ASSERT_TRUE(outs) << outs.error().message;
  const std::vector<float>& e = (*outs)[0];
  const std::vector<float>& g = (*outs)[1];
  double worst_erf = 0, worst_gelu = 0;
  int bad = 0;
  const double kMinNormal = std::numeric_limits<float>::min();
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    if (std::isnan(xi)) {
      EXPECT_TRUE(std::isnan(e[i]) && std::isnan(g[i])) << "erf / gelu of NaN";
      continue;
    }
    if (std::isinf(xi)) {
      EXPECT_EQ(e[i], xi > 0 ? 1.f : -1.f) << "erf(" << xi << ")";
      continue;
    }
    const double want = std::erf(xi);
    const double u = ulps(e[i], want);
    worst_erf = std::max(worst_erf, u);
    if (u > 2.0 && ++bad <= 10) ADD_FAILURE() << "erf(" << x[i] << ") = " << e[i] << ", want " << want << " (" << u << " ulps)";
    // gelu: 0.5 x (1 + erf(x / sqrt 2)), PyTorch's formula, which cancels below 0 (as PyTorch's does): within
    // 3 |gelu| 2^-23 (3 to 6 ulps) plus |x| 2^-23 (erf's 2 ulps near 1, times x / 2, with room); worst
    // ulps reported for x >= 0.
    const double want_gelu = 0.5 * xi * (1.0 + std::erf(xi / std::sqrt(2.0)));
    if (std::fabs(want_gelu) >= kMinNormal) {
      const double ug = ulps(g[i], want_gelu);
      const double ulp_gelu = std::fabs(want_gelu) * 0x1p-23;  // one or two ulps of want
      if (xi >= 0) worst_gelu = std::max(worst_gelu, ug);
      if (std::fabs(g[i] - want_gelu) > 3 * ulp_gelu + std::fabs(xi) * 0x1p-23 && ++bad <= 10)
        ADD_FAILURE() << "gelu(" << x[i] << ") = " << g[i] << ", want " << want_gelu << " (" << ug << " ulps)";
    }
  }
  EXPECT_EQ(bad, 0);
  std::printf("erf: worst %.2f ulps, gelu (x >= 0): worst %.2f ulps over %d inputs\n", worst_erf, worst_gelu, n);
}

}  // namespace
}  // namespace fusejit
