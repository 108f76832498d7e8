// Chains whose group / layer norm can run in a wgmma anchor's epilogue
// (pass_fuse_norm_epilogue.cpp): groups of a multiple of 8
// columns inside one column tile, ragged M and a ragged last column tile,
// with and without weight / bias, an epilogue before the norm and consumers
// after it, every precision mode; shared by the codegen and GPU tests.
#pragma once

#include <string>
#include <vector>

#include "fusejit/builder.h"

namespace fusejit::testing_norm {

struct NormEpilogueCase {
  std::string label;
  Expected<Graph> graph;
};

inline Expected<Graph> norm_epilogue_chain(Precision p, int kind) {
  GraphBuilder g(p, "norm_epilogue_" + std::to_string(kind));
  const DType dt = anchor_dtype(p);
  struct Shape3 {
    int64_t m, k, n;
  };
  const Shape3 s = kind == 0 ? Shape3{200, 64, 256} : kind == 1 ? Shape3{130, 96, 384} : kind == 2 ? Shape3{77, 48, 128}
                                                                                                  : Shape3{64, 40, 1024};
  auto x = g.input("x", {s.m, s.k}, dt);
  auto h = g.linear(x, g.input("w", {s.n, s.k}, dt), g.input("b", {s.n}, dt));
  const auto gamma = [&] { return g.input("gamma", {s.n}, DType::F32, InitKind::Normal); };
  const auto beta = [&] { return g.input("beta", {s.n}, DType::F32, InitKind::Normal); };
  Value y;
  if (kind == 0) {  // 8 groups of 32, affine, then silu
    y = h.group_norm(8, gamma(), beta()).silu();
  } else if (kind == 1) {  // 3 groups of 128 over 384 columns (the last 256-column tile half outside N), no affine
    y = h.relu().group_norm(3, std::nullopt, std::nullopt, 1e-3) * 2.0;
  } else if (kind == 2) {  // layer_norm over N = 128, weight and bias, gelu
    y = h.layer_norm({s.n}, gamma(), beta()).gelu();
  } else {  // 16 groups of 64 over 1024 columns, weight only, tanh
    y = h.group_norm(16, gamma()).tanh();
  }
  g.output("y", y);
  return g.build();
}

inline std::vector<NormEpilogueCase> norm_epilogue_cases(const std::vector<Precision>& precisions) {
  std::vector<NormEpilogueCase> out;
  for (Precision p : precisions)
    for (int kind = 0; kind < 4; ++kind)
      out.push_back({std::string(precision_name(p)) + " case " + std::to_string(kind), norm_epilogue_chain(p, kind)});
  return out;
}

}  // namespace fusejit::testing_norm
