// tests/layout_cases.h — graphs without an anchor op (pointwise programs) and
// graphs with the layout ops (expand, reshape, transpose), comparisons and
// erf, for the codegen, CPU and GPU tests: fixed specs, and a seeded
// generator of random pointwise programs. Every graph is prepared.
#pragma once

#include <string>
#include <vector>

#include "fusejit/ir.h"
#include "tests/random_chains.h"

namespace fusejit::testing {

struct LayoutCase {
  std::string name;
  std::string spec;  // YAML
};

inline const std::vector<LayoutCase>& layout_cases() {
  static const std::vector<LayoutCase> cases = {
      {"relu_mul_broadcast", R"(
inputs: [{name: x, shape: [33, 40]}, {name: w, shape: [40]}]
ops:
  - {name: r, op: relu, args: [x]}
  - {name: y, op: mul, args: [r, w]}
outputs: [y])"},
      {"relu_backward", R"(
inputs: [{name: dy, shape: [64, 48]}, {name: z, shape: [64, 48]}]
ops:
  - {name: mask, op: gt, args: [z, 0]}
  - {name: dz, op: mul, args: [dy, mask]}
  - {name: db, op: sum, args: [dz], dims: [0]}
outputs: [dz, db])"},
      // A linear's bias gradient: a reduction by columns (N = 1000, a ragged last
      // block of columns) of dz, which is an output as is dz^T.
      {"linear_bias_backward_column_pass", R"(
inputs: [{name: dy, shape: [70, 1000]}, {name: z, shape: [70, 1000]}, {name: b, shape: [1000]}]
ops:
  - {name: a, op: add, args: [z, b]}
  - {name: mask, op: gt, args: [a, 0]}
  - {name: dz, op: mul, args: [dy, mask]}
  - {name: db, op: sum, args: [dz], dims: [0]}
  - {name: dzt, op: transpose, args: [dz], dims: [0, 1]}
outputs: [db, dz, dzt])"},
      // Row passes: reductions of the same rows in one kernel, dz stored on the way.
      {"conv_bias_backward_row_pass", R"(
inputs: [{name: dy, shape: [3, 5, 9, 11]}, {name: z, shape: [3, 5, 9, 11]}]
ops:
  - {name: gb, op: sum, args: [dy], dims: [2, 3]}
  - {name: mask, op: gt, args: [z, 0]}
  - {name: dz, op: mul, args: [dy, mask]}
  - {name: db, op: sum, args: [dz], dims: [2, 3]}
  - {name: m, op: max, args: [dz], dims: [2, 3]}
  - {name: mn, op: mean, args: [z], dims: [2, 3]}
  - {name: y, op: mul, args: [m, 2]}
outputs: [gb, dz, db, y, mn])"},
      {"short_rows_row_pass", R"(
inputs: [{name: a, shape: [37, 6]}, {name: b, shape: [37, 6]}]
ops:
  - {name: s, op: sum, args: [a], dims: [1], keepdim: true}
  - {name: e, op: exp, args: [b]}
  - {name: t, op: mul, args: [a, e]}
  - {name: u, op: min, args: [t], dims: [1], keepdim: true}
  - {name: r, op: sub, args: [s, u]}
outputs: [t, r])"},
      {"transpose_mul", R"(
inputs: [{name: a, shape: [37, 24]}, {name: b, shape: [37, 24]}]
ops:
  - {name: m, op: mul, args: [a, b]}
  - {name: t, op: transpose, args: [m], dims: [0, 1]}
outputs: [t])"},
      {"expand_sum_mul", R"(
inputs: [{name: x, shape: [40, 24]}]
ops:
  - {name: s, op: sum, args: [x], dims: [1], keepdim: true}
  - {name: e, op: expand, args: [s], shape: [40, 24]}
  - {name: y, op: mul, args: [e, x]}
outputs: [y])"},
      {"reshape_sum_mul", R"(
inputs: [{name: x, shape: [40, 24]}]
ops:
  - {name: s, op: sum, args: [x], dims: [1]}
  - {name: r, op: reshape, args: [s], shape: [40, 1]}
  - {name: y, op: mul, args: [r, x]}
outputs: [y])"},
      {"softmax_of_input", R"(
inputs: [{name: x, shape: [17, 70]}]
ops:
  - {name: y, op: softmax, args: [x], dim: 1}
outputs: [y])"},
      {"comparisons", R"(
inputs: [{name: a, shape: [5, 31]}, {name: b, shape: [31]}]
ops:
  - {name: ge, op: ge, args: [a, b]}
  - {name: lt, op: lt, args: [a, 0.5]}
  - {name: le, op: le, args: [b, a]}
  - {name: ra, op: relu, args: [a]}
  - {name: eq, op: eq, args: [ra, 0]}
  - {name: s1, op: mul, args: [lt, 2]}
  - {name: s2, op: mul, args: [le, 4]}
  - {name: s3, op: mul, args: [eq, 8]}
  - {name: t1, op: add, args: [ge, s1]}
  - {name: t2, op: add, args: [t1, s2]}
  - {name: y, op: add, args: [t2, s3]}
outputs: [y])"},
      {"gelu_backward_erf", R"(
inputs: [{name: x, shape: [24, 50]}, {name: dy, shape: [24, 50]}]
ops:
  - {name: xs, op: mul, args: [x, 0.7071067811865476]}
  - {name: e, op: erf, args: [xs]}
  - {name: cdf, op: add, args: [e, 1]}
  - {name: half, op: mul, args: [cdf, 0.5]}
  - {name: x2, op: square, args: [x]}
  - {name: nx2, op: mul, args: [x2, -0.5]}
  - {name: ex, op: exp, args: [nx2]}
  - {name: pdf, op: mul, args: [ex, 0.3989422804014327]}
  - {name: xpdf, op: mul, args: [x, pdf]}
  - {name: d, op: add, args: [half, xpdf]}
  - {name: dx, op: mul, args: [dy, d]}
outputs: [dx])"},
      {"linear_relu_transpose", R"(
inputs: [{name: x, shape: [32, 16]}, {name: w, shape: [24, 16]}]
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: r, op: relu, args: [h]}
  - {name: t, op: transpose, args: [r], dims: [0, 1]}
outputs: [t])"},
      // Transposes stored by the epilogue: a square bf16 matmul's (not TMA-stored:
      // the shapes match, the coordinates do not); a transposed value a later
      // kernel reads back (a scale of it after a row reduction); a batched matmul
      // transposed across its batch dim. Not: an output kept and transposed.
      {"matmul_square_transposed_bf16", R"(
precision: bf16
inputs: [{name: a, shape: [128, 72]}, {name: b, shape: [72, 128]}, {name: c, shape: [128]}]
ops:
  - {name: h, op: matmul, args: [a, b]}
  - {name: g, op: add, args: [h, c]}
  - {name: s, op: sigmoid, args: [g]}
  - {name: t, op: transpose, args: [s], dims: [0, 1]}
outputs: [t])"},
      {"linear_output_and_transpose", R"(
inputs: [{name: x, shape: [40, 16]}, {name: w, shape: [24, 16]}]
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: r, op: relu, args: [h]}
  - {name: t, op: transpose, args: [r], dims: [0, 1]}
outputs: [r, t])"},
      {"linear_transpose_then_row_sum", R"(
inputs: [{name: x, shape: [48, 40]}, {name: w, shape: [33, 40]}]
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: e, op: tanh, args: [h]}
  - {name: t, op: transpose, args: [e], dims: [1, 0]}
  - {name: r, op: sum, args: [t], dims: [1], keepdim: true}
  - {name: y, op: mul, args: [t, r]}
outputs: [y])"},
      {"batched_matmul_transpose_batch", R"(
inputs: [{name: a, shape: [3, 20, 12]}, {name: b, shape: [3, 12, 17]}]
ops:
  - {name: h, op: matmul, args: [a, b]}
  - {name: r, op: relu, args: [h]}
  - {name: t, op: transpose, args: [r], dims: [0, 2]}
outputs: [t])"},
      {"linear_plus_transposed_input", R"(
inputs: [{name: x, shape: [40, 16]}, {name: w, shape: [40, 16]}, {name: c, shape: [40, 40]}]
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: ct, op: transpose, args: [c], dims: [1, 0]}
  - {name: y, op: add, args: [h, ct]}
