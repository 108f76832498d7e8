// tests/plan_rule_cases.h — planner cases for the fusion rule of issue 10 §2:
// an anchor followed by elementwise ops, broadcasts, pooling and reductions
// runs in at most 2 kernels, and the anchor's full output goes to memory only
// when the graph outputs it. Shared by plan_rule_test.cpp (plans) and
// gpu_plan_rule_test.cpp (results against the fp64 reference).
#pragma once

#include <string>
#include <vector>

namespace fusejit::testing {

struct PlanRuleCase {
  std::string name;
  std::string spec;  // YAML
};

// Row reductions over N = 512 (wider than one wgmma tile on sm_90a: partials).
inline const char* kRuleHead = R"(precision: fp32
inputs:
  - {name: x, shape: [128, 512]}
  - {name: w, shape: [512, 512]}
ops:
  - {name: h, op: linear, args: [x, w]}
)";

inline std::vector<PlanRuleCase> plan_rule_cases() {
  const std::string head = kRuleHead;
  return {
      {"sum_max_mean_lse_chain",  // reductions of the reduced values over size-1 dims
       "name: sum_max_mean_lse_chain\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: m, op: max, args: [s], dims: [1], keepdim: true}\n"
           "  - {name: a, op: mean, args: [m], dims: [1], keepdim: true}\n"
           "  - {name: l, op: logsumexp, args: [a], dims: [1]}\n"
           "outputs: [l]\n"},
      {"row_stats_combined",  // five partial reductions and elementwise ops of several of them
       "name: row_stats_combined\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1]}\n"
           "  - {name: a, op: mean, args: [h], dims: [1]}\n"
           "  - {name: mx, op: max, args: [h], dims: [1]}\n"
           "  - {name: mn, op: min, args: [h], dims: [1]}\n"
           "  - {name: l, op: logsumexp, args: [h], dims: [1]}\n"
           "  - {name: range, op: sub, args: [mx, mn]}\n"
           "  - {name: t, op: tanh, args: [range]}\n"
           "  - {name: z, op: sub, args: [l, a]}\n"
           "outputs: [s, t, z]\n"},
      {"sum_then_max_over_rows",  // a reduction across rows of the finished values
       "name: sum_then_max_over_rows\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1]}\n"
           "  - {name: m, op: max, args: [s], dims: [0]}\n"
           "outputs: [m]\n"},
      {"max_subtract_gelu",  // x - max(x), broadcast back over the row
       "name: max_subtract_gelu\n" + head +
           "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: d, op: sub, args: [h, mx]}\n"
           "  - {name: y, op: gelu, args: [d]}\n"
           "outputs: [y]\n"},
      {"rmsnorm",
       "name: rmsnorm\n" + head +
           "  - {name: sq, op: square, args: [h]}\n"
           "  - {name: ms, op: mean, args: [sq], dims: [-1], keepdim: true}\n"
           "  - {name: den, op: add, args: [ms, 1e-6]}\n"
           "  - {name: r, op: rsqrt, args: [den]}\n"
           "  - {name: y, op: mul, args: [h, r]}\n"
           "outputs: [y]\n"},
      {"residual_input_after_reduction",  // x + sum(h): the anchor input, broadcast over the row
       "name: residual_input_after_reduction\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: y, op: add, args: [x, s]}\n"
           "outputs: [y]\n"},
      {"residual_output_after_reduction",  // h + mean(h): the anchor output
       "name: residual_output_after_reduction\n" + head +
           "  - {name: a, op: mean, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: y, op: add, args: [h, a]}\n"
           "outputs: [y]\n"},
      {"conv_global_avg_pool",
       R"(name: conv_global_avg_pool
precision: fp32
inputs:
  - {name: x, shape: [4, 16, 16, 16]}
  - {name: w, shape: [32, 16, 3, 3]}
  - {name: b, shape: [32]}
ops:
  - {name: c, op: conv2d, args: [x, w, b], padding: 1}
  - {name: r, op: relu, args: [c]}
  - {name: p, op: global_avg_pool, args: [r]}
outputs: [p]
)"},
      {"linear_max_pool1d",  // 1-D pooling along N
       "name: linear_max_pool1d\n" + head +
           "  - {name: r, op: relu, args: [h]}\n"
           "  - {name: p, op: max_pool1d, args: [r], kernel_size: 4, stride: 4}\n"
           "outputs: [p]\n"},
      {"two_finishes_broadcast_back",  // finished values and their consumers broadcast over x's rows
       "name: two_finishes_broadcast_back\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: mx, op: max, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: t, op: tanh, args: [s]}\n"
           "  - {name: u, op: sub, args: [t, mx]}\n"
           "  - {name: xs, op: mul, args: [x, u]}\n"
           "  - {name: y, op: add, args: [xs, mx]}\n"
           "outputs: [u, y]\n"},
      // A layer norm written out after a linear: the mean's partials in the epilogue, the centered
      // values and their variance as row stages of the finish kernel, then the scale.
      {"manual_layer_norm", "name: manual_layer_norm\n" + head +
           "  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: c, op: sub, args: [h, mu]}\n"
           "  - {name: sq, op: mul, args: [c, c]}\n"
           "  - {name: var, op: mean, args: [sq], dims: [1], keepdim: true}\n"
           "  - {name: ve, op: add, args: [var, 1e-5]}\n"
           "  - {name: rs, op: rsqrt, args: [ve]}\n"
           "  - {name: y, op: mul, args: [c, rs]}\n"
           "  - {name: z, op: add, args: [y, x]}\n"
           "outputs: [z]\n"},
      // bf16, ragged rows (300 x 1000, one block's rows cut short), two row stages (the variance, then a
      // max of the normalized rows), the centered values stored from the wide stage.
      {"manual_layer_norm_bf16_ragged", R"(name: manual_layer_norm_bf16_ragged
precision: bf16
inputs:
  - {name: x, shape: [300, 1000]}
  - {name: w, shape: [1000, 1000]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}
  - {name: c, op: sub, args: [h, mu]}
  - {name: sq, op: mul, args: [c, c]}
  - {name: var, op: mean, args: [sq], dims: [1], keepdim: true}
  - {name: ve, op: add, args: [var, 1e-5]}
  - {name: rs, op: rsqrt, args: [ve]}
  - {name: y, op: mul, args: [c, rs]}
  - {name: m2, op: max, args: [y], dims: [1], keepdim: true}
  - {name: z, op: sub, args: [y, m2]}
outputs: [z, c]
)"},
      // The variance is an output too: no row stage (nothing is stored at row coordinates from one).
      {"manual_layer_norm_var_output", "name: manual_layer_norm_var_output\n" + head +
           "  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: c, op: sub, args: [h, mu]}\n"
           "  - {name: sq, op: mul, args: [c, c]}\n"
           "  - {name: var, op: max, args: [sq], dims: [1], keepdim: true}\n"
           "  - {name: y, op: div, args: [c, var]}\n"
           "outputs: [y, var]\n"},
      {"manual_layer_norm_stats_output",  // mu and rstd as outputs (a layer norm's saved statistics)
       "name: manual_layer_norm_stats_output\n" + head +
           "  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: c, op: sub, args: [h, mu]}\n"
           "  - {name: sq, op: mul, args: [c, c]}\n"
           "  - {name: var, op: mean, args: [sq], dims: [1], keepdim: true}\n"
           "  - {name: ve, op: add, args: [var, 1.0e-5]}\n"
           "  - {name: rs, op: rsqrt, args: [ve]}\n"
           "  - {name: y, op: mul, args: [c, rs]}\n"
           "outputs: [y, mu, rs]\n"},
      {"manual_layer_norm_var_read_later",  // a stage's reduction read by later kernels: stored at row coordinates
       "name: manual_layer_norm_var_read_later\n" + head +
           "  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: c, op: sub, args: [h, mu]}\n"
           "  - {name: sq, op: mul, args: [c, c]}\n"
           "  - {name: var, op: max, args: [sq], dims: [1], keepdim: true}\n"
           "  - {name: y, op: div, args: [c, var]}\n"
           "  - {name: t, op: sum, args: [var], dims: [0, 1]}\n"
           "  - {name: z, op: mul, args: [y, t]}\n"
           "outputs: [z]\n"},
      {"rows_then_mean_of_tanh",  // a reduction of a finished value's consumer over every row, then its consumer
       "name: rows_then_mean_of_tanh\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: t, op: tanh, args: [s]}\n"
           "  - {name: a, op: mean, args: [t], dims: [0, 1]}\n"
           "  - {name: y, op: sigmoid, args: [a]}\n"
           "outputs: [t, y]\n"},
      {"linear_mse_loss",  // a regression loss over every element: rows reduced in the epilogue, then their values
       R"(name: linear_mse_loss
precision: fp32
inputs:
  - {name: x, shape: [128, 512]}
  - {name: w, shape: [512, 512]}
  - {name: target, shape: [128, 512]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: d, op: sub, args: [h, target]}
  - {name: sq, op: mul, args: [d, d]}
  - {name: loss, op: mean, args: [sq], dims: [0, 1]}
outputs: [loss]
)"},
      {"linear_mse_loss_tall",  // as linear_mse_loss over 2500 rows: the finish kernel's blocks fold their rows
       R"(name: linear_mse_loss_tall
precision: bf16
inputs:
  - {name: x, shape: [2500, 64], dtype: bf16}
  - {name: w, shape: [320, 64], dtype: bf16}
  - {name: target, shape: [2500, 320]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: d, op: sub, args: [h, target]}
  - {name: sq, op: mul, args: [d, d]}
  - {name: loss, op: sum, args: [sq], dims: [0, 1], keepdim: true}
outputs: [loss]
)"},
      {"matmul_batch_totals",  // per-batch totals of a batched matmul: along the rows, then over each batch's rows
       R"(name: matmul_batch_totals
precision: fp32
inputs:
  - {name: a, shape: [4, 96, 64]}
  - {name: b, shape: [4, 64, 320]}
ops:
  - {name: h, op: matmul, args: [a, b]}
  - {name: t, op: tanh, args: [h]}
  - {name: m, op: max, args: [t], dims: [1, 2], keepdim: true}
  - {name: s, op: sigmoid, args: [m]}
outputs: [s]
)"},
      {"linear_amax_scale",  // scaled by the largest magnitude over every element (a quantization scale)
       "name: linear_amax_scale\n" + head +
           "  - {name: a, op: abs, args: [h]}\n"
           "  - {name: m, op: max, args: [a], dims: [0, 1], keepdim: true}\n"
           "  - {name: y, op: div, args: [h, m]}\n"
           "outputs: [y]\n"},
      {"linear_column_sum",  // a reduction over the rows (dim 0): per feature
       "name: linear_column_sum\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [0]}\n"
           "  - {name: t, op: tanh, args: [s]}\n"
           "outputs: [t]\n"},
      {"linear_rows_norm_bf16",  // a reduction over every row of a 3-D linear: per-tile column partials
       R"(name: linear_rows_norm_bf16
precision: bf16
inputs:
  - {name: x, shape: [3, 70, 64]}
  - {name: w, shape: [160, 64]}
  - {name: b, shape: [160]}
ops:
  - {name: h, op: linear, args: [x, w, b]}
  - {name: q, op: mul, args: [h, h]}
  - {name: s, op: mean, args: [q], dims: [0, 1], keepdim: true}
  - {name: r, op: sqrt, args: [s]}
outputs: [r]
)"},
      {"matmul_batched_column_max",  // the column maxima over every batch entry's rows, a B per entry
       R"(name: matmul_batched_column_max
precision: fp32
inputs:
  - {name: a, shape: [2, 150, 48]}
  - {name: b, shape: [2, 48, 80]}
ops:
  - {name: h, op: matmul, args: [a, b]}
  - {name: t, op: tanh, args: [h]}
  - {name: m, op: max, args: [t], dims: [0, 1]}
outputs: [m]
)"},
      {"linear_batch_center",  // each feature centered over the batch (batch norm's training mean)
       "name: linear_batch_center\n" + head +
           "  - {name: mu, op: mean, args: [h], dims: [0], keepdim: true}\n"
           "  - {name: y, op: sub, args: [h, mu]}\n"
           "outputs: [y]\n"},
      {"conv_squeeze_excite_input",  // x * sigmoid(mean over H, W of the conv): broadcast over x's planes
       R"(name: conv_squeeze_excite_input
precision: fp32
inputs:
  - {name: x, shape: [2, 16, 18, 18]}
  - {name: w, shape: [16, 16, 3, 3]}
  - {name: b, shape: [16]}
ops:
  - {name: c, op: conv2d, args: [x, w, b], padding: 1}
  - {name: m, op: mean, args: [c], dims: [2, 3], keepdim: true}
  - {name: s, op: sigmoid, args: [m]}
  - {name: y, op: mul, args: [x, s]}
outputs: [y]
)"},
      {"softmax_wide_bf16",  // softmax over N = 1000, wider than a tile (row_cluster=1: across a cluster of 8)
       R"(name: softmax_wide_bf16
precision: bf16
inputs:
  - {name: x, shape: [512, 256], dtype: bf16}
  - {name: w, shape: [1000, 256], dtype: bf16}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: p, op: softmax, args: [h], dim: 1}
  - {name: y, op: mul, args: [p, 3.0]}
outputs: [y]
)"},
      {"log_softmax_wide_ragged_f16",  // ragged M and N, a bias, log_softmax and a consumer
       R"(name: log_softmax_wide_ragged_f16
precision: f16
inputs:
  - {name: x, shape: [300, 384], dtype: f16}
  - {name: w, shape: [700, 384], dtype: f16}
  - {name: b, shape: [700], dtype: f16}
ops:
  - {name: h, op: linear, args: [x, w, b]}
  - {name: p, op: log_softmax, args: [h], dim: 1}
  - {name: y, op: tanh, args: [p]}
outputs: [y]
)"},
      {"conv_gap_flatten",  // a classifier head's features: relu, global average pool, flattened to [N, C]
       R"(name: conv_gap_flatten
precision: bf16
inputs:
  - {name: x, shape: [4, 32, 20, 20], dtype: bf16}
  - {name: w, shape: [64, 32, 3, 3], dtype: bf16}
ops:
  - {name: c, op: conv2d, args: [x, w], padding: 1}
  - {name: r, op: relu, args: [c]}
  - {name: g, op: global_avg_pool, args: [r]}
  - {name: f, op: reshape, args: [g], shape: [4, 64]}
  - {name: e, op: mul, args: [f, 0.5]}
outputs: [f, e]
)"},
      {"row_sums_flattened",  // a row reduction over N = 512 (partials), reshaped as a graph output
       "name: row_sums_flattened\n" + head +
           "  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}\n"
           "  - {name: t, op: tanh, args: [s]}\n"
           "  - {name: f, op: reshape, args: [t], shape: [128]}\n"
           "outputs: [f]\n"},
      {"log_softmax_beside_logsumexp",  // cross-entropy inputs with z-loss over N = 512: one row reduction
       "name: log_softmax_beside_logsumexp\n" + head +
           "  - {name: lp, op: log_softmax, args: [h], dim: 1}\n"
           "  - {name: l, op: logsumexp, args: [h], dims: [1]}\n"
           "  - {name: z, op: mul, args: [l, l]}\n"
           "outputs: [lp, z]\n"},
      {"manual_layer_norm_one_tile",  // N = 192: one tile spans the rows, yet two row stages (partials, row stages)
       R"(name: manual_layer_norm_one_tile
precision: bf16
inputs:
  - {name: x, shape: [100, 96], dtype: bf16}
  - {name: w, shape: [192, 96], dtype: bf16}
  - {name: gamma, shape: [192]}
  - {name: beta, shape: [192]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: mu, op: mean, args: [h], dims: [1], keepdim: true}
  - {name: c, op: sub, args: [h, mu]}
  - {name: sq, op: mul, args: [c, c]}
  - {name: var, op: mean, args: [sq], dims: [1], keepdim: true}
  - {name: ve, op: add, args: [var, 1e-5]}
  - {name: rs, op: rsqrt, args: [ve]}
  - {name: y, op: mul, args: [c, rs]}
  - {name: yg, op: mul, args: [y, gamma]}
  - {name: z, op: add, args: [yg, beta]}
outputs: [z]
)"},
      {"conv_group_norm_swish_maxpool",  // bench_norm's conv_gn_pool, smaller: the norm kernel pools (norm pools)
       R"(name: conv_group_norm_swish_maxpool
precision: bf16
inputs:
  - {name: x, shape: [2, 16, 18, 18], dtype: bf16}
  - {name: w, shape: [32, 16, 3, 3], dtype: bf16}
  - {name: b, shape: [32], dtype: bf16}
  - {name: gamma, shape: [32]}
  - {name: beta, shape: [32]}
ops:
  - {name: c, op: conv2d, args: [x, w, b], padding: 1}
  - {name: gn, op: group_norm, args: [c, gamma, beta], num_groups: 8}
  - {name: s, op: silu, args: [gn]}
  - {name: y, op: max_pool2d, args: [s], kernel_size: 3, stride: 2, padding: 1}
outputs: [y]
)"},
      {"conv_instance_norm_head",  // a classifier head: instance norm, relu, global average pool, sigmoid
       R"(name: conv_instance_norm_head
precision: fp32
inputs:
  - {name: x, shape: [2, 8, 15, 13]}
  - {name: w, shape: [16, 8, 3, 3]}
ops:
  - {name: c, op: conv2d, args: [x, w], padding: 1}
  - {name: n, op: instance_norm, args: [c]}
  - {name: r, op: relu, args: [n]}
  - {name: g, op: global_avg_pool, args: [r]}
  - {name: s, op: sigmoid, args: [g]}
outputs: [s]
)"},
  };
}

}  // namespace fusejit::testing
