// Per-node geometry for the reference evaluators.
#include "reference/plan.h"

#include <algorithm>

namespace fusejit::ref {
namespace {

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

Error plan_error(const Graph& g, ValueId id, const std::string& msg) {
  return Error("reference: " + g.describe(id) + ": " + msg, g.node(id).loc);
}

std::optional<BroadcastMap> broadcast_map(const Shape& operand, const Shape& out) {
  BroadcastMap m;
  m.identity = operand == out;
  m.scalar = numel(operand) == 1;
  if (operand.size() > out.size()) return std::nullopt;
  std::vector<int64_t> st = contiguous_strides(operand);
  size_t lead = out.size() - operand.size();
  m.strides.assign(out.size(), 0);
  for (size_t d = lead; d < out.size(); ++d) {
    int64_t e = operand[d - lead];
    if (e != out[d] && e != 1) return std::nullopt;
    m.strides[d] = e == 1 ? 0 : st[d - lead];
  }
  return m;
}

Status plan_reduction(const Graph& g, ValueId id, NodePlan& p) {
  const Node& n = g.node(id);
  const Shape& in = g.node(n.operands[0]).type.shape;
  std::vector<int64_t> dims = n.attr_ints("dims");
  if (dims.empty())  // PyTorch: an empty dim list reduces everything
    for (size_t d = 0; d < in.size(); ++d) dims.push_back(static_cast<int64_t>(d));
  for (int64_t d : dims)
    if (d < 0 || d >= static_cast<int64_t>(in.size())) return plan_error(g, id, "dim " + std::to_string(d) + " out of range");
  std::vector<int64_t> st = contiguous_strides(in);
  ReductionPlan& r = p.reduction;
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    (reduced ? r.red_extent : r.kept_extent).push_back(in[d]);
    (reduced ? r.red_stride : r.kept_stride).push_back(st[d]);
  }
  r.count = numel(r.red_extent);
  if (numel(r.kept_extent) != p.numel) return plan_error(g, id, "output size does not match the reduction");
  return {};
}

Status plan_pool(const Graph& g, ValueId id, NodePlan& p) {
  const Node& n = g.node(id);
  const Shape& in = g.node(n.operands[0]).type.shape;
  const Shape& out = n.type.shape;
  PoolPlan& q = p.pool;
  bool two_d = n.op == OpKind::MaxPool2d || n.op == OpKind::AvgPool2d || n.op == OpKind::GlobalAvgPool;
  size_t need = two_d ? 2 : 1;
  if (in.size() < need || out.size() != in.size()) return plan_error(g, id, "unexpected pooling shapes");
  q.in_w = in.back();
  q.out_w = out.back();
  if (two_d) {
    q.in_h = in[in.size() - 2];
    q.out_h = out[out.size() - 2];
  }
  if (n.op == OpKind::GlobalAvgPool) {
    q.kh = q.in_h;
    q.kw = q.in_w;
  } else if (two_d) {
    auto pair = [&](const char* key, int64_t& a, int64_t& b) {
      const auto& v = n.attr_ints(key);
      a = v.at(0);
      b = v.at(1);
    };
    pair("kernel_size", q.kh, q.kw);
    pair("stride", q.sh, q.sw);
    pair("padding", q.ph, q.pw);
    if (n.attrs.count("dilation")) pair("dilation", q.dh, q.dw);
  } else {
    q.kw = n.attr_int("kernel_size");
    q.sw = n.attr_int("stride");
    q.pw = n.attr_int("padding");
  }
  if (n.attrs.count("count_include_pad")) q.count_include_pad = n.attr_bool("count_include_pad");
  return {};
}

// flip, im2col, insert_zeros, the pools' backward and their adjoints: the
// window fields as the forward pool (or im2col's conv) sees them, in = the
// pooled input, out = the pooled output (insert_zeros: in = x, out = spread).
Status plan_gather(const Graph& g, ValueId id, NodePlan& p) {
  const Node& n = g.node(id);
  PoolPlan& q = p.pool;
  if (n.op == OpKind::Flip) {
    q.flip_dims = n.attr_ints("dims");
    return {};
  }
  const bool adjoint = n.op == OpKind::InsertZerosBackward || n.op == OpKind::Im2colBackward;
  const Shape& operand = g.node(n.operands[0]).type.shape;
  if (n.op == OpKind::InsertZeros || n.op == OpKind::InsertZerosBackward) {  // in = x, out = the spread x
    const Shape& in = adjoint ? n.type.shape : operand;
    const Shape& out = adjoint ? operand : n.type.shape;
    q.sh = n.attr_ints("stride").at(0), q.sw = n.attr_ints("stride").at(1);
    q.in_h = in.at(2), q.in_w = in.at(3), q.out_h = out.at(2), q.out_w = out.at(3);
    if (n.attrs.count("crop")) q.ph = n.attr_ints("crop").at(0), q.pw = n.attr_ints("crop").at(1);  // the crop
    return {};
  }
  Shape in, out;
  if (n.op == OpKind::Im2col || n.op == OpKind::Im2colBackward) {  // in = x, cols = im2col(x)
    in = adjoint ? n.type.shape : operand;
    const Shape& cols = adjoint ? operand : n.type.shape;
    q.channels = in.at(1);
    const auto& k = n.attr_ints("kernel_size");
    const auto& s = n.attr_ints("stride");
    const auto& pd = n.attr_ints("padding");
    const auto& d = n.attr_ints("dilation");
    q.kh = k.at(0), q.kw = k.at(1), q.sh = s.at(0), q.sw = s.at(1), q.ph = pd.at(0), q.pw = pd.at(1);
    q.dh = d.at(0), q.dw = d.at(1);
    q.in_h = in.at(2), q.in_w = in.at(3);
    q.out_w = (q.in_w + 2 * q.pw - q.dw * (q.kw - 1) - 1) / q.sw + 1;
    q.out_h = cols.at(1) / in.at(0) / q.out_w;
    return {};
  }
  const bool is_max = n.op == OpKind::MaxPool2dBackward || n.op == OpKind::MaxPool2dDoubleBackward;
  if (n.op == OpKind::MaxPool2dDoubleBackward) {  // the pooled shape out of x's
    in = operand;
    out = n.type.shape;
  } else {
    in = n.type.shape;
    out = g.node(n.operands[is_max ? 1 : 0]).type.shape;
  }
  if (in.size() != 4 || out.size() != 4) return plan_error(g, id, "unexpected pooling shapes");
  const auto& k = n.attr_ints("kernel_size");
  const auto& s = n.attr_ints("stride");
  const auto& pd = n.attr_ints("padding");
  q.kh = k.at(0), q.kw = k.at(1), q.sh = s.at(0), q.sw = s.at(1), q.ph = pd.at(0), q.pw = pd.at(1);
  if (is_max) q.dh = n.attr_ints("dilation").at(0), q.dw = n.attr_ints("dilation").at(1);
  else q.count_include_pad = n.attr_bool("count_include_pad");
  q.in_h = in[2], q.in_w = in[3], q.out_h = out[2], q.out_w = out[3];
  return {};
}

Status plan_anchor(const Graph& g, ValueId id, NodePlan& p) {
  const Node& n = g.node(id);
  AnchorPlan& a = p.anchor;
  a.x = n.operands[0];
  a.w = n.operands[1];
  if (n.operands.size() > 2) a.bias = n.operands[2];
  Shape xs = g.node(a.x).type.shape, ws = g.node(a.w).type.shape;
  int64_t computed = 0;
  if (n.op == OpKind::Linear) {
    if (xs.empty() || ws.size() != 2) return plan_error(g, id, "linear needs x[...,K] and weight[N,K]");
    a.k = xs.back();
    a.n = ws[0];
    a.m = a.k ? numel(xs) / a.k : 0;
    computed = a.m * a.n;
  } else if (n.op == OpKind::Matmul) {
    if (xs.empty() || ws.empty()) return plan_error(g, id, "matmul of a scalar");
    if (xs.size() == 1) xs.insert(xs.begin(), 1);
    if (ws.size() == 1) ws.push_back(1);
    a.m = xs[xs.size() - 2];
    a.k = xs.back();
    a.n = ws.back();
    Shape xb(xs.begin(), xs.end() - 2), wb(ws.begin(), ws.end() - 2);
    auto batch = broadcast_shapes(xb, wb);
    if (!batch || ws[ws.size() - 2] != a.k) return plan_error(g, id, "matmul shapes do not fit");
    a.batch_extent = *batch;
    auto xm = broadcast_map(xb, *batch), wm = broadcast_map(wb, *batch);
    a.a_batch_stride = xm->strides;
    a.b_batch_stride = wm->strides;
    for (auto& s : a.a_batch_stride) s *= a.m * a.k;
    for (auto& s : a.b_batch_stride) s *= a.k * a.n;
    computed = numel(*batch) * a.m * a.n;
  } else if (n.op == OpKind::Conv2dWeightGrad) {  // x = the conv's input, w = grad, the gradient of its output
    const auto &k = n.attr_ints("kernel_size"), &st = n.attr_ints("stride"), &pad = n.attr_ints("padding"),
               &dil = n.attr_ints("dilation");
    if (xs.size() != 4 || ws.size() != 4 || ws[0] != xs[0])
      return plan_error(g, id, "conv2d_weight_grad needs NCHW x and grad");
    a.batch = xs[0], a.c = xs[1], a.h = xs[2], a.w_in = xs[3];
    a.oc = ws[1], a.oh = ws[2], a.ow = ws[3];
    a.kh = k.at(0), a.kw = k.at(1), a.sh = st.at(0), a.sw = st.at(1), a.ph = pad.at(0), a.pw = pad.at(1);
    a.dh = dil.at(0), a.dw = dil.at(1);
    a.groups = n.attr_int("groups");
    if (a.groups < 1 || a.c % a.groups || a.oc % a.groups)
      return plan_error(g, id, "conv2d_weight_grad channels do not fit the groups");
    computed = a.oc * (a.c / a.groups) * a.kh * a.kw;
  } else {  // conv2d
    if (xs.size() == 3) xs.insert(xs.begin(), 1);
    const Shape& out = n.type.shape;
    if (xs.size() != 4 || ws.size() != 4 || out.size() < 2) return plan_error(g, id, "conv2d needs NCHW x and OIHW weight");
    a.batch = xs[0];
    a.c = xs[1];
    a.h = xs[2];
    a.w_in = xs[3];
    a.oc = ws[0];
    a.kh = ws[2];
    a.kw = ws[3];
    a.oh = out[out.size() - 2];
    a.ow = out.back();
    const auto &st = n.attr_ints("stride"), &pad = n.attr_ints("padding"), &dil = n.attr_ints("dilation");
    a.sh = st.at(0);
    a.sw = st.at(1);
    a.ph = pad.at(0);
    a.pw = pad.at(1);
    a.dh = dil.at(0);
    a.dw = dil.at(1);
    a.groups = n.attr_int("groups");
    if (a.groups < 1 || a.c % a.groups || a.oc % a.groups || ws[1] * a.groups != a.c)
      return plan_error(g, id, "conv2d channels do not fit the groups");
    computed = a.batch * a.oc * a.oh * a.ow;
  }
  if (computed != p.numel) return plan_error(g, id, "output size does not match the operands");
  return {};
}

void plan_norm(const Node& n, const Shape& in, NodePlan& p) {
  NormPlan& q = p.norm;
  q.eps = n.attr_float("eps");
  const size_t k = n.operands.size();
  if (n.op == OpKind::BatchNorm) {
    q.mean = n.operands[1];
    q.var = n.operands[2];
    if (k > 3) q.weight = n.operands[3];
    if (k > 4) q.bias = n.operands[4];
  } else {
    if (k > 1) q.weight = n.operands[1];
    if (k > 2) q.bias = n.operands[2];
  }
  if (n.op == OpKind::LayerNorm) {
    q.len = numel(n.attr_ints("normalized_shape"));
    return;
  }
  q.channels = in[1];
  q.inner = numel(Shape(in.begin() + 2, in.end()));
  q.groups = n.op == OpKind::GroupNorm ? n.attr_int("num_groups") : q.channels;
  q.len = q.channels / q.groups * q.inner;
  q.affine_div = q.inner;
}

}  // namespace