outputs: [y])"},
      {"transpose_3d_then_sum", R"(
inputs: [{name: x, shape: [3, 7, 20]}]
ops:
  - {name: c, op: clamp, args: [x], min: -5, max: 5}
  - {name: e, op: exp, args: [c]}
  - {name: t, op: transpose, args: [e], dims: [0, 2]}
  - {name: s, op: sum, args: [t], dims: [1]}
outputs: [s, t])"},
      {"reshape_general", R"(
inputs: [{name: x, shape: [6, 8]}, {name: w, shape: [12]}]
ops:
  - {name: r, op: relu, args: [x]}
  - {name: v, op: reshape, args: [r], shape: [4, 12]}
  - {name: y, op: mul, args: [v, w]}
outputs: [y])"},
      {"reshape_as_output", R"(
inputs: [{name: x, shape: [9, 30]}]
ops:
  - {name: s, op: sum, args: [x], dims: [0]}
  - {name: r, op: reshape, args: [s], shape: [1, 5, 6]}
outputs: [r, s])"},
      {"reshape_of_leaf_as_output", R"(
inputs: [{name: x, shape: [6, 20]}]
ops:
  - {name: r, op: relu, args: [x]}
  - {name: v, op: reshape, args: [r], shape: [4, 30]}
  - {name: v2, op: reshape, args: [v], shape: [120]}
outputs: [v2, v])"},
      {"reshape_input_as_output", R"(
inputs: [{name: x, shape: [6, 20]}]
ops:
  - {name: v, op: reshape, args: [x], shape: [120]}
  - {name: s, op: sum, args: [x], dims: [1]}
outputs: [v, s])"},
      {"linear_sum_flattened", R"(
inputs: [{name: x, shape: [24, 16]}, {name: w, shape: [300, 16]}]
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}
  - {name: f, op: reshape, args: [s], shape: [24]}
  - {name: g, op: gelu, args: [h]}
  - {name: gf, op: reshape, args: [g], shape: [7200]}
