// Builds linear -> + bias -> relu with the C++ chain API and compiles it to an
// sm_90a CUBIN (no GPU needed), printing each kernel's registers and smem.
#include <cstdio>

#include "fusejit/builder.h"
#include "fusejit/cubin.h"
#include "fusejit/engine.h"

int main() {
  using namespace fusejit;
  GraphBuilder g(Precision::FP32, "consumer_linear_relu");
  Value x = g.input("x", {256, 512});
  Value w = g.input("w", {1024, 512});
  Value bias = g.input("bias", {1024});
  g.output("y", (g.linear(x, w) + bias).relu());
  Expected<Graph> graph = g.build();
  if (!graph) {
    std::fprintf(stderr, "%s\n", graph.error().str().c_str());
    return 1;
  }
  Engine engine;
  CompileOptions opts;
  opts.resource_usage = true;
  Expected<CubinResult> cubin = engine.compile_cubin(*graph, "sm_90a", opts);
  if (!cubin) {
    std::fprintf(stderr, "%s\n", cubin.error().str().c_str());
    return 1;
  }
  std::printf("consumer_cpp: %zu bytes of sm_90a CUBIN\n", cubin->cubin.size());
  for (const KernelResources& k : cubin->resources)
    std::printf("  %s: %d registers, %lld bytes smem\n", k.function.c_str(), k.registers,
                static_cast<long long>(k.shared_bytes));
  return cubin->cubin.empty() || cubin->resources.empty() ? 1 : 0;
}
