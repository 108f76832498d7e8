// tests/mma_kinds.h — the precision modes and the tensor-core kind each one's
// kernels carry in their names and plans (fj::MmaKind), for the mma tests.
#pragma once

#include <string>

#include "fusejit/ir.h"

namespace fusejit::test_util {

inline constexpr Precision kPrecisions[] = {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16};

inline std::string mma_kind(Precision p) {
  switch (p) {
    case Precision::FP32: return "f32x3";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::F16: return "f16";
  }
  return "?";
}

}  // namespace fusejit::test_util