outputs: [f, gf])"},
      {"conv_pool_flattened", R"(
inputs: [{name: x, shape: [2, 4, 10, 10]}, {name: w, shape: [8, 4, 3, 3]}]
ops:
  - {name: c, op: conv2d, args: [x, w], padding: 1}
  - {name: r, op: relu, args: [c]}
  - {name: p, op: global_avg_pool, args: [r]}
  - {name: f, op: reshape, args: [p], shape: [2, 8]}
outputs: [f])"},
      {"reshape_input_then_reduce", R"(
inputs: [{name: x, shape: [12, 10]}]
ops:
  - {name: r, op: reshape, args: [x], shape: [60, 2]}
  - {name: m, op: max, args: [r], dims: [1]}
  - {name: t, op: reshape, args: [x], shape: [3, 40]}
  - {name: n, op: neg, args: [t]}
outputs: [m, n])"},
      {"expand_input_to_rank3", R"(
inputs: [{name: w, shape: [20]}, {name: x, shape: [2, 3, 20]}]
ops:
  - {name: e, op: expand, args: [w], shape: [2, 3, 20]}
  - {name: y, op: add, args: [e, x]}
  - {name: e2, op: expand, args: [x], shape: [4, 2, 3, 20]}
  - {name: z, op: tanh, args: [e2]}
outputs: [y, e, z])"},
      {"squeeze_reshape_of_leaf", R"(
inputs: [{name: a, shape: [30]}, {name: b, shape: [30, 9]}]
ops:
  - {name: r, op: relu, args: [a]}
  - {name: c, op: reshape, args: [r], shape: [30, 1]}
  - {name: y, op: mul, args: [c, b]}
outputs: [y])"},
      {"transpose_after_keepdim_sum", R"(
inputs: [{name: x, shape: [2, 5, 11]}, {name: z, shape: [2, 7, 5]}]
ops:
  - {name: s, op: sum, args: [x], dims: [2], keepdim: true}
  - {name: t, op: transpose, args: [s], dims: [1, 2]}
  - {name: y, op: mul, args: [t, z]}
outputs: [y])"},
      {"log_softmax_of_transpose", R"(
inputs: [{name: x, shape: [9, 21]}]
ops:
  - {name: t, op: transpose, args: [x], dims: [0, 1]}
  - {name: y, op: log_softmax, args: [t], dim: 1}
outputs: [y])"},
      {"relu_backward_bf16", R"(
precision: bf16
inputs: [{name: dy, shape: [16, 40]}, {name: z, shape: [16, 40]}]
ops:
  - {name: mask, op: ge, args: [z, 0]}
  - {name: dz, op: mul, args: [dy, mask]}
  - {name: db, op: sum, args: [dz], dims: [0]}
  - {name: dzt, op: transpose, args: [dz], dims: [0, 1]}
outputs: [dz, db, dzt])"},
      {"linear_minus_expanded_row_sum", R"(
inputs: [{name: x, shape: [20, 16]}, {name: w, shape: [300, 16]}]
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: s, op: sum, args: [h], dims: [1], keepdim: true}
  - {name: e, op: expand, args: [s], shape: [20, 300]}
  - {name: y, op: sub, args: [h, e]}
