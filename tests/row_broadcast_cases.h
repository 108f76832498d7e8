// tests/row_broadcast_cases.h — chains whose whole-row reduction is broadcast
// back over the anchor's rows (pass_fuse_row_broadcast.cpp; the default over one
// tile, row_cluster=1 across a cluster of column tiles):
// shared by codegen_row_broadcast_test.cpp (plans, NVRTC) and
// gpu_row_broadcast_test.cpp (results against the fp64 reference).
#pragma once

#include <string>
#include <vector>

namespace fusejit::testing {

struct RowBroadcastCase {
  std::string name;
  std::string spec;  // YAML
  std::string config;  // the broadcast's: "row_broadcast=1" (the default), "row_cluster=1" for the cluster_ cases
};

inline std::string row_broadcast_head(const std::string& name, const std::string& precision, int m, int k, int n,
                                      bool matmul = false, bool bias = false) {
  const std::string ms = std::to_string(m), ks = std::to_string(k), ns = std::to_string(n);
  std::string s = "name: " + name + "\nprecision: " + precision + "\ninputs:\n  - {name: x, shape: [" + ms + ", " + ks +
                  "]}\n  - {name: w, shape: [" + (matmul ? ks + ", " + ns : ns + ", " + ks) + "]}\n";
  if (bias) s += "  - {name: b, shape: [" + ns + "]}\n";
  s += "ops:\n  - {name: h, op: " + std::string(matmul ? "matmul" : "linear") + ", args: [x, w" +
       (bias ? ", b" : "") + "]}\n";
  return s;
}

// h * rsqrt(mean(h^2) + 1e-6) * gamma after a linear [m, k] x [n, k] -> [m, n].
inline std::string rmsnorm_spec(const std::string& name, const std::string& precision, int m, int k, int n) {
  const std::string ms = std::to_string(m), ks = std::to_string(k), ns = std::to_string(n);
  return "name: " + name + "\nprecision: " + precision + "\ninputs:\n  - {name: x, shape: [" + ms + ", " + ks +
         "]}\n  - {name: w, shape: [" + ns + ", " + ks + "]}\n  - {name: gamma, shape: [" + ns + "]}\nops:\n"
         "  - {name: h, op: linear, args: [x, w]}\n"
         "  - {name: sq, op: square, args: [h]}\n"
         "  - {name: ms, op: mean, args: [sq], dims: [-1], keepdim: true}\n"
         "  - {name: den, op: add, args: [ms, 1e-6]}\n"
         "  - {name: r, op: rsqrt, args: [den]}\n"
         "  - {name: nh, op: mul, args: [h, r]}\n"
         "  - {name: y, op: mul, args: [nh, gamma]}\n"
         "outputs: [y]\n";
}

inline std::vector<RowBroadcastCase> row_broadcast_cases() {
  const std::string on = "row_broadcast=1";
  std::vector<RowBroadcastCase> out;
  // x - max(x) (rows ragged: M = 200), the max an output too
  for (const char* p : {"bf16", "tf32", "f16"})
    out.push_back({std::string("max_subtract_gelu_") + p,
                   row_broadcast_head(std::string("rb_max_subtract_gelu_") + p, p, 200, 192, 128, false, true) +
                       "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                       "  - {name: d, op: sub, args: [h, mx]}\n"
                       "  - {name: y, op: gelu, args: [d]}\n"
                       "outputs: [y, mx]\n",
                   on});
  // rmsnorm over N = 100 (not a multiple of the tile), scaled by a per-feature gamma
  out.push_back({"rmsnorm_bf16", rmsnorm_spec("rb_rmsnorm_bf16", "bf16", 256, 64, 100), on});
  // h + mean(h): a residual of the anchor's own output (f16, wide tile)
  out.push_back({"residual_mean_f16",
                 row_broadcast_head("rb_residual_mean_f16", "f16", 384, 256, 256) +
                     "  - {name: a, op: mean, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: y, op: add, args: [h, a]}\n"
                     "outputs: [y]\n",
                 on});
  // min and sum; tf32 matmul with B [K, N] (transposed by the staging kernel), the ping-pong schedule for bf16
  out.push_back({"matmul_min_tf32",
                 row_broadcast_head("rb_matmul_min_tf32", "tf32", 96, 80, 120, true) +
                     "  - {name: mn, op: min, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: y, op: sub, args: [h, mn]}\n"
                     "outputs: [y]\n",
                 on});
  out.push_back({"sum_scale_bf16_pingpong",
                 row_broadcast_head("rb_sum_scale_bf16", "bf16", 512, 128, 128, false, true) +
                     "  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: t, op: tanh, args: [s]}\n"
                     "  - {name: y, op: mul, args: [h, t]}\n"
                     "outputs: [y]\n",
                 on + ",wgmma_schedule=pingpong"});
  // 3xTF32 on wgmma (forced: M = 200 would take mma.sync), the anchor's output stored too
  out.push_back({"max_subtract_gelu_fp32",
                 row_broadcast_head("rb_max_subtract_gelu_fp32", "fp32", 200, 192, 128, false, true) +
                     "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: d, op: sub, args: [h, mx]}\n"
                     "  - {name: y, op: gelu, args: [d]}\n"
                     "outputs: [y, h]\n",
                 on + ",mainloop=wgmma"});
  // N over 2 to 8 column tiles: the rows finished across a cluster of blocks (distributed shared memory)
  out.push_back({"cluster_max_subtract_bf16",
                 row_broadcast_head("rb_cluster_max_subtract_bf16", "bf16", 1024, 512, 1024, false, true) +
                     "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: d, op: sub, args: [h, mx]}\n"
                     "  - {name: y, op: gelu, args: [d]}\n"
                     "outputs: [y, mx]\n",
                 on});
  out.push_back({"cluster_residual_mean_tf32",  // N = 600: the last column tile ragged; M = 200 ragged
                 row_broadcast_head("rb_cluster_residual_mean_tf32", "tf32", 200, 128, 600) +
                     "  - {name: a, op: mean, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: y, op: add, args: [h, a]}\n"
                     "outputs: [y]\n",
                 on});
  out.push_back({"cluster_matmul_min_f16",  // B [K, N] (N-major tiles), M ragged
                 row_broadcast_head("rb_cluster_matmul_min_f16", "f16", 300, 256, 384, true) +
                     "  - {name: mn, op: min, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: y, op: sub, args: [h, mn]}\n"
                     "outputs: [y]\n",
                 on});
  out.push_back({"cluster_rmsnorm_fp32",  // the linear_rmsnorm example's chain (3xTF32, 6 tiles of 128)
                 rmsnorm_spec("rb_cluster_rmsnorm_fp32", "fp32", 512, 1024, 768), on});
  // 256 clusters of 4 (M = 16384, N = 512): several units per persistent block, so each exchange slot and barrier is
  // reused (parity and slot alternation)
  out.push_back({"cluster_rounds_rmsnorm_bf16", rmsnorm_spec("rb_cluster_rounds_rmsnorm_bf16", "bf16", 16384, 64, 512),
                 on});
  out.push_back({"cluster_row_output_bf16",  // a row-shaped output (stored by the cluster's first block) read back
                 row_broadcast_head("rb_cluster_row_output_bf16", "bf16", 1000, 256, 768) +
                     "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: e, op: exp, args: [mx]}\n"
                     "  - {name: y, op: sub, args: [h, e]}\n"
                     "outputs: [y, e]\n",
                 on});
  for (RowBroadcastCase& c : out)
    if (c.name.rfind("cluster_", 0) == 0) c.config = "row_cluster=1";
  out.push_back({"two_row_values_f16",  // the broadcast reads two row values: the row ops at each element
                 row_broadcast_head("rb_two_row_values_f16", "f16", 320, 128, 192) +
                     "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
                     "  - {name: e, op: mul, args: [mx, 0.5]}\n"
                     "  - {name: d, op: sub, args: [h, mx]}\n"
                     "  - {name: y, op: mul, args: [d, e]}\n"
                     "outputs: [y]\n",
                 on});
  return out;
}

}  // namespace fusejit::testing
