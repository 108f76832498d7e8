// Seeded, reproducible random inputs and sample indices. A counter-based
// generator (splitmix64's finalizer over (seed, input, element)) makes every
// value independent of the thread count and of the order of filling.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "fusejit/reference.h"
#include "reference/parallel.h"

namespace fusejit {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The key of one random stream; element i of it is mix64(key + (i + 1) * golden).
uint64_t stream_key(uint64_t seed, uint64_t stream) { return mix64(mix64(seed + kGolden) ^ mix64(stream * kGolden + 1)); }

uint64_t stream_at(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * kGolden); }

// U[0,1) on the float grid of 2^-24, exact in f32.
float uniform24(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

// The largest value below 1 in `dtype` (rounding must not turn U[0,1) into 1).
float below_one(DType dtype) {
  switch (dtype) {
    case DType::F32: return 1.0f - 1.0f / 16777216.0f;
    case DType::F16: return 1.0f - 1.0f / 2048.0f;
    case DType::BF16: return 1.0f - 1.0f / 256.0f;
  }
  return 0.0f;
}

// One value of `init` for element i of the stream `key`, in f32.
template <InitKind kInit>
float sample_value(uint64_t key, uint64_t i, double bound) {
  if constexpr (kInit == InitKind::Uniform01) {
    return uniform24(stream_at(key, i));
  } else if constexpr (kInit == InitKind::TorchWeight) {  // also torch_bias
    double u = uniform24(stream_at(key, i));
    return static_cast<float>((2.0 * u - 1.0) * bound);
  } else {  // normal: Box-Muller on two 53-bit uniforms; u1 in (0, 1] keeps the log finite
    double u1 = static_cast<double>((stream_at(key, 2 * i) >> 11) + 1) * 0x1.0p-53;
    double u2 = static_cast<double>(stream_at(key, 2 * i + 1) >> 11) * 0x1.0p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

template <InitKind kInit>
void fill(float* out, int64_t begin, int64_t end, uint64_t key, double bound, DType dtype) {
  for (int64_t i = begin; i < end; ++i) out[i] = sample_value<kInit>(key, static_cast<uint64_t>(i), bound);
  if (dtype == DType::F32) return;
  for (int64_t i = begin; i < end; ++i) {
    float v = round_to_dtype(out[i], dtype);
    if (kInit == InitKind::Uniform01 && v >= 1.0f) v = below_one(dtype);  // U[0,1) must stay below 1
    out[i] = v;
  }
}

}  // namespace

std::vector<HostTensor> make_random_inputs(const Graph& g, uint64_t seed) {
  std::vector<HostTensor> result;
  std::vector<ValueId> ids = g.inputs();
  int threads = ref::thread_count(0);
  for (size_t j = 0; j < ids.size(); ++j) {
    const Node& n = g.node(ids[j]);
    HostTensor t{n.type, std::vector<float>(static_cast<size_t>(n.type.numel()))};
    uint64_t key = stream_key(seed, j);
    double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(n.init_fan_in, 1)));
    DType dtype = n.type.dtype;
    float* out = t.data.data();
    int64_t count = static_cast<int64_t>(t.data.size());
    ref::parallel_chunks(count, int64_t{1} << 16, threads, [&](int, int64_t b, int64_t e) {
      switch (n.init) {
        case InitKind::Uniform01: return fill<InitKind::Uniform01>(out, b, e, key, bound, dtype);
        case InitKind::TorchWeight:
        case InitKind::TorchBias: return fill<InitKind::TorchWeight>(out, b, e, key, bound, dtype);
        case InitKind::Auto:  // resolved by prepare_graph; a leftover is treated as normal
        case InitKind::Normal: return fill<InitKind::Normal>(out, b, e, key, bound, dtype);
      }
    });
    result.push_back(std::move(t));
  }
  return result;
}

std::vector<int64_t> pick_samples(int64_t numel, int64_t count, uint64_t seed) {
  std::vector<int64_t> out;
  if (numel <= 0 || count <= 0) return out;
  if (count >= numel) {
    out.resize(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) out[static_cast<size_t>(i)] = i;
    return out;
  }
  out.push_back(0);
  if (count >= 2) out.push_back(numel - 1);
  // Floyd's algorithm: count - 2 distinct values from the interior [1, numel - 2].
  int64_t range = numel - 2, k = count - static_cast<int64_t>(out.size());
  uint64_t key = stream_key(seed, 0x5A3D1E5ull);
  bool use_bitmap = range <= 64 * k;
  std::vector<bool> bitmap(use_bitmap ? static_cast<size_t>(range) : 0);
  std::unordered_set<int64_t> set;
  if (!use_bitmap) set.reserve(static_cast<size_t>(k) * 2);
  auto contains = [&](int64_t v) { return use_bitmap ? bitmap[static_cast<size_t>(v)] : set.count(v) > 0; };
  auto insert = [&](int64_t v) {
    if (use_bitmap) bitmap[static_cast<size_t>(v)] = true;
    else set.insert(v);
    out.push_back(v + 1);
  };
  for (int64_t j = range - k; j < range; ++j) {
    // Uniform in [0, j] by the multiply-high method.
    uint64_t h = stream_at(key, static_cast<uint64_t>(j));
    auto t = static_cast<int64_t>((static_cast<unsigned __int128>(h) * static_cast<uint64_t>(j + 1)) >> 64);
    insert(contains(t) ? j : t);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fusejit