outputs: [y])"},
      {"column_reductions", R"(
inputs: [{name: x, shape: [48, 20, 96]}, {name: dz, shape: [300, 1100]}]
ops:
  - {name: s, op: sum, args: [x], dims: [0]}
  - {name: m, op: max, args: [x], dims: [1], keepdim: true}
  - {name: a, op: mean, args: [x], dims: [0, 1]}
  - {name: n, op: min, args: [x], dims: [0]}
  - {name: db, op: sum, args: [dz], dims: [0]}
  - {name: l, op: logsumexp, args: [x], dims: [0]}
outputs: [s, m, a, n, db, l])"},
      {"transpose_twice_and_scalar_expand", R"(
inputs: [{name: x, shape: [6, 10]}]
ops:
  - {name: t, op: transpose, args: [x], dims: [0, 1]}
  - {name: s, op: sigmoid, args: [t]}
  - {name: u, op: transpose, args: [s], dims: [0, 1]}
  - {name: c, op: expand, args: [2.5], shape: [6, 10]}
  - {name: y, op: mul, args: [u, c]}
outputs: [y])"},
      {"flip_transposed_weight", R"(
inputs: [{name: w, shape: [6, 4, 3, 5]}]
ops:
  - {name: t, op: transpose, args: [w], dims: [0, 1]}
  - {name: f, op: flip, args: [t], dims: [2, -1]}
  - {name: y, op: mul, args: [f, 2]}
  - {name: g, op: flip, args: [w], dims: [0]}
outputs: [y, g])"},
      {"im2col_strided_padded", R"(
inputs: [{name: x, shape: [2, 3, 9, 11]}]
ops:
  - {name: c, op: im2col, args: [x], kernel_size: 3, stride: 2, padding: 1}
  - {name: d, op: im2col, args: [x], kernel_size: [2, 3], dilation: [2, 1], padding: [0, 2]}
  - {name: r, op: relu, args: [d]}
outputs: [c, r])"},
      {"max_pool2d_backward_ties", R"(
inputs: [{name: x, shape: [2, 3, 10, 9]}, {name: dy, shape: [2, 3, 5, 5]}, {name: dz, shape: [2, 3, 5, 4]},
         {name: dt, shape: [2, 3, 3, 3]}, {name: dc, shape: [2, 3, 3, 3]}]
ops:
  - {name: u, op: sub, args: [x, 0.6]}
  - {name: r, op: relu, args: [u]}
  - {name: g, op: max_pool2d_backward, args: [r, dy], kernel_size: 3, stride: 2, padding: 1}
  - {name: h, op: max_pool2d_backward, args: [x, dz], kernel_size: [2, 3], stride: [2, 2], dilation: [2, 1], ceil_mode: true}
  - {name: y, op: mul, args: [h, 3]}
  - {name: t, op: max_pool2d_backward, args: [r, dt], kernel_size: 3}
  - {name: c, op: max_pool2d_backward, args: [r, dc], kernel_size: 4, ceil_mode: true}
  - {name: ct, op: tanh, args: [c]}
outputs: [g, y, t, ct])"},
      {"insert_zeros", R"(
inputs: [{name: x, shape: [2, 3, 4, 5]}]
ops:
  - {name: s, op: insert_zeros, args: [x], stride: [2, 3], extra: [1, 0]}
  - {name: t, op: insert_zeros, args: [x], stride: 1, extra: [0, 2]}
  - {name: y, op: add, args: [t, 1]}
  - {name: c, op: insert_zeros, args: [x], stride: [2, 3], extra: [1, 0], crop: [2, 1]}
  - {name: k, op: insert_zeros, args: [x], stride: 1, crop: [1, 2]}
  - {name: kt, op: tanh, args: [k]}
outputs: [s, y, c, kt])"},
      {"avg_pool2d_backward", R"(
inputs: [{name: dy, shape: [2, 3, 5, 5]}, {name: dz, shape: [2, 3, 3, 3]}]
ops:
  - {name: g, op: avg_pool2d_backward, args: [dy], input_shape: [2, 3, 10, 9], kernel_size: 3, stride: 2, padding: 1,
     count_include_pad: false}
  - {name: h, op: avg_pool2d_backward, args: [dz], input_shape: [2, 3, 7, 8], kernel_size: 3, stride: 3,
     padding: 1, ceil_mode: true}
outputs: [g, h])"},
      // the adjoints (double backward): col2im strided, padded and dilated; max_pool2d_double_backward with ties
      // (relu zeros whole windows), overlapping and ceil-mode windows; insert_zeros_backward with a crop
      {"im2col_backward", R"(
inputs: [{name: c, shape: [27, 60]}, {name: d, shape: [18, 182]}]
ops:
  - {name: x, op: im2col_backward, args: [c], input_shape: [2, 3, 9, 11], kernel_size: 3, stride: 2, padding: 1}
  - {name: y, op: im2col_backward, args: [d], input_shape: [2, 3, 9, 11], kernel_size: [2, 3], dilation: [2, 1],
     padding: [0, 2]}
  - {name: r, op: relu, args: [y]}
outputs: [x, r])"},
      {"max_pool2d_double_backward_ties", R"(
inputs: [{name: x, shape: [2, 3, 10, 9]}, {name: g, shape: [2, 3, 10, 9]}]
ops:
  - {name: u, op: sub, args: [x, 0.6]}
  - {name: r, op: relu, args: [u]}
  - {name: a, op: max_pool2d_double_backward, args: [r, g], kernel_size: 3, stride: 2, padding: 1}
  - {name: b, op: max_pool2d_double_backward, args: [x, g], kernel_size: [2, 3], stride: [2, 2], dilation: [2, 1],
     ceil_mode: true}
  - {name: t, op: max_pool2d_double_backward, args: [r, g], kernel_size: 3}
  - {name: tt, op: tanh, args: [t]}
outputs: [a, b, tt])"},
      {"insert_zeros_backward", R"(
inputs: [{name: s, shape: [2, 3, 8, 13]}, {name: c, shape: [2, 3, 4, 11]}, {name: k, shape: [2, 3, 2, 1]}]
ops:
  - {name: a, op: insert_zeros_backward, args: [s], stride: [2, 3], extra: [1, 0]}
  - {name: b, op: insert_zeros_backward, args: [c], stride: [2, 3], extra: [1, 0], crop: [2, 1]}
  - {name: d, op: insert_zeros_backward, args: [k], stride: 1, crop: [1, 2]}
  - {name: y, op: add, args: [b, 1]}
outputs: [a, y, d])"},
      // Row, pool and gather kernels computing a leaf expression where they read it (no kernel writes it out).
      {"row_and_pool_kernels_compute_leaf_operands", R"(
inputs: [{name: z, shape: [2, 3, 9, 8]}, {name: bias, shape: [3, 1, 1]}, {name: gamma, shape: [3]}]
ops:
  - {name: t, op: tanh, args: [z]}
  - {name: pre, op: add, args: [t, bias]}
  - {name: l, op: logsumexp, args: [pre], dims: [3]}
  - {name: m, op: max, args: [pre], dims: [1], keepdim: true}
  - {name: gp, op: global_avg_pool, args: [pre]}
  - {name: mp, op: max_pool2d, args: [pre], kernel_size: 3, stride: 2, padding: 1}
  - {name: ap, op: avg_pool1d, args: [pre], kernel_size: 3, padding: 1, count_include_pad: false}
  - {name: s, op: softmax, args: [pre], dim: 2}
  - {name: n, op: group_norm, args: [pre, gamma], num_groups: 3}
  - {name: y, op: mul, args: [s, n]}
outputs: [l, m, gp, mp, ap, y])"},
      {"gather_kernels_compute_leaf_operands", R"(
inputs: [{name: z, shape: [2, 3, 9, 8]}, {name: bias, shape: [3, 1, 1]}, {name: g, shape: [2, 3, 2, 2]},
         {name: g3, shape: [2, 3, 5, 4]}, {name: cols, shape: [27, 20]}]
ops:
  - {name: t, op: tanh, args: [z]}
  - {name: s, op: mul, args: [t, 2.0]}
  - {name: pre, op: add, args: [s, bias]}
  - {name: d, op: max_pool2d_backward, args: [pre, g], kernel_size: 4}
  - {name: d3, op: max_pool2d_backward, args: [pre, g3], kernel_size: 3, stride: 2, padding: 1}
  - {name: gs, op: sigmoid, args: [g3]}
  - {name: a4, op: avg_pool2d_backward, args: [gs], input_shape: [2, 3, 9, 8], kernel_size: 3, stride: 2, padding: 1}
  - {name: f, op: flip, args: [pre], dims: [2, 3]}
  - {name: c, op: im2col, args: [pre], kernel_size: 3, stride: 2}
  - {name: iz, op: insert_zeros, args: [pre], stride: 2, extra: [1, 1]}
  - {name: e, op: exp, args: [cols]}
  - {name: ci, op: im2col_backward, args: [e], input_shape: [1, 3, 9, 8], kernel_size: 3, stride: 2, padding: 1}
  - {name: dd, op: max_pool2d_double_backward, args: [pre, s], kernel_size: 3, stride: 2, padding: 1}
  - {name: izb, op: insert_zeros_backward, args: [t], stride: 2, extra: [0, 1]}
outputs: [d, d3, a4, f, c, iz, ci, dd, izb])"},
  };
  return cases;
}