Expected<std::vector<NodePlan>> build_plans(const Graph& g) {
  std::vector<NodePlan> plans(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ValueId id = static_cast<ValueId>(i);
    const Node& n = g.nodes[i];
    NodePlan& p = plans[i];
    p.op = n.op;
    p.category = op_category(n.op);
    p.operands = n.operands;
    p.out_shape = n.type.shape;
    p.numel = n.type.numel();
    for (ValueId o : n.operands)
      if (o < 0 || o >= id) return plan_error(g, id, "operand %" + std::to_string(o) + " is not an earlier value");
    switch (p.category) {
      case OpCategory::Leaf:
        if (n.op == OpKind::Constant) p.constant = n.constant_value();
        break;
      case OpCategory::Anchor:
        if (Status s = plan_anchor(g, id, p); !s) return s.error();
        break;
      case OpCategory::Unary:
        if (g.node(n.operands[0]).type.numel() != p.numel) return plan_error(g, id, "operand size differs");
        switch (n.op) {
          case OpKind::LeakyRelu: p.p0 = n.attr_float("negative_slope"); break;
          case OpKind::Elu: p.p0 = n.attr_float("alpha"); break;
          case OpKind::Softplus:
            p.p0 = n.attr_float("beta");
            p.p1 = n.attr_float("threshold");
            break;
          case OpKind::Hardtanh:
            p.p0 = n.attr_float("min_val");
            p.p1 = n.attr_float("max_val");
            break;
          case OpKind::Clamp:
            p.p0 = n.attr_float("min");
            p.p1 = n.attr_float("max");
            break;
          case OpKind::Gelu: p.gelu_tanh = n.attr_string("approximate") == "tanh"; break;
          case OpKind::Cast: p.cast_to = n.type.dtype; break;
          default: break;
        }
        break;
      case OpCategory::Binary:
        for (int k = 0; k < 2; ++k) {
          auto m = broadcast_map(g.node(n.operands[static_cast<size_t>(k)]).type.shape, p.out_shape);
          if (!m) return plan_error(g, id, "operand shape does not broadcast to the output");
          p.bcast[k] = std::move(*m);
        }
        break;
      case OpCategory::Reduction:
        if (Status s = plan_reduction(g, id, p); !s) return s.error();
        break;
      case OpCategory::Normalize: {
        const Shape& in = n.type.shape;
        int64_t dim = n.attr_int("dim");
        if (in.empty()) break;  // a scalar: dim_size 1
        if (dim < 0 || dim >= static_cast<int64_t>(in.size())) return plan_error(g, id, "dim out of range");
        p.normalize.dim_size = in[static_cast<size_t>(dim)];
        p.normalize.inner = numel(Shape(in.begin() + dim + 1, in.end()));
        break;
      }
      case OpCategory::Pool:
        if (Status s = plan_pool(g, id, p); !s) return s.error();
        break;
      case OpCategory::Norm: {
        const Shape& in = g.node(n.operands[0]).type.shape;
        if (n.op != OpKind::LayerNorm && in.size() < 2) return plan_error(g, id, "x needs a channel dim");
        plan_norm(n, in, p);
        break;
      }
      case OpCategory::Gather:
        if (Status s = plan_gather(g, id, p); !s) return s.error();
        break;
      case OpCategory::Layout: {
        const Shape& in = g.node(n.operands[0]).type.shape;
        if (n.op == OpKind::Reshape) {
          if (numel(in) != p.numel) return plan_error(g, id, "reshape changes the element count");
          break;  // flat index unchanged
        }
        if (n.op == OpKind::Expand) {
          auto m = broadcast_map(in, p.out_shape);
          if (!m) return plan_error(g, id, "operand shape does not expand to the output");
          p.bcast[0] = std::move(*m);
          break;
        }
        const auto& dims = n.attr_ints("dims");  // transpose: output dim d reads input dim perm(d)
        if (dims.size() != 2 || in.size() != p.out_shape.size()) return plan_error(g, id, "bad transpose");
        std::vector<int64_t> st = contiguous_strides(in);
        std::swap(st[static_cast<size_t>(dims[0])], st[static_cast<size_t>(dims[1])]);
        p.bcast[0].identity = false;
        p.bcast[0].scalar = false;
        p.bcast[0].strides = std::move(st);
        break;
      }
    }
  }
  return plans;
}

Status check_inputs(const Graph& g, const std::vector<HostTensor>& inputs) {
  std::vector<ValueId> ids = g.inputs();
  if (ids.size() != inputs.size())
    return Error("reference: the graph has " + std::to_string(ids.size()) + " inputs, got " +
                 std::to_string(inputs.size()) + " tensors");
  for (size_t j = 0; j < ids.size(); ++j) {
    const TensorType& want = g.node(ids[j]).type;
    if (inputs[j].type.shape != want.shape ||
        static_cast<int64_t>(inputs[j].data.size()) != want.numel())
      return Error("reference: input " + std::to_string(j) + " ('" + g.node(ids[j]).name + "') should be " +
                   want.str() + ", got " + inputs[j].type.str() + " with " + std::to_string(inputs[j].data.size()) +
                   " values");
  }
  return {};
}

}  // namespace fusejit::ref
