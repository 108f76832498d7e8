// Comparison of a kernel's output against the fp64 reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fusejit/reference.h"

namespace fusejit {
namespace {

// out_at(i) is the kernel's value for ref[i]; index_of(i) its flat index.
template <class OutAt, class IndexOf>
Comparison compare(OutAt out_at, IndexOf index_of, const double* ref, int64_t n, Precision p) {
  Comparison c;
  c.n = n;
  c.tol = tolerance_for(p);
  double ref2 = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(ref[i])) ref2 += ref[i] * ref[i], ++finite;
  double rms = finite ? std::sqrt(ref2 / static_cast<double>(finite)) : 0.0;
  constexpr double kInf = std::numeric_limits<double>::infinity();

  double err2 = 0;
  int64_t first_mismatch = -1, worst_finite = -1;
  for (int64_t i = 0; i < n; ++i) {
    double o = out_at(i), r = ref[i];
    if (!std::isfinite(r) || !std::isfinite(o)) {
      bool same = (std::isnan(o) && std::isnan(r)) || o == r;  // the same NaN-ness or the same infinity
      if (!same && c.nan_count++ == 0) first_mismatch = i;
      continue;
    }
    double diff = std::fabs(o - r), denom = std::fabs(r) + rms;
    double rel = denom > 0 ? diff / denom : (diff > 0 ? kInf : 0.0);
    err2 += diff * diff;
    c.max_abs = std::max(c.max_abs, diff);
    if (worst_finite < 0 || rel > c.max_rel) {
      c.max_rel = rel;
      worst_finite = i;
    }
  }
  int64_t worst = first_mismatch >= 0 ? first_mismatch : worst_finite;
  c.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? kInf : 0.0);
  if (worst >= 0) {
    c.worst_index = index_of(worst);
    c.worst_out = out_at(worst);
    c.worst_ref = ref[worst];
  }
  c.pass = n > 0 && c.nan_count == 0 && c.rel_l2 <= c.tol.rel_l2 && c.max_rel <= c.tol.max_elem;
  return c;
}

}  // namespace

Tolerance tolerance_for(Precision p) {
  double rel_l2 = 1e-5;
  switch (p) {
    case Precision::FP32: rel_l2 = 1e-5; break;
    case Precision::TF32: rel_l2 = 2e-3; break;
    case Precision::BF16: rel_l2 = 2e-2; break;
    case Precision::F16: rel_l2 = 5e-3; break;
  }
  return {rel_l2, 10 * rel_l2};
}

Comparison compare_outputs(const float* out, const double* ref, int64_t n, Precision p) {
  return compare([&](int64_t i) { return static_cast<double>(out[i]); }, [](int64_t i) { return i; }, ref, n, p);
}

Comparison compare_outputs(const float* out, const double* ref, const std::vector<int64_t>& indices, Precision p) {
  return compare([&](int64_t i) { return static_cast<double>(out[indices[static_cast<size_t>(i)]]); },
                 [&](int64_t i) { return indices[static_cast<size_t>(i)]; }, ref,
                 static_cast<int64_t>(indices.size()), p);
}

std::string Comparison::summary() const {
  char buf[512];
  if (n == 0) return "FAIL: no elements compared";
  int len = std::snprintf(buf, sizeof buf,
                          "%s: %lld elements, rel_l2 %.3g (tol %.3g), max elem err %.3g (tol %.3g), max abs %.3g",
                          pass ? "PASS" : "FAIL", static_cast<long long>(n), rel_l2, tol.rel_l2, max_rel,
                          tol.max_elem, max_abs);
  std::string s(buf, static_cast<size_t>(std::max(len, 0)));
  if (nan_count)
    s += ", " + std::to_string(nan_count) + " NaN/Inf mismatches";
  if (worst_index >= 0) {
    std::snprintf(buf, sizeof buf, "; %s at [%lld]: out %.9g, ref %.9g", nan_count ? "first mismatch" : "worst",
                  static_cast<long long>(worst_index), worst_out, worst_ref);
    s += buf;
  }
  return s;
}

}  // namespace fusejit