// A random pointwise program: inputs, elementwise ops (comparisons and erf
// among them), expand / reshape / transpose, reductions and softmax, several
// outputs; no anchor. Shapes are small and ragged.
class RandomProgramBuilder {
 public:
  explicit RandomProgramBuilder(uint64_t seed) : rng_(seed), seed_(seed) {}

  Expected<Graph> build() {
    g_.name = "program_" + std::to_string(seed_);
    const int p = static_cast<int>(rng_.range(0, 9));
    g_.precision = p < 7 ? Precision::FP32 : p == 7 ? Precision::BF16 : p == 8 ? Precision::F16 : Precision::TF32;
    Shape s;
    const int rank = static_cast<int>(rng_.range(1, 3));
    for (int d = 0; d < rank; ++d) s.push_back(rng_.pick<int64_t>({1, 2, 3, 7, 16, 33, 64}));
    std::vector<ValueId> avail = {input(s)};
    const int steps = static_cast<int>(rng_.range(2, 9));
    for (int i = 0; i < steps; ++i) avail.push_back(step(avail));
    output(avail.back());
    for (size_t k = 1; k + 1 < avail.size(); ++k)
      if (rng_.chance(0.2)) output(avail[k]);
    std::vector<int> uses(g_.nodes.size(), 0);
    for (const Node& n : g_.nodes)
      for (ValueId o : n.operands) ++uses[static_cast<size_t>(o)];
    for (const Output& o : g_.outputs) ++uses[static_cast<size_t>(o.value)];
    for (size_t v = 0; v < g_.nodes.size(); ++v)
      if (!uses[v] && g_.nodes[v].op != OpKind::Input && g_.nodes[v].op != OpKind::Constant)
        output(static_cast<ValueId>(v));
    if (Status st = prepare_graph(g_); !st) return st.error();
    return g_;
  }

