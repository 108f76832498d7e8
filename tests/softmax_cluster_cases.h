// tests/softmax_cluster_cases.h — softmax / log_softmax along an N of 2 to 8
// wgmma tiles, finished across a cluster of column tiles with row_cluster=1
// (pass_fuse_softmax.cpp). Shared by codegen_softmax_cluster_test.cpp (plans,
// NVRTC) and gpu_softmax_cluster_test.cpp (results against the fp64 reference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fusejit::testing {

// y = 0.5 * op(linear(x, w[, b]), the last dim) with x [m, k] (batch > 0: [batch, m, k]), w [n, k].
inline std::string softmax_cluster_spec(const std::string& name, const std::string& precision, int64_t m, int64_t k,
                                        int64_t n, const std::string& op, bool bias, int64_t batch = 0) {
  const std::string dt = precision == "bf16" || precision == "f16" ? precision : "f32";
  const std::string lead = batch > 0 ? std::to_string(batch) + ", " : "";
  return "name: " + name + "\nprecision: " + precision + "\ninputs:\n  - {name: x, shape: [" + lead +
         std::to_string(m) + ", " + std::to_string(k) + "], dtype: " + dt + "}\n  - {name: w, shape: [" +
         std::to_string(n) + ", " + std::to_string(k) + "], dtype: " + dt + "}\n" +
         (bias ? "  - {name: b, shape: [" + std::to_string(n) + "], dtype: " + dt + "}\n" : "") +
         "ops:\n  - {name: h, op: linear, args: [x, w" + (bias ? ", b" : "") + "]}\n  - {name: p, op: " + op +
         ", args: [h], dim: " + (batch > 0 ? "2" : "1") + "}\n  - {name: y, op: mul, args: [p, 0.5]}\noutputs: [y]\n";
}

struct SoftmaxClusterCase {
  std::string name, spec;
  bool log;
  bool pingpong_ok() const { return name.find("_fp32_") == std::string::npos; }  // 3xTF32 has no ping-pong
};

// The cluster on 64-row ping-pong tiles (an exchange per consumer), where the precision allows ping-pong.
inline const char* kSoftmaxClusterPingPong = "row_cluster=1,wgmma_schedule=pingpong,wgmma_tile=64x256x4";

inline std::vector<SoftmaxClusterCase> softmax_cluster_cases() {
  struct Shape {
    const char* precision;
    int64_t m, k, n;
    const char* op;
    bool bias;
    int64_t batch = 0;
  };
  const Shape shapes[] = {
      {"bf16", 4096, 512, 2048, "softmax", false},   // 8 tiles of 256
      {"bf16", 300, 384, 700, "log_softmax", true},  // ragged M and N
      {"bf16", 16384, 128, 1000, "softmax", true},   // several units a cluster: the exchange slots alternate
      {"f16", 1024, 256, 1000, "softmax", true},
      {"tf32", 2048, 256, 1000, "log_softmax", false},
      {"fp32", 2048, 256, 640, "softmax", false},    // 3xTF32
      {"bf16", 300, 256, 1000, "softmax", true, 4},  // x [4, 300, 256]: a 3-D output, rows flattened
  };
  std::vector<SoftmaxClusterCase> out;
  for (const Shape& s : shapes) {
    const std::string name = std::string("sc_") + s.precision + "_" + s.op + "_" +
                             (s.batch ? std::to_string(s.batch) + "x" : "") + std::to_string(s.m) + "x" +
                             std::to_string(s.n);
    out.push_back({name, softmax_cluster_spec(name, s.precision, s.m, s.k, s.n, s.op, s.bias, s.batch),
                   std::string(s.op) == "log_softmax"});
  }
  return out;
}

}  // namespace fusejit::testing
