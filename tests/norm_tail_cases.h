// Random chains conv2d -> group / instance / layer norm -> (an elementwise op)
// -> a max / avg pool2d (any window: kernel, stride, padding, dilation,
// ceil_mode, count_include_pad) or a sum / mean / max / min /
// global_avg_pool over trailing dims -> (an elementwise op), which the norm
// kernel does (compiler/pass_fuse_norm_tail.cpp). Shared by
// cpu_norm_tail_test.cpp and gpu_norm_tail_test.cpp (each against the fp64
// reference); the seed fixes the cases, a spec the parser refuses (a window
// PyTorch refuses too) is skipped.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "fusejit/spec.h"

namespace fusejit::testing_norm {

struct NormTailCase {
  std::string label;  // the spec text, for failure messages
  Expected<Graph> graph;
};

inline std::vector<NormTailCase> random_norm_tail_cases(int count, unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* precisions[] = {"fp32", "tf32", "bf16", "f16"};
  std::vector<NormTailCase> out;
  for (int i = 0; static_cast<int>(out.size()) < count && i < count * 8; ++i) {
    const std::string precision = precisions[pick(0, 3)];
    const std::string dt = precision == "bf16" || precision == "f16" ? precision : "f32";
    const int n = pick(1, 2), cin = pick(2, 5), c = 2 * pick(1, 4), h = pick(4, 11), w = pick(4, 13);
    std::string s = "name: norm_tail_" + std::to_string(i) + "\nprecision: " + precision + "\ninputs:\n";
    s += "  - {name: x, shape: [" + std::to_string(n) + ", " + std::to_string(cin) + ", " + std::to_string(h) + ", " +
         std::to_string(w) + "], dtype: " + dt + "}\n";
    s += "  - {name: w, shape: [" + std::to_string(c) + ", " + std::to_string(cin) + ", 3, 3], dtype: " + dt + "}\n";
    std::string norm;
    const int kind = pick(0, 3);  // 1 and 3: a row holds the whole sample
    switch (kind) {
      case 0:
        s += "  - {name: gamma, shape: [" + std::to_string(c) + "], init: normal}\n";
        s += "  - {name: beta, shape: [" + std::to_string(c) + "], init: normal}\n";
        norm = "{name: nn, op: group_norm, args: [c, gamma, beta], num_groups: " + std::to_string(c / 2) + "}";
        break;
      case 1:
        norm = "{name: nn, op: group_norm, args: [c], num_groups: 1, eps: 0.001}";
        break;
      case 2:
        s += "  - {name: gamma, shape: [" + std::to_string(c) + "], init: normal}\n";
        norm = "{name: nn, op: instance_norm, args: [c, gamma]}";
        break;
      default:
        s += "  - {name: gamma, shape: [" + std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) +
             "], init: normal}\n";
        norm = "{name: nn, op: layer_norm, args: [c, gamma], normalized_shape: [" + std::to_string(c) + ", " +
               std::to_string(h) + ", " + std::to_string(w) + "]}";
        break;
    }
    s += "ops:\n  - {name: c, op: conv2d, args: [x, w], padding: 1}\n  - " + norm + "\n";
    std::string pooled = "nn";
    int pre = pick(0, 2);
    const bool pool = pick(0, 1) == 1;
    const char* ops[] = {"sum", "mean", "max", "min", "global_avg_pool"};
    const std::string op = ops[pick(0, 4)];
    // a sum of a normalized row through linear ops alone is 0 up to rounding (no relative error to check): silu
    if (!pool && op != "max" && op != "min" && pre != 1) pre = 1;
    switch (pre) {
      case 1: s += "  - {name: e, op: silu, args: [nn]}\n"; pooled = "e"; break;
      case 2: s += "  - {name: e, op: mul, args: [nn, -1.5]}\n"; pooled = "e"; break;
      default: break;
    }
    if (pool) {
      const bool is_max = pick(0, 1) == 1;
      const int kh = pick(1, 3), kw = pick(kh == 1 ? 2 : 1, 3);  // no 1 x 1 window (simplified to the identity)
      s += "  - {name: p, op: " + std::string(is_max ? "max_pool2d" : "avg_pool2d") + ", args: [" + pooled +
           "], kernel_size: [" + std::to_string(kh) + ", " + std::to_string(kw) + "], stride: [" +
           std::to_string(pick(1, 3)) + ", " + std::to_string(pick(1, 3)) + "], padding: [" +
           std::to_string(pick(0, kh / 2)) + ", " + std::to_string(pick(0, kw / 2)) + "], ceil_mode: " +
           (pick(0, 1) ? "true" : "false");
      if (is_max) s += ", dilation: [" + std::to_string(pick(1, 2)) + ", " + std::to_string(pick(1, 2)) + "]";
      else s += std::string(", count_include_pad: ") + (pick(0, 1) ? "true" : "false");
      s += "}\n";
    } else {  // a reduction over trailing dims: W, H and W, or (a row holding the sample) C, H and W
      const int span = kind == 1 || kind == 3 ? pick(1, 3) : pick(1, 2);
      const std::string dims = span == 1 ? "[3]" : span == 2 ? "[2, 3]" : "[1, 2, 3]";
      s += "  - {name: p, op: " + op + ", args: [" + pooled + "]" +
           (op == "global_avg_pool" ? std::string()
                                    : ", dims: " + dims + ", keepdim: " + (pick(0, 1) ? "true" : "false")) +
           "}\n";
    }
    const bool post = pick(0, 1) == 1;
    if (post) s += "  - {name: y, op: tanh, args: [p]}\n";
    s += std::string("outputs: [") + (post ? "y" : "p") + "]\n";
    Expected<Graph> g = parse_spec(s, "norm_tail_" + std::to_string(i) + ".yaml");
    if (!g) continue;  // a window the spec refuses (a pool output of size 0, padding over half the window)
    out.push_back({s, std::move(g)});
  }
  return out;
}

}  // namespace fusejit::testing_norm
