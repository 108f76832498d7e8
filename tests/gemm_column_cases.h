// Reductions over every row of a linear's or matmul's output (all dims but
// the last: [M, N] -> [N]), finished from the GEMM epilogue as per-row-tile
// column partials (pass_fuse_spatial.cpp). Shared by
// codegen_gemm_columns_test.cpp (plans, NVRTC) and gpu_gemm_columns_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "fusejit/ir.h"
#include "fusejit/spec.h"

namespace fusejit::testing {

struct GemmColumnCase {
  std::string label;
  std::string ops;     // spec lines after the anchor `h`; the output is `out`
  std::string inputs;  // spec input lines (x or a, w or b, ...)
  std::string anchor;  // the anchor's op line
  std::string outputs = "[out]";
};

// Ragged shapes (no dim a multiple of a tile), 3-D rows, batched matmuls; two
// broadcast the result back over the rows (the anchor's output stored too).
inline std::vector<GemmColumnCase> gemm_column_cases() {
  const std::string linear = "  - {name: x, shape: [300, 96]}\n  - {name: w, shape: [136, 96]}\n"
                             "  - {name: bias, shape: [136]}\n";
  const std::string linear_op = "  - {name: h, op: linear, args: [x, w, bias]}\n";
  return {
      {"linear_sum_gelu", "  - {name: g, op: gelu, args: [h]}\n  - {name: out, op: sum, args: [g], dims: [0]}\n",
       linear, linear_op},
      {"linear_mean_keepdim_sqrt",
       "  - {name: q, op: mul, args: [h, h]}\n  - {name: s, op: mean, args: [q], dims: [0], keepdim: true}\n"
       "  - {name: out, op: sqrt, args: [s]}\n",
       linear, linear_op},
      {"linear_max", "  - {name: out, op: max, args: [h], dims: [0]}\n", linear, linear_op},
      {"linear3d_min_tanh",
       "  - {name: s, op: min, args: [h], dims: [0, 1]}\n  - {name: out, op: tanh, args: [s]}\n",
       "  - {name: x, shape: [3, 70, 64]}\n  - {name: w, shape: [80, 64]}\n  - {name: bias, shape: [80]}\n",
       linear_op},
      {"matmul_shared_b_sum",
       "  - {name: r, op: relu, args: [h]}\n  - {name: out, op: sum, args: [r], dims: [0, 1]}\n",
       "  - {name: x, shape: [3, 90, 64]}\n  - {name: w, shape: [64, 72]}\n",
       "  - {name: h, op: matmul, args: [x, w]}\n"},
      {"linear_center_and_mean",  // h - mean(h, 0): the finish kernel broadcasts the means over the rows
       "  - {name: mu, op: mean, args: [h], dims: [0], keepdim: true}\n  - {name: out, op: sub, args: [h, mu]}\n",
       linear, linear_op, "[out, mu]"},
      {"linear3d_scale_by_column_max",  // h / max(|h|) per feature over a 3-D linear's rows
       "  - {name: a, op: abs, args: [h]}\n  - {name: m, op: max, args: [a], dims: [0, 1]}\n"
       "  - {name: out, op: div, args: [h, m]}\n",
       "  - {name: x, shape: [3, 70, 64]}\n  - {name: w, shape: [80, 64]}\n  - {name: bias, shape: [80]}\n",
       linear_op},
      {"narrow_center",  // 6 columns: a block's column range is mostly idle; its rows carry the work
       "  - {name: mu, op: mean, args: [h], dims: [0], keepdim: true}\n  - {name: out, op: sub, args: [h, mu]}\n",
       "  - {name: x, shape: [1000, 40]}\n  - {name: w, shape: [6, 40]}\n  - {name: bias, shape: [6]}\n",
       linear_op},
      {"tall_center",  // 70000 rows: over a thousand row tiles a column, so rows per block follow the tiles
       "  - {name: mu, op: max, args: [h], dims: [0], keepdim: true}\n  - {name: out, op: sub, args: [h, mu]}\n",
       "  - {name: x, shape: [70000, 16]}\n  - {name: w, shape: [40, 16]}\n  - {name: bias, shape: [40]}\n",
       linear_op},
      {"matmul_batched_b_mean",
       "  - {name: out, op: mean, args: [h], dims: [0, 1], keepdim: true}\n",
       "  - {name: x, shape: [2, 150, 48]}\n  - {name: w, shape: [2, 48, 80]}\n",
       "  - {name: h, op: matmul, args: [x, w]}\n"},
  };
}

inline Expected<Graph> gemm_column_chain(Precision p, const GemmColumnCase& c) {
  const std::string spec = "name: " + c.label + "\nprecision: " + std::string(precision_name(p)) +
                           "\ninputs:\n" + c.inputs + "ops:\n" + c.anchor + c.ops + "outputs: " + c.outputs + "\n";
  return parse_spec(spec, c.label);
}

}  // namespace fusejit::testing
