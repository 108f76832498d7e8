// tests/conv_spatial_cases.h — conv chains ending in a reduction over the
// output pixels (global_avg_pool; sum / mean / max / min over [2, 3]), for
// the codegen (CPU) and GPU tests of the per-image pixel-tile partials.
#pragma once

#include <string>
#include <vector>

#include "fusejit/builder.h"

namespace fusejit::testing {

struct ConvSpatialCase {
  std::string label;
  Shape x, w;
  Conv2dOptions o;
  std::string op;  // global_avg_pool | sum | mean | max | min
  bool keepdim;
};

// Ragged pixel counts (OH*OW not a multiple of the tile), one tile per image
// or several, stride and padding, groups, a tiny output.
inline std::vector<ConvSpatialCase> conv_spatial_cases() {
  return {{"4x16x16x16 -> 32 k3 p1, global_avg_pool", {4, 16, 16, 16}, {32, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1},
           "global_avg_pool", true},
          {"3x8x23x19 -> 24 k3 s2, mean", {3, 8, 23, 19}, {24, 8, 3, 3}, {{2, 2}, {0, 0}, {1, 1}, 1}, "mean", false},
          {"2x12x30x30 -> 40 k3 g4, max keepdim", {2, 12, 30, 30}, {40, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}, "max",
           true},
          {"5x6x9x9 -> 10 k5 p2, min", {5, 6, 9, 9}, {10, 6, 5, 5}, {{1, 1}, {2, 2}, {1, 1}, 1}, "min", false},
          {"2x4x5x4 -> 7 k3, sum (3x2 output)", {2, 4, 5, 4}, {7, 4, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}, "sum", true}};
}

// tanh(conv + b) -> reduction -> * 2 + 1 (consumers in the finish kernel).
inline Expected<Graph> conv_spatial_chain(Precision p, const ConvSpatialCase& c) {
  GraphBuilder g(p, "conv_spatial_chain");
  auto x = g.input("x", c.x);
  auto y = g.conv2d(x, g.input("w", c.w), g.input("b", {c.w[0]}), c.o).tanh();
  Value r = c.op == "global_avg_pool" ? y.global_avg_pool()
            : c.op == "sum"           ? y.sum({2, 3}, c.keepdim)
            : c.op == "mean"          ? y.mean({2, 3}, c.keepdim)
            : c.op == "max"           ? y.max({2, 3}, c.keepdim)
                                      : y.min({2, 3}, c.keepdim);
  g.output("y", r * 2.0 + 1.0);
  return g.build();
}

}  // namespace fusejit::testing
