// Conv chains the conv codegen tests build: relu(conv2d(x, w, b)) then a tail, and conv options.
#pragma once

#include <gtest/gtest.h>

#include "fusejit/builder.h"

namespace fusejit::test_util {

inline Conv2dOptions padded(int64_t pad, int64_t stride = 1, int64_t groups = 1, int64_t dilation = 1) {
  Conv2dOptions o;
  o.padding = {pad, pad};
  o.stride = {stride, stride};
  o.groups = groups;
  o.dilation = {dilation, dilation};
  return o;
}

inline Value same(Value v) { return v; }
inline Value max_pool2(Value v) { return v.max_pool2d({}); }

// relu(conv(x, w, b)), then `tail` of the result.
inline Graph conv_chain(Precision p, const Shape& x, const Shape& w, const Conv2dOptions& o,
                        Value (*tail)(Value) = same) {
  GraphBuilder g(p, "conv_chain");
  auto y = g.conv2d(g.input("x", x), g.input("w", w), g.input("b", {w[0]}), o).relu();
  g.output("y", tail(y));
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.ok() ? built.take() : Graph{};
}

}  // namespace fusejit::test_util
