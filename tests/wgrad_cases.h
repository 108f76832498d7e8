// conv2d_weight_grad test geometries, shared by the plan / NVRTC tests
// (conv_wgrad_test.cpp), the CPU backend's (cpu_wgrad_test.cpp) and the GPU's
// (gpu_conv_wgrad_test.cpp), and the graph dW = conv2d_weight_grad(x, dz).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "fusejit/builder.h"

namespace fusejit::test_util {

struct WgradGeom {
  int64_t n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  std::string str() const {
    auto pair = [](int64_t a, int64_t b) { return std::to_string(a) + (a == b ? "" : "x" + std::to_string(b)); };
    return "x[" + std::to_string(n) + "," + std::to_string(cin) + "," + std::to_string(h) + "," + std::to_string(w) +
           "] -> " + std::to_string(cout) + " k" + pair(kh, kw) + " s" + pair(sh, sw) + " p" + pair(ph, pw) + " d" +
           pair(dh, dw) + " g" + std::to_string(groups);
  }
};

inline const std::vector<WgradGeom>& wgrad_geoms() {
  static const std::vector<WgradGeom> geoms = {
      {4, 8, 12, 12, 16, 3, 3, 1, 1, 0, 0, 1, 1, 1},    // seed 3's shape, smaller: M = 72 of a 128-row tile
      {4, 8, 34, 34, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1},    // the same with seed 3's 64 channels
      {2, 16, 18, 18, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // seed 1, smaller, padded
      {3, 8, 17, 15, 6, 3, 3, 2, 1, 1, 2, 1, 2, 2},     // strided, padded, dilated, 2 groups; odd 9x15 planes
      {2, 24, 20, 20, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // M = 216 (two row tiles)
      {2, 3, 33, 31, 20, 7, 7, 2, 2, 3, 3, 1, 1, 1},    // a 7x7 stem
      {1, 64, 14, 14, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // 576 x 130: tiles both ways
      {2, 16, 9, 11, 8, 1, 1, 1, 1, 0, 0, 1, 1, 4},     // 1x1, 4 groups, 99-pixel planes
      {8, 12, 30, 30, 24, 5, 5, 1, 1, 2, 2, 1, 1, 1},   // 5x5, K = 7200 pixels: many k tiles per split
  };
  return geoms;
}

// Geometries the wgmma dW takes (16-bit, stride 1, one group, Cin a multiple of 64; grad's rows not a multiple of
// 16 bytes are copied to padded rows):
// {n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups}
inline const std::vector<WgradGeom>& wgrad_wgmma_geoms() {
  static const std::vector<WgradGeom> geoms = {
      {2, 64, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // seed 1's channels, smaller: Cout 64 (64-row tiles)
      {3, 64, 10, 130, 96, 3, 3, 1, 1, 0, 0, 1, 1, 1},   // unpadded, OW 128; Cout 96 of a 128-row tile
      {2, 128, 6, 64, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // Cin 128 (N = 1152), Cout 130: two row tiles
      {1, 64, 12, 68, 32, 3, 3, 1, 1, 0, 0, 2, 2, 1},    // dilated 2
      {4, 64, 4, 64, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // 1x1: N = 64
      {1, 64, 6, 64, 48, 5, 5, 1, 1, 2, 2, 1, 1, 1},     // 5x5, padded: N = 1600 in 64-column tiles
      {2, 64, 8, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // ResNet's 56-wide rows: one ragged k-tile a row
      {1, 64, 9, 74, 40, 3, 3, 1, 1, 0, 0, 1, 1, 1},     // unpadded, OW 72: a full and a ragged k-tile a row
      {2, 64, 7, 40, 32, 3, 3, 1, 1, 2, 2, 2, 2, 1},     // dilated 2, padded 2: OW 40 (one ragged k-tile)
      {2, 64, 8, 64, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1},     // OW 62: grad's rows padded (124 bytes)
      {1, 64, 10, 128, 128, 3, 3, 1, 1, 0, 0, 1, 1, 1},  // seed 1's rows: OW 126, padded
      {2, 64, 6, 64, 32, 2, 2, 1, 1, 0, 0, 1, 1, 1},     // 2x2, OW 63: odd rows (2-byte copies in 16-bit)
  };
  return geoms;
}

// dW = conv2d_weight_grad(x, dz) as output "dw"; with `epilogue`, also "y" = tanh(dw * s) * 2, s =
// 1 / sqrt(N * OH * OW): dW's entries grow as the root of the pixels summed, and tanh of a saturated dW
// would turn dW's (tolerated) absolute error near 0 into a large error relative to y's RMS of about 2.
inline Expected<Graph> wgrad_graph(const WgradGeom& g, Precision p, bool epilogue = false) {
  GraphBuilder b(p, "wgrad_case");
  auto x = b.input("x", {g.n, g.cin, g.h, g.w});
  auto dz = b.input("dz", {g.n, g.cout, g.oh(), g.ow()});
  Conv2dOptions o;
  o.stride = {g.sh, g.sw};
  o.padding = {g.ph, g.pw};
  o.dilation = {g.dh, g.dw};
  o.groups = g.groups;
  auto dw = b.conv2d_weight_grad(x, dz, {g.kh, g.kw}, o);
  b.output("dw", dw);
  if (epilogue) b.output("y", (dw * (1.0 / std::sqrt(static_cast<double>(g.n * g.oh() * g.ow())))).tanh() * 2.0);
  return b.build();
}

}  // namespace fusejit::test_util
