// fusejit/gather.cuh — the gather kernels' element functions (one thread an
// output element): im2col and the backward of max / avg pooling, with
// PyTorch's rules. flip needs no function (the emitter reverses coordinates).
//
// Shape concept (generated): kH kW (the pooled or unfolded input plane),
// kOH kOW (the pooled output or the conv's output plane), kKH kKW (kernel),
// kSH kSW (stride), kPH kPW (padding), kDH kDW (dilation; 1 for avg).
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

// Element (row = (c, kh, kw), col = (n, oh, ow)) of im2col's columns; load(n,
// c, ih, iw) -> float of the input, 0 in the padding.
template <class S, class LoadF>
__device__ __forceinline__ float im2col_at(long long row, long long col, const LoadF& load) {
  const int kw = (int)(row % S::kKW), kh = (int)(row / S::kKW % S::kKH);
  const long long c = row / (S::kKW * S::kKH);
  const int ow = (int)(col % S::kOW), oh = (int)(col / S::kOW % S::kOH);
  const long long n = col / ((long long)S::kOW * S::kOH);
  const int ih = oh * S::kSH - S::kPH + kh * S::kDH, iw = ow * S::kSW - S::kPW + kw * S::kDW;
  if (ih < 0 || ih >= S::kH || iw < 0 || iw >= S::kW) return 0.f;
  return load(n, c, ih, iw);
}

// Calls f(o) for each window o (of kOut) along one axis that holds input
// position `pos`.
template <int kK, int kS, int kP, int kD, int kOut, class F>
__device__ __forceinline__ void windows_holding(int pos, const F& f) {
  for (int t = 0; t < kK; ++t) {
    const int start = pos + kP - t * kD;
    if (start < 0 || start % kS != 0 || start / kS >= kOut) continue;
    f(start / kS);
  }
}

// The first maximum (the last NaN, as PyTorch picks) of window (oh, ow):
// its offset ih * kW + iw in the plane, -1 for a window of padding only.
// x(ih, iw) -> float of the plane.
template <class S, class LoadX>
__device__ __forceinline__ int window_first_max(int oh, int ow, const LoadX& x) {
  const int h0 = oh * S::kSH - S::kPH, w0 = ow * S::kSW - S::kPW;
  float m = neg_inf();
  int arg = -1;
  for (int i = 0; i < S::kKH; ++i) {
    const int ih = h0 + i * S::kDH;
    if (ih < 0 || ih >= S::kH) continue;
    for (int j = 0; j < S::kKW; ++j) {
      const int iw = w0 + j * S::kDW;
      if (iw < 0 || iw >= S::kW) continue;
      const float v = x(ih, iw);
      if (arg < 0 || v > m || is_nan(v)) arg = ih * S::kW + iw, m = v;
    }
  }
  return arg;
}

// d(max_pool2d)/dx at input (h, w): the grads of the windows whose first
// maximum (the last NaN, as PyTorch picks) is (h, w). x(ih, iw), grad(oh, ow)
// -> float of the plane.
template <class S, class LoadX, class LoadG>
__device__ __forceinline__ float max_pool2d_backward_at(int h, int w, const LoadX& x, const LoadG& grad) {
  float sum = 0.f;
  windows_holding<S::kKH, S::kSH, S::kPH, S::kDH, S::kOH>(h, [&](int oh) {
    windows_holding<S::kKW, S::kSW, S::kPW, S::kDW, S::kOW>(w, [&](int ow) {
      if (window_first_max<S>(oh, ow, x) == h * S::kW + w) sum += grad(oh, ow);
    });
  });
  return sum;
}

// d(avg_pool2d)/dx at input (h, w): each window's grad over its divisor.
template <class S, bool kCountIncludePad, class LoadG>
__device__ __forceinline__ float avg_pool2d_backward_at(int h, int w, const LoadG& grad) {
  float sum = 0.f;
  windows_holding<S::kKH, S::kSH, S::kPH, 1, S::kOH>(h, [&](int oh) {
    windows_holding<S::kKW, S::kSW, S::kPW, 1, S::kOW>(w, [&](int ow) {
      const int h0 = oh * S::kSH - S::kPH, w0 = ow * S::kSW - S::kPW;
      const int h1 = min(h0 + S::kKH, S::kH + S::kPH), w1 = min(w0 + S::kKW, S::kW + S::kPW);
      const int divisor = kCountIncludePad ? (h1 - h0) * (w1 - w0)
                                           : (min(h1, S::kH) - max(h0, 0)) * (min(w1, S::kW) - max(w0, 0));
      sum += grad(oh, ow) / (float)divisor;
    });
  });
  return sum;
}

}  // namespace fj
