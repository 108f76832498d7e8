// Host tensors: f16/bf16 bit conversions and the device byte layout.
#include <bit>
#include <cmath>
#include <cstring>

#include "fusejit/reference.h"

namespace fusejit {

uint16_t float_to_bf16_bits(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a (quiet) NaN
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);                       // ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);                 // overflow carries into inf
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_f16_bits(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t abs = bits & 0x7FFFFFFF;
  if (abs > 0x7F800000) return sign | 0x7E00;      // NaN
  if (abs >= 0x477FF000) return sign | 0x7C00;     // >= 65520 rounds to inf (and inf itself)
  if (abs < 0x38800000) {                          // below 2^-14: subnormal (or zero)
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // in units of 2^-24, exact
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));  // 1024 becomes the smallest normal
  }
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t mant = abs & 0x7FFFFF;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry moves into the exponent correctly
  return sign | static_cast<uint16_t>(h);
}

float f16_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

float round_to_dtype(float f, DType dtype) {
  switch (dtype) {
    case DType::F32: return f;
    case DType::F16: return f16_bits_to_float(float_to_f16_bits(f));
    case DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(f));
  }
  return f;
}

std::vector<uint8_t> to_device_bytes(const HostTensor& t) {
  size_t n = t.data.size();
  std::vector<uint8_t> bytes;
  if (t.type.dtype == DType::F32) {
    bytes.resize(n * 4);
    if (n) std::memcpy(bytes.data(), t.data.data(), n * 4);
    return bytes;
  }
  bytes.resize(n * 2);
  bool f16 = t.type.dtype == DType::F16;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h = f16 ? float_to_f16_bits(t.data[i]) : float_to_bf16_bits(t.data[i]);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  return bytes;
}

HostTensor from_device_bytes(const TensorType& type, const void* bytes) {
  HostTensor t{type, std::vector<float>(static_cast<size_t>(type.numel()))};
  size_t n = t.data.size();
  const auto* src = static_cast<const uint8_t*>(bytes);
  if (type.dtype == DType::F32) {
    if (n) std::memcpy(t.data.data(), src, n * 4);
    return t;
  }
  bool f16 = type.dtype == DType::F16;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    t.data[i] = f16 ? f16_bits_to_float(h) : bf16_bits_to_float(h);
  }
  return t;
}

}  // namespace fusejit
