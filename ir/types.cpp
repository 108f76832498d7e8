// Element types, precision modes, shapes and attribute text.
#include <cmath>
#include <cstdio>

#include "fusejit/ir.h"

namespace fusejit {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "f32" || s == "float32") return DType::F32;
  if (s == "f16" || s == "float16") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  return std::nullopt;
}

int dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

DType promote(DType a, DType b) { return a == b ? a : DType::F32; }

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::F16: return "f16";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view s) {
  if (s == "fp32") return Precision::FP32;
  if (s == "tf32") return Precision::TF32;
  if (s == "bf16") return Precision::BF16;
  if (s == "f16" || s == "fp16") return Precision::F16;
  return std::nullopt;
}

DType anchor_dtype(Precision p) {
  switch (p) {
    case Precision::BF16: return DType::BF16;
    case Precision::F16: return DType::F16;
    default: return DType::F32;
  }
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

namespace {
std::string float_str(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  // Shortest text that reads back to the same double.
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

std::string attr_str(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return float_str(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const std::vector<int64_t>& xs) const { return shape_str(xs); }
  };
  return std::visit(Visitor{}, v);
}

std::string attr_kind_phrase(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int: return "an int";
    case AttrKind::Float: return "a number";
    case AttrKind::Bool: return "true or false";
    case AttrKind::String: return "a string";
    case AttrKind::Ints: return "an int or a list of ints";
    case AttrKind::Pair: return "an int or a list of two ints";
  }
  return "a valid value";
}

std::string_view init_name(InitKind k) {
  switch (k) {
    case InitKind::Auto: return "auto";
    case InitKind::Uniform01: return "uniform01";
    case InitKind::Normal: return "normal";
    case InitKind::TorchWeight: return "torch_weight";
    case InitKind::TorchBias: return "torch_bias";
  }
  return "?";
}

std::optional<InitKind> parse_init(std::string_view s) {
  for (InitKind k : {InitKind::Auto, InitKind::Uniform01, InitKind::Normal, InitKind::TorchWeight,
                     InitKind::TorchBias})
    if (init_name(k) == s) return k;
  return std::nullopt;
}

}  // namespace fusejit
