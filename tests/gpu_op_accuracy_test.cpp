// GPU: fj_ops.cuh's branch-free sigmoid and silu (and fj::recip_refined, below) against fp64 on a dense sweep
// of fp32 inputs and the special values: within 3.5 ulps (sigmoid) and 4.5 (silu)
// where the result is a normal float (silu: or within |x| 2^-148 where its
// sigmoid is denormal), within 2^-126 below that, NaN for NaN,
// the limits at +-inf. Skipped without a CUDA device.
#include <gtest/gtest.h>

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

TEST(GpuOpAccuracy, SigmoidAndSiluWithinAFewUlps) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.error().message;
  std::vector<float> x;
  for (int i = -2000000; i <= 2000000; ++i) x.push_back(static_cast<float>(i) * 6e-5f);  // [-120, 120]
  for (float v = 1e-30f; v < 1e30f; v *= 1.7f) x.insert(x.end(), {v, -v});
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-45f, -1e-45f, 88.7f, -88.7f,
                     -87.3f, -103.f, 3.4e38f, -3.4e38f});
  const int n = static_cast<int>(x.size());

  Program p;
  p.name = "fj_test_ops";
  p.source = "constexpr int kN = " + std::to_string(n) + ";\n" + kSource;
  p.launches.push_back({"fj_test_ops", {static_cast<unsigned>((n + 255) / 256), 1, 1}, {256, 1, 1}, 0,
                        {{BufferKind::Input, 0}, {BufferKind::Output, 0}, {BufferKind::Output, 1}}});
  NvrtcOptions opts;
  opts.arch = info->arch;
  auto cubin = compile_to_cubin(p.source, p.name, opts);
  ASSERT_TRUE(cubin.ok()) << cubin.error().message;
  auto lp = LoadedProgram::load(p, cubin->cubin, 1, 2);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  auto dx = DeviceBuffer::allocate(x.size() * 4), ds = DeviceBuffer::allocate(x.size() * 4),
       dl = DeviceBuffer::allocate(x.size() * 4);
  ASSERT_TRUE(dx.ok() && ds.ok() && dl.ok());
  ASSERT_TRUE(dx->upload(x.data(), x.size() * 4).ok());
  ASSERT_TRUE(ds->fill_bytes(0xFF).ok() && dl->fill_bytes(0xFF).ok());  // NaN poison
  Status s = (*lp)->run({dx->ptr()}, {ds->ptr(), dl->ptr()}, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(stream_synchronize(nullptr).ok());
  std::vector<float> sig(x.size()), silu(x.size());
  ASSERT_TRUE(ds->download(sig.data(), sig.size() * 4).ok());
  ASSERT_TRUE(dl->download(silu.data(), silu.size() * 4).ok());

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

}  // namespace
}  // namespace fusejit

namespace fusejit {
namespace {

// fj::recip_refined over [2^-126, 2^126] (a softmax's row sums are in [1, N]): within an ulp of 1 / d.
TEST(GpuOpAccuracy, RefinedReciprocalWithinAnUlp) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.error().message;
  std::vector<float> d;
  for (float v = 1.17549435e-38f; v < 8.5e37f; v *= 1.0009765f) d.insert(d.end(), {v, -v});
  for (int i = 1; i <= 100000; ++i) d.push_back(1.f + static_cast<float>(i) * 1e-5f);  // [1, 2]
  d.push_back(std::numeric_limits<float>::quiet_NaN());
  const int n = static_cast<int>(d.size());
  Program p;
  p.name = "fj_test_recip";
  p.source = "constexpr int kN = " + std::to_string(n) + ";\n" + R"(
#include "fusejit/fj_common.cuh"
extern "C" __global__ void fj_test_recip(const float* d, float* r) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) r[i] = fj::recip_refined(d[i]);
}
)";
  p.launches.push_back({"fj_test_recip", {static_cast<unsigned>((n + 255) / 256), 1, 1}, {256, 1, 1}, 0,
                        {{BufferKind::Input, 0}, {BufferKind::Output, 0}}});
  NvrtcOptions opts;
  opts.arch = info->arch;
  auto cubin = compile_to_cubin(p.source, p.name, opts);
  ASSERT_TRUE(cubin.ok()) << cubin.error().message;
  auto lp = LoadedProgram::load(p, cubin->cubin, 1, 1);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  auto dd = DeviceBuffer::allocate(d.size() * 4), dr = DeviceBuffer::allocate(d.size() * 4);
  ASSERT_TRUE(dd.ok() && dr.ok());
  ASSERT_TRUE(dd->upload(d.data(), d.size() * 4).ok());
  ASSERT_TRUE(dr->fill_bytes(0xFF).ok());
  Status s = (*lp)->run({dd->ptr()}, {dr->ptr()}, nullptr);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(stream_synchronize(nullptr).ok());
  std::vector<float> r(d.size());
  ASSERT_TRUE(dr->download(r.data(), r.size() * 4).ok());
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

}  // namespace
}  // namespace fusejit