 private:
  ChainRng rng_;
  uint64_t seed_;
  Graph g_;
  int inputs_ = 0;

  Shape shape(ValueId v) const { return shapes_.at(static_cast<size_t>(v)); }
  std::vector<Shape> shapes_;  // by node, tracked here (prepare_graph infers the real ones at the end)

  ValueId add(Node n, Shape s) {
    shapes_.resize(g_.nodes.size());
    shapes_.push_back(std::move(s));
    return g_.add(std::move(n));
  }
  ValueId input(const Shape& s) {
    Node n;
    n.op = OpKind::Input;
    n.type = {rng_.chance(0.8) ? anchor_dtype(g_.precision) : DType::F32, s};
    n.name = "in" + std::to_string(inputs_++);
    return add(std::move(n), s);
  }
  ValueId constant(double v) {
    Node n;
    n.op = OpKind::Constant;
    n.attrs["value"] = v;
    return add(std::move(n), {});
  }
  ValueId op(OpKind k, std::vector<ValueId> operands, Shape out, AttrMap attrs = {}) {
    Node n;
    n.op = k;
    n.operands = std::move(operands);
    n.attrs = std::move(attrs);
    return add(std::move(n), std::move(out));
  }
  void output(ValueId v) {
    for (const Output& o : g_.outputs)
      if (o.value == v) return;
    g_.outputs.push_back({"y" + std::to_string(g_.outputs.size()), v, {}});
  }

