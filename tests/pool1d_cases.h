// tests/pool1d_cases.h — linear / matmul chains with a 1-D pool along N, for
// the codegen (CPU) and GPU tests of the fused pool1d epilogue.
#pragma once

#include <string>
#include <vector>

#include "fusejit/builder.h"

namespace fusejit::testing {

struct Pool1dCase {
  std::string label;
  Shape x;         // the anchor's first operand (batched for matmul)
  int64_t n, k;    // out features / columns; the window
  bool is_max, matmul;
  int64_t stride = 0, padding = 0;  // stride 0: the window (tiles of whole windows)
  bool ceil_mode = false, count_include_pad = true;
  int64_t second_k = 0;  // > 0: a second pool of the same value (the other kind, stride 2, padding 1)
  // Whole windows in every tile (kernel == stride, no padding, floor mode, a window dividing 16, one pool);
  // else the column tiles overlap.
  bool whole_windows() const { return (stride == 0 || stride == k) && padding == 0 && !ceil_mode && 16 % k == 0 && !second_k; }
};

// Ragged M, floor mode dropping the last columns, every window that divides
// 16, several column tiles, a batched matmul with leading dims; then windows
// that cross tile edges: overlapping, padded, ceil mode, gaps, a window of 3
// or 8 columns, two pools of one value.
inline std::vector<Pool1dCase> pool1d_cases() {
  return {{"linear 37x72 -> 202, max4", {37, 72}, 202, 4, true, false},
          {"linear 1x64 -> 96, avg2", {1, 64}, 96, 2, false, false},
          {"linear 3x5x40 -> 300, max16", {3, 5, 40}, 300, 16, true, false},
          {"linear 130x128 -> 520, avg8", {130, 128}, 520, 8, false, false},
          {"matmul 2x3x33x40 @ 40x136, max8", {2, 3, 33, 40}, 136, 8, true, true},
          {"linear 70x64 -> 300, max4 stride 2 pad 1", {70, 64}, 300, 4, true, false, 2, 1},
          {"linear 33x48 -> 257, avg3 stride 2 pad 1 ceil, pad not counted", {33, 48}, 257, 3, false, false, 2, 1, true,
           false},
          {"linear 5x40 -> 130, max3 stride 3", {5, 40}, 130, 3, true, false, 3},
          {"linear 20x32 -> 200, avg8 stride 1 pad 4", {20, 32}, 200, 8, false, false, 1, 4},
          {"linear 9x24 -> 100, max2 stride 5 (gaps)", {9, 24}, 100, 2, true, false, 5},
          {"linear 64x96 -> 512, max4 stride 2 pad 1 and avg3", {64, 96}, 512, 4, true, false, 2, 1, false, true, 3},
          {"matmul 2x17x40 @ 40x90, avg5 stride 2 pad 2 and max3", {2, 17, 40}, 90, 5, false, true, 2, 2, false, true, 3}};
}

// The codegen config of a case: `config`, with overlapping column tiles asked for where the case needs them.
inline std::string pool1d_config(const Pool1dCase& c, const std::string& config) {
  if (c.whole_windows()) return config;
  return config.empty() ? "pool1d_overlap=1" : config + ",pool1d_overlap=1";
}

// sigmoid(anchor) * 3 -> pool -> - shift[window] (a broadcast after the pool);
// second_k: and the other pool kind of the same value -> * 2.
inline Expected<Graph> pool1d_chain(Precision p, const Pool1dCase& c) {
  GraphBuilder g(p, "pool1d_chain");
  const int64_t in = c.x.back();
  auto x = g.input("x", c.x);
  auto y = c.matmul ? g.matmul(x, g.input("w", {in, c.n})) : g.linear(x, g.input("w", {c.n, in}), g.input("b", {c.n}));
  y = y.sigmoid() * 3.0;
  Pool1dOptions po;
  po.kernel = c.k;
  po.stride = c.stride ? c.stride : c.k;
  po.padding = c.padding;
  po.ceil_mode = c.ceil_mode;
  po.count_include_pad = c.count_include_pad;
  auto pooled = c.is_max ? y.max_pool1d(po) : y.avg_pool1d(po);
  const int64_t span = c.n + 2 * c.padding - c.k;  // PyTorch's output width (ceil: the last window starts inside)
  int64_t widths = (c.ceil_mode ? (span + po.stride - 1) / po.stride : span / po.stride) + 1;
  if (c.ceil_mode && (widths - 1) * po.stride >= c.n + c.padding) --widths;
  g.output("y", pooled - g.input("shift", {widths}));
  if (c.second_k) {
    Pool1dOptions second;
    second.kernel = c.second_k;
    second.stride = 2;
    second.padding = 1;
    g.output("y2", (c.is_max ? y.avg_pool1d(second) : y.max_pool1d(second)) * 2.0);
  }
  return g.build();
}

}  // namespace fusejit::testing
