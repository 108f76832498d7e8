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
  int64_t n, k;    // out features / columns; the window (kernel == stride)
  bool is_max, matmul;
};

// Ragged M, floor mode dropping the last columns, every window that divides
// 16, several column tiles, a batched matmul with leading dims.
inline std::vector<Pool1dCase> pool1d_cases() {
  return {{"linear 37x72 -> 202, max4", {37, 72}, 202, 4, true, false},
          {"linear 1x64 -> 96, avg2", {1, 64}, 96, 2, false, false},
          {"linear 3x5x40 -> 300, max16", {3, 5, 40}, 300, 16, true, false},
          {"linear 130x128 -> 520, avg8", {130, 128}, 520, 8, false, false},
          {"matmul 2x3x33x40 @ 40x136, max8", {2, 3, 33, 40}, 136, 8, true, true}};
}

// sigmoid(anchor) * 3 -> pool -> - bias[window] (a broadcast after the pool).
inline Expected<Graph> pool1d_chain(Precision p, const Pool1dCase& c) {
  GraphBuilder g(p, "pool1d_chain");
  const int64_t in = c.x.back();
  auto x = g.input("x", c.x);
  auto y = c.matmul ? g.matmul(x, g.input("w", {in, c.n})) : g.linear(x, g.input("w", {c.n, in}), g.input("b", {c.n}));
  y = y.sigmoid() * 3.0;
  Pool1dOptions po;
  po.kernel = c.k;
  po.stride = c.k;
  auto pooled = c.is_max ? y.max_pool1d(po) : y.avg_pool1d(po);
  g.output("y", pooled - g.input("shift", {c.n / c.k}));
  return g.build();
}

}  // namespace fusejit::testing
