// Builds seed problem 3 (conv2d -> tanh -> *2 -> + bias -> max_pool2d(4)) with
// the C++ chain API, prints its canonical IR and hash.
//   build/chain_example
#include <cstdio>

#include "fusejit/builder.h"

int main() {
  using namespace fusejit;
  GraphBuilder g(Precision::FP32, "conv_tanh_scale_bias_maxpool");
  Value x = g.input("x", {128, 8, 256, 256});
  Value w = g.input("conv_w", {64, 8, 3, 3});
  Value b = g.input("conv_b", {64});
  Value bias = g.input("bias", {64, 1, 1});

  Value y = (g.conv2d(x, w, b).named("conv").tanh() * 2.0 + bias).max_pool2d({.kernel = {4, 4}});
  g.output("y", y);

  Expected<Graph> graph = g.build();
  if (!graph) {
    std::fprintf(stderr, "%s\n", graph.error().str().c_str());
    return 1;
  }
  std::printf("%s", print_graph(*graph).c_str());
  std::printf("hash %s\n", hash_hex(structural_hash(*graph)).c_str());
  return 0;
}
