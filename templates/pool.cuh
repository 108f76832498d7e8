// fusejit/pool.cuh — pooling windows for the fallback pool kernels (one thread
// per output element). PyTorch semantics: max pools skip the padding (as if
// -inf) and propagate NaN; avg pools divide by the window clipped to the padded
// extent (count_include_pad) or by the in-bounds element count.
//
// Shape concept for 2-D (generated): kH kW (input plane), kKH kKW (kernel),
// kSH kSW (stride), kPH kPW (padding), kDH kDW (dilation; 1 for avg).
// For 1-D the same names with the W half only: kW kKW kSW kPW kDW.
#pragma once

#include "fusejit/fj_common.cuh"

namespace fj {

// load(ih, iw) -> float of the input plane.
template <class S, bool kMax, bool kCountIncludePad, class LoadF>
__device__ __forceinline__ float pool2d_window(int oh, int ow, const LoadF& load) {
  const int h0 = oh * S::kSH - S::kPH, w0 = ow * S::kSW - S::kPW;
  if constexpr (kMax) {
    float v = neg_inf();
    for (int kh = 0; kh < S::kKH; ++kh) {
      const int ih = h0 + kh * S::kDH;
      if (ih < 0 || ih >= S::kH) continue;
      for (int kw = 0; kw < S::kKW; ++kw) {
        const int iw = w0 + kw * S::kDW;
        if (iw >= 0 && iw < S::kW) v = max_nan(v, load(ih, iw));
      }
    }
    return v;
  } else {
    int h1 = min(h0 + S::kKH, S::kH + S::kPH), w1 = min(w0 + S::kKW, S::kW + S::kPW);
    const int padded_area = (h1 - h0) * (w1 - w0);
    const int hs = max(h0, 0), ws = max(w0, 0);
    h1 = min(h1, S::kH);
    w1 = min(w1, S::kW);
    float sum = 0.f;
    for (int ih = hs; ih < h1; ++ih)
      for (int iw = ws; iw < w1; ++iw) sum += load(ih, iw);
    if (hs >= h1 || ws >= w1) return 0.f;  // an empty window (PyTorch writes 0)
    const int divisor = kCountIncludePad ? padded_area : (h1 - hs) * (w1 - ws);
    return sum / (float)divisor;
  }
}

// load(iw) -> float of the input row.
template <class S, bool kMax, bool kCountIncludePad, class LoadF>
__device__ __forceinline__ float pool1d_window(int ow, const LoadF& load) {
  const int w0 = ow * S::kSW - S::kPW;
  if constexpr (kMax) {
    float v = neg_inf();
    for (int kw = 0; kw < S::kKW; ++kw) {
      const int iw = w0 + kw * S::kDW;
      if (iw >= 0 && iw < S::kW) v = max_nan(v, load(iw));
    }
    return v;
  } else {
    int w1 = min(w0 + S::kKW, S::kW + S::kPW);
    const int padded = w1 - w0;
    const int ws = max(w0, 0);
    w1 = min(w1, S::kW);
    float sum = 0.f;
    for (int iw = ws; iw < w1; ++iw) sum += load(iw);
    if (ws >= w1) return 0.f;
    return sum / (float)(kCountIncludePad ? padded : (w1 - ws));
  }
}

}  // namespace fj