  // A shape that broadcasts into `s`.
  Shape narrower(const Shape& s) {
    Shape out = s;
    for (int64_t& d : out)
      if (rng_.chance(0.3)) d = 1;
    while (!out.empty() && rng_.chance(0.25)) out.erase(out.begin());
    return out;
  }

  ValueId step(const std::vector<ValueId>& avail) {
    const ValueId x = rng_.chance(0.6) ? avail.back() : rng_.pick(avail);
    const Shape s = shape(x);  // a copy: adding nodes grows shapes_
    const int r = static_cast<int>(s.size());
    const int kind = static_cast<int>(rng_.range(0, 99));
    if (kind < 20) {  // unary (not gelu: 1 + erf cancels where a reduction picked a tail value)
      const OpKind k = rng_.pick<OpKind>({OpKind::Relu, OpKind::Erf, OpKind::Tanh, OpKind::Sigmoid, OpKind::Neg,
                                          OpKind::Silu, OpKind::Abs, OpKind::Softplus});
      return op(k, {x}, s);
    }
    if (kind < 42) {  // binary, comparisons included
      const OpKind k = rng_.pick<OpKind>({OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Maximum, OpKind::Gt,
                                          OpKind::Ge, OpKind::Lt, OpKind::Le, OpKind::Eq});
      ValueId y;
      const int which = static_cast<int>(rng_.range(0, 2));
      if (which == 0) {
        y = constant(k == OpKind::Eq ? 0.0 : rng_.real(-1, 1));
      } else if (which == 1) {
        y = input(narrower(s));
      } else {
        y = -1;
        for (ValueId v : avail)
          if (shape(v) == s && v != x) y = v;
        if (y < 0) y = input(s);
      }
      if (k == OpKind::Eq && which != 0) y = constant(0.0);  // equality of random floats: compare relu(x) with 0
      const ValueId a = k == OpKind::Eq ? op(OpKind::Relu, {x}, s) : x;
      return rng_.chance(0.5) ? op(k, {a, y}, s) : op(k, {y, a}, s);
    }
    if (kind < 54 && r >= 2) {  // transpose
      const int64_t d0 = rng_.range(0, r - 1), d1 = rng_.range(0, r - 1);
      Shape out = s;
      std::swap(out[static_cast<size_t>(d0)], out[static_cast<size_t>(d1)]);
      AttrMap at;
      at["dims"] = std::vector<int64_t>{d0, d1};
      return op(OpKind::Transpose, {x}, out, at);
    }
    if (kind < 62) {  // expand: stretch size-1 dims, maybe a new leading dim
      Shape out = s;
      for (int64_t& d : out)
        if (d == 1) d = rng_.pick<int64_t>({1, 4, 9});
      if (out.size() < 4 && rng_.chance(0.4)) out.insert(out.begin(), rng_.range(2, 3));
      AttrMap at;
      at["shape"] = out;
      return op(OpKind::Expand, {x}, out, at);
    }
    if (kind < 72) {  // reshape: size-1 dims moved, or the last two dims merged / the last split
      Shape out = s;
      const int how = static_cast<int>(rng_.range(0, 2));
      if (how == 0) {
        out.insert(out.begin() + rng_.range(0, r), 1);
      } else if (how == 1 && r >= 2) {
        const int64_t last = out.back();
        out.pop_back();
        out.back() *= last;
      } else {
        const int64_t last = out.empty() ? 1 : out.back();
        const int64_t f = last % 2 == 0 ? 2 : last % 3 == 0 ? 3 : 1;
        if (out.empty()) out.push_back(1);
        out.back() = last / f;
        out.push_back(f);
      }
      AttrMap at;
      at["shape"] = out;
      return op(OpKind::Reshape, {x}, out, at);
    }
    if (kind < 90 && r >= 1) {  // reduction
      const OpKind k = rng_.pick<OpKind>({OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::LogSumExp});
      std::vector<int64_t> dims;
      for (int d = 0; d < r; ++d)
        if (rng_.chance(0.5)) dims.push_back(d);
      if (dims.empty()) dims.push_back(rng_.range(0, r - 1));
      const bool keep = rng_.chance(0.5);
      Shape out;
      for (int d = 0; d < r; ++d) {
        const bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
        if (!red) out.push_back(s[static_cast<size_t>(d)]);
        else if (keep) out.push_back(1);
      }
      AttrMap at;
      at["dims"] = dims;
      at["keepdim"] = keep;
      const ValueId red = op(k, {x}, out, at);
      if (keep && rng_.chance(0.6)) {  // x - expand(reduction): the backward's broadcast back
        AttrMap e;
        e["shape"] = s;
        // x - mean(x) would make later sums cancel to ~0 (no fp32 result matches fp64 there): mul
        const bool centered = k == OpKind::Sum || k == OpKind::Mean;
        return op(centered ? OpKind::Mul : OpKind::Sub, {x, op(OpKind::Expand, {red}, s, e)}, s);
      }
      return red;
    }
    if (r >= 1) {
      AttrMap at;
      at["dim"] = rng_.range(0, r - 1);
      return op(rng_.chance(0.5) ? OpKind::Softmax : OpKind::LogSoftmax, {x}, s, at);
    }
    return op(OpKind::Sigmoid, {x}, s);
  }
};

inline Expected<Graph> random_program(uint64_t seed) {
  Error last;
  for (uint64_t attempt = 0; attempt < 100; ++attempt) {
    Expected<Graph> g = RandomProgramBuilder(seed * 1000 + attempt).build();
    if (g) return g;
    last = g.error();
  }
  return last;
}

}  // namespace fusejit::testing
