// The reference's per-node geometry, computed once from a prepared Graph:
// broadcast strides, reduction and pooling windows, anchor dimensions.
// Both the dense and the sampled evaluator read it (see eval_node.h).
#pragma once

#include <cstdint>
#include <vector>

#include "fusejit/error.h"
#include "fusejit/ir.h"
#include "fusejit/reference.h"

namespace fusejit::ref {

// Operand `k` of a broadcasting op: how an output flat index maps to it.
struct BroadcastMap {
  bool identity = true;  // same shape as the output
  bool scalar = false;   // one element
  std::vector<int64_t> strides;  // aligned to the output dims; 0 on stretched dims
};

struct ReductionPlan {
  std::vector<int64_t> kept_extent, kept_stride;  // output dims -> input offset (innermost last)
  std::vector<int64_t> red_extent, red_stride;    // the reduced dims (innermost last)
  int64_t count = 1;                              // elements reduced per output
};

struct NormalizePlan {
  int64_t dim_size = 1, inner = 1;  // x viewed as [outer, dim_size, inner]
};

// group/instance/layer norm: x viewed as rows of `len` contiguous elements
// (one per sample and group), the affine index of flat element i being
// (i % (groups * len)) / affine_div. batch_norm: channel (i / inner) % channels.
struct NormPlan {
  int64_t len = 1, groups = 1, affine_div = 1;
  int64_t channels = 1, inner = 1;
  double eps = 1e-5;
  ValueId weight = -1, bias = -1, mean = -1, var = -1;
};

// 2-D pooling over the last two dims; 1-D pooling uses only the w fields (h = 1).
struct PoolPlan {
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool count_include_pad = true;
  int64_t channels = 1;               // im2col: x's C
  std::vector<int64_t> flip_dims;     // flip: the reversed dims
};

// out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]; linear is a = x, b = w^T.
struct AnchorPlan {
  ValueId x = -1, w = -1, bias = -1;
  // linear / matmul
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> batch_extent, a_batch_stride, b_batch_stride;  // matmul batch dims
  // conv2d: x [batch, c, h, w], w [oc, c / groups, kh, kw]
  int64_t batch = 1, c = 1, h = 1, w_in = 1, oc = 1, oh = 1, ow = 1, kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

struct NodePlan {
  OpKind op = OpKind::Input;
  OpCategory category = OpCategory::Leaf;
  std::vector<ValueId> operands;
  std::vector<int64_t> out_shape;
  int64_t numel = 0;
  double constant = 0;      // Constant nodes
  double p0 = 0, p1 = 0;    // unary parameters (slope, alpha, beta/threshold, min/max)
  bool gelu_tanh = false;
  DType cast_to = DType::F32;  // cast
  BroadcastMap bcast[2];
  ReductionPlan reduction;
  NormalizePlan normalize;
  NormPlan norm;
  PoolPlan pool;
  AnchorPlan anchor;
};

// Plans for every node of a prepared graph (indexed by ValueId). Errors for an
// op the reference does not know or shapes that do not fit together.
Expected<std::vector<NodePlan>> build_plans(const Graph& g);

// Checks `inputs` against Graph::inputs() (count, types, sizes).
Status check_inputs(const Graph& g, const std::vector<HostTensor>& inputs);

}  // namespace fusejit::ref
