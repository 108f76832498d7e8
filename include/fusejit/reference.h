// fusejit/reference.h — the fp64 CPU reference: host tensors, seeded random
// inputs, dense and sampled evaluation of a prepared Graph, and the comparison
// of a kernel's output against the reference with per-precision tolerances.
//
// Semantics follow PyTorch (see docs/reference.md). The reference computes in
// double and never rounds intermediates to f16/bf16; the tolerances absorb it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusejit/error.h"
#include "fusejit/ir.h"

namespace fusejit {

// ---- host tensors -------------------------------------------------------------

// A dense row-major tensor on the host. Values are stored as float but are
// always exactly representable in type.dtype (f16/bf16 values are rounded with
// round-to-nearest-even when they are made).
struct HostTensor {
  TensorType type;
  std::vector<float> data;
};

uint16_t float_to_bf16_bits(float f);  // round to nearest even; NaN stays NaN
float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_f16_bits(float f);   // round to nearest even; overflow -> inf
float f16_bits_to_float(uint16_t bits);
// `f` rounded to the nearest value of `dtype` (identity for f32).
float round_to_dtype(float f, DType dtype);

// The tensor in its device layout: f32 = 4 bytes, f16/bf16 = 2 bytes an element.
std::vector<uint8_t> to_device_bytes(const HostTensor& t);
// Reads type.numel() elements of type.dtype from `bytes`.
HostTensor from_device_bytes(const TensorType& type, const void* bytes);

// ---- seeded random inputs -----------------------------------------------------

// One tensor per Graph::inputs(), in order, filled by Node::init (resolved by
// prepare_graph): uniform01 U[0,1), normal N(0,1), torch_weight/torch_bias
// U(-b, b) with b = 1/sqrt(init_fan_in). Element i of input j depends only on
// (seed, j, i), so the data does not depend on the thread count.
std::vector<HostTensor> make_random_inputs(const Graph& g, uint64_t seed);

// `count` distinct flat indices in [0, numel), sorted; always includes the
// first and the last element. All indices when count >= numel.
std::vector<int64_t> pick_samples(int64_t numel, int64_t count, uint64_t seed);

// ---- evaluation -----------------------------------------------------------------

struct ReferenceOptions {
  // Dense mode refuses graphs whose live fp64 buffers would exceed this.
  int64_t max_dense_bytes = int64_t{8} << 30;
  int threads = 0;  // 0: std::thread::hardware_concurrency()
};

// Every output of a prepared graph, in Graph::outputs order, in fp64.
// `inputs` are in Graph::inputs() order. Fails (no crash) for a graph too big
// for the memory budget; use evaluate_reference_at for those.
Expected<std::vector<std::vector<double>>> evaluate_reference(const Graph& g, const std::vector<HostTensor>& inputs,
                                                              const ReferenceOptions& opts = {});

// Output `output_index` at the given flat indices only (same order), computed
// lazily with memoization; cost grows with the samples, not the output size.
Expected<std::vector<double>> evaluate_reference_at(const Graph& g, const std::vector<HostTensor>& inputs,
                                                    int output_index, const std::vector<int64_t>& flat_indices,
                                                    const ReferenceOptions& opts = {});

// ---- comparison -------------------------------------------------------------------

// rel_l2 = ||out - ref|| / ||ref||; per element |out - ref| / (|ref| + rms(ref))
// must stay below max_elem.
struct Tolerance {
  double rel_l2;
  double max_elem;
};
Tolerance tolerance_for(Precision p);

struct Comparison {
  double max_abs = 0;     // max |out - ref| over finite pairs
  double max_rel = 0;     // max |out - ref| / (|ref| + rms(ref))
  double rel_l2 = 0;      // ||out - ref||_2 / ||ref||_2
  int64_t n = 0;          // elements compared
  int64_t nan_count = 0;  // elements whose finiteness differs (NaN/Inf in out where ref is finite, or vice versa)
  int64_t worst_index = -1;  // flat index of the worst element (a non-finite mismatch first)
  double worst_out = 0, worst_ref = 0;
  Tolerance tol{0, 0};
  bool pass = false;
  std::string summary() const;  // one line, "PASS ..." or "FAIL ..."
};

// out[i] against ref[i] for i < n.
Comparison compare_outputs(const float* out, const double* ref, int64_t n, Precision p);
// Sampled: out is the whole output; ref[i] is the reference at flat index indices[i].
Comparison compare_outputs(const float* out, const double* ref, const std::vector<int64_t>& indices, Precision p);

}  // namespace fusejit
