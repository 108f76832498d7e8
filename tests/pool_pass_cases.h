// tests/pool_pass_cases.h — several pools of one value to one shape, which a
// pool pass (pass_fallback.cpp) computes in one kernel: 1-D pools along a
// linear's / matmul's N that do not fit its epilogue, 2-D pools of a conv's
// output and of a leaf expression (recomputed where it is read), each pool
// with consumers of its own; a pool of another shape or value beside them
// keeps a kernel of its own. Shared by the codegen and GPU tests.
#pragma once

#include <string>
#include <vector>

#include "fusejit/builder.h"

namespace fusejit::testing {

struct PoolPassCase {
  std::string label;
  Expected<Graph> graph;
  size_t kernels;       // with the pool pass (the default)
  size_t pooled;        // pools in the pass's kernel
  size_t kernels_off;   // with pool_pass=0
};

inline Pool1dOptions pool1d(int64_t k, int64_t s, int64_t pad, bool count_pad = true) {
  Pool1dOptions o;
  o.kernel = k;
  o.stride = s;
  o.padding = pad;
  o.count_include_pad = count_pad;
  return o;
}

inline Pool2dOptions pool2d(int64_t k, int64_t s, int64_t pad, bool count_pad = true) {
  Pool2dOptions o;
  o.kernel = {k, k};
  o.stride = {s, s};
  o.padding = {pad, pad};
  o.count_include_pad = count_pad;
  return o;
}

inline std::vector<PoolPassCase> pool_pass_cases(Precision p) {
  const DType dt = anchor_dtype(p);
  std::vector<PoolPassCase> out;
  {  // bench_norm's (e): gelu, then two overlapping, padded 1-D pools (pool1d_overlap=0: not in the epilogue)
    GraphBuilder g(p, "pool_pass_linear");
    auto h = g.linear(g.input("x", {64, 96}, dt), g.input("w", {512, 96}, dt), g.input("b", {512}, dt)).gelu();
    g.output("mp", h.max_pool1d(pool1d(4, 2, 1)));
    g.output("ap", h.avg_pool1d(pool1d(3, 2, 1, false)) * 2.0);
    out.push_back({"linear 64x96 -> 512, gelu, max4 s2 p1 and avg3 s2 p1", g.build(), 2, 2, 3});
  }
  {  // a batched matmul, three pools of one value: two to 45 columns, one to 30
    GraphBuilder g(p, "pool_pass_matmul");
    auto h = g.matmul(g.input("x", {2, 17, 40}, dt), g.input("w", {40, 90}, dt)).sigmoid();
    g.output("a", h.avg_pool1d(pool1d(5, 2, 2)));
    g.output("m", h.max_pool1d(pool1d(3, 2, 1)).tanh());
    g.output("w3", h.max_pool1d(pool1d(3, 3, 0)));  // 30 columns: a kernel of its own
    out.push_back({"matmul 2x17x40 @ 40x90, avg5 s2 p2, max3 s2 p1, and max3 s3 apart", g.build(), 3, 2, 4});
  }
  {  // a conv's output, max and avg 3x3 s2 p1 (windows that cross the conv's tiles)
    GraphBuilder g(p, "pool_pass_conv");
    Conv2dOptions co;
    co.padding = {1, 1};
    auto h = g.conv2d(g.input("x", {2, 8, 17, 17}, dt), g.input("w", {16, 8, 3, 3}, dt), g.input("b", {16}, dt), co)
                 .relu();
    g.output("mp", h.max_pool2d(pool2d(3, 2, 1)));
    g.output("ap", h.avg_pool2d(pool2d(3, 2, 1, false)).relu());
    out.push_back({"conv 2x8x17x17 -> 16 k3 p1, relu, max3 s2 p1 and avg3 s2 p1", g.build(), 2, 2, 3});
  }
  {  // no anchor: a leaf expression, recomputed where the pools read it; a pool of another value apart
    GraphBuilder g(p, "pool_pass_leaf");
    auto x = g.input("x", {2, 4, 15, 15}, dt);
    auto s = x.sigmoid();
    g.output("m2", s.max_pool2d(pool2d(2, 2, 0)));
    g.output("a2", s.avg_pool2d(pool2d(2, 2, 0)) - 0.5);
    g.output("mx", x.max_pool2d(pool2d(2, 2, 0)));  // x, not s: a kernel of its own
    out.push_back({"sigmoid(x) 2x4x15x15, max2 and avg2; max2 of x apart", g.build(), 2, 2, 3});
  }
  return out;
}

}  // namespace fusejit::testing
