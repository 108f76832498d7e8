// Type and shape inference, one rule per op category.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "ir/passes.h"

namespace fusejit {
namespace {

std::string hw(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

// Largest element count of any value (as for spec inputs): sizes in bytes and
// index arithmetic downstream stay far from int64 overflow.
constexpr int64_t kMaxNumel = int64_t{1} << 48;

// PyTorch's pooling/conv output size; returns <= 0 when the window does not fit.
// In 128 bits: attributes may be near INT64_MAX. Clamped to INT64_MAX.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  using Wide = __int128;
  Wide span = Wide{in} + 2 * Wide{p} - Wide{d} * (k - 1) - 1;
  if (span < 0) return 0;
  Wide out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= Wide{in} + p) --out;  // last window must start inside input or left padding
  return out > INT64_MAX ? INT64_MAX : static_cast<int64_t>(out);
}

class Inference {
 public:
  explicit Inference(Graph& g) : g_(g) {}

  Status run() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (Status s = infer(static_cast<ValueId>(i)); !s) return s;
      if (Status s = check_size(static_cast<ValueId>(i)); !s) return s;
    }
    return {};
  }

 private:
  Graph& g_;

  const TensorType& in(ValueId id, int k) { return g_.node(g_.node(id).operands.at(static_cast<size_t>(k))).type; }
  Error err(ValueId id, const std::string& m) { return node_error(g_, id, m); }
  std::string operand(ValueId id, int k) {
    const auto& names = op_info(g_.node(id).op).operand_names;
    return "'" + names.at(static_cast<size_t>(k)) + "'";
  }

  // Rejects values of more than kMaxNumel elements (without overflowing).
  Status check_size(ValueId id) {
    int64_t count = 1;
    for (int64_t d : g_.node(id).type.shape) {
      if (d > kMaxNumel / count)
        return err(id, "the result " + shape_str(g_.node(id).type.shape) + " has more than 2^48 elements");
      count *= std::max<int64_t>(d, 1);  // dims < 1 are leaf()'s error
    }
    return {};
  }

  // The padded extent in + 2p must stay within kMaxNumel: with the window
  // fitting into it, this bounds every window offset (dilation * tap too).
  Status check_padding(ValueId id, int64_t in, int64_t p) {
    if (p <= (kMaxNumel - in) / 2) return {};
    return err(id, "padding " + std::to_string(p) + " is too large for an extent of " + std::to_string(in) +
                       " (the padded extent must be at most 2^48)");
  }

  Status infer(ValueId id) {
    Node& n = g_.node(id);
    switch (op_category(n.op)) {
      case OpCategory::Leaf: return leaf(id);
      case OpCategory::Anchor: return anchor(id);
      case OpCategory::Unary:
        n.type = in(id, 0);
        if (n.op == OpKind::Cast) n.type.dtype = parse_dtype(n.attr_string("dtype")).value_or(n.type.dtype);
        return {};
      case OpCategory::Binary: return binary(id);
      case OpCategory::Reduction: return reduction(id);
      case OpCategory::Normalize: return normalize(id);
      case OpCategory::Pool: return pool(id);
      case OpCategory::Norm: return norm(id);
      case OpCategory::Layout: return layout(id);
      case OpCategory::Gather: return gather(id);
    }
    return {};
  }

  Status leaf(ValueId id) {
    Node& n = g_.node(id);
    if (n.op == OpKind::Constant) {
      n.type = TensorType{DType::F32, {}};
      return {};
    }
    for (int64_t d : n.type.shape)
      if (d < 1) return err(id, "shape " + shape_str(n.type.shape) + " has a dim < 1");
    return {};
  }

  Status check_anchor_dtypes(ValueId id) {
    const Node& n = g_.node(id);
    DType want = anchor_dtype(g_.precision);
    for (size_t k = 0; k < n.operands.size(); ++k) {
      DType got = in(id, static_cast<int>(k)).dtype;
      if (got != want)
        return err(id, "operand " + operand(id, static_cast<int>(k)) + " is " + std::string(dtype_name(got)) +
                           " but precision " + std::string(precision_name(g_.precision)) + " needs " +
                           std::string(dtype_name(want)) + " operands");
    }
    return {};
  }

  Status anchor(ValueId id) {
    if (Status s = check_anchor_dtypes(id); !s) return s;
    Node& n = g_.node(id);
    if (n.op == OpKind::Linear) return linear(id);
    if (n.op == OpKind::Matmul) return matmul(id);
    if (n.op == OpKind::Conv2dWeightGrad) return conv2d_weight_grad(id);
    return conv2d(id);
  }

  Status linear(ValueId id) {
    Node& n = g_.node(id);
    const Shape& x = in(id, 0).shape;
    const Shape& w = in(id, 1).shape;
    if (x.empty()) return err(id, "input 'x' must have at least 1 dim, got " + shape_str(x));
    if (w.size() != 2) return err(id, "weight must be 2-D [N, K], got " + shape_str(w));
    if (x.back() != w[1])
      return err(id, "x " + shape_str(x) + " has K=" + std::to_string(x.back()) + " features but weight " +
                         shape_str(w) + " expects K=" + std::to_string(w[1]));
    if (n.operands.size() == 3 && in(id, 2).shape != Shape{w[0]})
      return err(id, "bias must be [" + std::to_string(w[0]) + "], got " + shape_str(in(id, 2).shape));
    Shape out(x.begin(), x.end() - 1);
    out.push_back(w[0]);
    n.type = {in(id, 0).dtype, out};
    return {};
  }

  Status matmul(ValueId id) {
    Node& n = g_.node(id);
    const Shape& a = in(id, 0).shape;
    const Shape& b = in(id, 1).shape;
    if (a.size() < 2 || b.size() < 2)
      return err(id, "operands must be at least 2-D, got " + shape_str(a) + " and " + shape_str(b));
    if (a.back() != b[b.size() - 2])
      return err(id, "inner dims differ: a " + shape_str(a) + " has K=" + std::to_string(a.back()) + ", b " +
                         shape_str(b) + " has K=" + std::to_string(b[b.size() - 2]));
    Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    auto batch = broadcast_shapes(ba, bb);
    if (!batch) return err(id, "batch dims " + shape_str(ba) + " and " + shape_str(bb) + " do not broadcast");
    Shape out = *batch;
    out.push_back(a[a.size() - 2]);
    out.push_back(b.back());
    n.type = {in(id, 0).dtype, out};
    return {};
  }

  Status conv2d(ValueId id) {
    Node& n = g_.node(id);
    const Shape& x = in(id, 0).shape;
    const Shape& w = in(id, 1).shape;
    if (x.size() != 4) return err(id, "input 'x' must be 4-D NCHW, got " + shape_str(x));
    if (w.size() != 4) return err(id, "weight must be 4-D [Cout, Cin/groups, kh, kw], got " + shape_str(w));
    int64_t groups = n.attr_int("groups");
    auto st = n.attr_ints("stride"), pad = n.attr_ints("padding"), dil = n.attr_ints("dilation");
    if (x[1] % groups || w[0] % groups)
      return err(id, "groups=" + std::to_string(groups) + " must divide Cin=" + std::to_string(x[1]) +
                         " and Cout=" + std::to_string(w[0]));
    if (w[1] != x[1] / groups)
      return err(id, "weight " + shape_str(w) + " expects " + std::to_string(w[1]) + " input channels per group but x " +
                         shape_str(x) + " has " + std::to_string(x[1] / groups) + " (Cin=" + std::to_string(x[1]) +
                         ", groups=" + std::to_string(groups) + ")");
    if (n.operands.size() == 3 && in(id, 2).shape != Shape{w[0]})
      return err(id, "bias must be [" + std::to_string(w[0]) + "], got " + shape_str(in(id, 2).shape));
    for (size_t i = 0; i < 2; ++i)
      if (Status s = check_padding(id, x[2 + i], pad[i]); !s) return s;
    int64_t oh = window_out(x[2], w[2], st[0], pad[0], dil[0], false);
    int64_t ow = window_out(x[3], w[3], st[1], pad[1], dil[1], false);
    if (oh < 1 || ow < 1)
      return err(id, "the " + hw(w[2], w[3]) + " kernel (dilation " + hw(dil[0], dil[1]) + ") does not fit the " +
                         hw(x[2], x[3]) + " input with padding " + hw(pad[0], pad[1]));
    n.type = {in(id, 0).dtype, {x[0], w[0], oh, ow}};
    return {};
  }

  // x [N, Cin, H, W], grad [N, Cout, Ho, Wo] (conv2d's output shape for x) -> [Cout, Cin/groups, kh, kw].
  Status conv2d_weight_grad(ValueId id) {
    Node& n = g_.node(id);
    const Shape& x = in(id, 0).shape;
    const Shape& dz = in(id, 1).shape;
    if (x.size() != 4) return err(id, "input 'x' must be 4-D NCHW, got " + shape_str(x));
    if (dz.size() != 4) return err(id, "input 'grad' must be 4-D [N, Cout, Ho, Wo], got " + shape_str(dz));
    const int64_t groups = n.attr_int("groups");
    auto k = n.attr_ints("kernel_size"), st = n.attr_ints("stride"), pad = n.attr_ints("padding"),
         dil = n.attr_ints("dilation");
    if (groups < 1 || x[1] % groups || dz[1] % groups)
      return err(id, "groups=" + std::to_string(groups) + " must divide Cin=" + std::to_string(x[1]) +
                         " and Cout=" + std::to_string(dz[1]));
    for (size_t i = 0; i < 2; ++i)
      if (Status s = check_padding(id, x[2 + i], pad[i]); !s) return s;
    const int64_t oh = window_out(x[2], k[0], st[0], pad[0], dil[0], false);
    const int64_t ow = window_out(x[3], k[1], st[1], pad[1], dil[1], false);
    if (oh < 1 || ow < 1)
      return err(id, "the " + hw(k[0], k[1]) + " kernel (dilation " + hw(dil[0], dil[1]) + ") does not fit the " +
                         hw(x[2], x[3]) + " input with padding " + hw(pad[0], pad[1]));
    if (dz[0] != x[0] || dz[2] != oh || dz[3] != ow)
      return err(id, "grad " + shape_str(dz) + " is not the shape of the conv's output for x " + shape_str(x) +
                         ": expected [" + std::to_string(x[0]) + ", Cout, " + std::to_string(oh) + ", " +
                         std::to_string(ow) + "]");
    n.type = {in(id, 0).dtype, {dz[1], x[1] / groups, k[0], k[1]}};
    return {};
  }

  Status binary(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& a = in(id, 0);
    const TensorType& b = in(id, 1);
    auto shape = broadcast_shapes(a.shape, b.shape);
    if (!shape)
      return err(id, "shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) +
                         " do not broadcast (PyTorch rules: dims align from the right; each pair must be equal or 1)");
    bool a_const = g_.node(n.operands[0]).op == OpKind::Constant;
    bool b_const = g_.node(n.operands[1]).op == OpKind::Constant;
    DType dt = a_const && !b_const ? b.dtype : (b_const && !a_const ? a.dtype : promote(a.dtype, b.dtype));
    n.type = {dt, *shape};
    return {};
  }

  // Normalizes a dim into [0, rank); false when out of range.
  static bool norm_dim(int64_t& d, int rank) {
    if (d < -rank || d >= rank) return false;
    if (d < 0) d += rank;
    return true;
  }

  // Node id's 'dims' for an input of type x: in range, each once; stored
  // back non-negative and sorted.
  Expected<std::vector<int64_t>> sorted_dims(ValueId id, const TensorType& x) {
    Node& n = g_.node(id);
    auto dims = n.attr_ints("dims");
    for (int64_t& d : dims)
      if (!norm_dim(d, x.rank()))
        return err(id, "dim " + std::to_string(d) + " is out of range for the " + std::to_string(x.rank()) +
                           "-D input " + shape_str(x.shape));
    std::sort(dims.begin(), dims.end());
    if (std::adjacent_find(dims.begin(), dims.end()) != dims.end())
      return err(id, "'dims' names a dim twice: " + attr_str(n.attrs.at("dims")));
    n.attrs["dims"] = dims;
    return dims;
  }

  Status reduction(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& x = in(id, 0);
    if (n.attr_ints("dims").empty()) return err(id, "'dims' must name at least one dim");
    Expected<std::vector<int64_t>> sorted = sorted_dims(id, x);
    if (!sorted) return sorted.error();
    const std::vector<int64_t>& dims = *sorted;
    bool keep = n.attr_bool("keepdim");
    Shape out;
    for (int d = 0; d < x.rank(); ++d) {
      bool reduced = std::binary_search(dims.begin(), dims.end(), d);
      if (!reduced) out.push_back(x.shape[static_cast<size_t>(d)]);
      else if (keep) out.push_back(1);
    }
    n.type = {x.dtype, out};
    return {};
  }

  Status normalize(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& x = in(id, 0);
    int64_t d = n.attr_int("dim");
    if (!norm_dim(d, x.rank()))
      return err(id, "dim " + std::to_string(d) + " is out of range for the " + std::to_string(x.rank()) +
                         "-D input " + shape_str(x.shape));
    n.attrs["dim"] = d;
    n.type = x;
    return {};
  }

  // expand: PyTorch's broadcast to `shape` (same rank or more; a dim of 1
  // stretches); reshape: same element count; transpose: two dims swapped.
  Status layout(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& x = in(id, 0);
    if (n.op == OpKind::Transpose) {
      auto dims = n.attr_ints("dims");
      if (dims.size() != 2) return err(id, "'dims' must name two dims, got " + attr_str(n.attrs.at("dims")));
      for (int64_t& d : dims)
        if (!norm_dim(d, x.rank()))
          return err(id, "dim " + std::to_string(d) + " is out of range for the " + std::to_string(x.rank()) +
                             "-D input " + shape_str(x.shape));
      if (dims[0] > dims[1]) std::swap(dims[0], dims[1]);
      n.attrs["dims"] = dims;
      Shape out = x.shape;
      std::swap(out[static_cast<size_t>(dims[0])], out[static_cast<size_t>(dims[1])]);
      n.type = {x.dtype, out};
      return {};
    }
    const Shape& shape = n.attr_ints("shape");
    for (int64_t d : shape)
      if (d < 1) return err(id, "'shape' " + shape_str(shape) + " has a dim < 1");
    if (Status s = check_shape_size(id, shape); !s) return s;
    if (n.op == OpKind::Reshape) {
      if (numel(shape) != x.numel())
        return err(id, "cannot reshape " + shape_str(x.shape) + " (" + std::to_string(x.numel()) + " elements) to " +
                           shape_str(shape) + " (" + std::to_string(numel(shape)) + ")");
    } else {
      auto b = broadcast_shapes(x.shape, shape);
      if (x.rank() > static_cast<int>(shape.size()) || !b || *b != shape)
        return err(id, "cannot expand " + shape_str(x.shape) + " to " + shape_str(shape) +
                           " (PyTorch rules: dims align from the right; each must equal the target or be 1)");
    }
    n.type = {x.dtype, shape};
    return {};
  }

  Status check_shape_size(ValueId id, const Shape& shape) {
    int64_t count = 1;
    for (int64_t d : shape) {
      if (d > kMaxNumel / count) return err(id, "'shape' " + shape_str(shape) + " has more than 2^48 elements");
      count *= d;
    }
    return {};
  }

  // group_norm / instance_norm / batch_norm: x [N, C, *] with per-channel
  // operands [C]; layer_norm: x [..., normalized_shape] with weight and bias
  // of normalized_shape. The result has x's type.
  Status norm(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& x = in(id, 0);
    const int min_rank = n.op == OpKind::InstanceNorm ? 3 : 2;
    Shape param;
    if (n.op == OpKind::LayerNorm) {
      param = n.attr_ints("normalized_shape");
      const bool fits = param.size() <= x.shape.size() && std::equal(param.begin(), param.end(), x.shape.end() -
                                                                     static_cast<std::ptrdiff_t>(param.size()));
      if (!fits)
        return err(id, "normalized_shape " + shape_str(param) + " does not match the trailing dims of x " +
                           shape_str(x.shape));
    } else {
      if (x.rank() < min_rank)
        return err(id, "input 'x' must be at least " + std::to_string(min_rank) + "-D [N, C" +
                           (min_rank == 3 ? ", L, ...]" : ", ...]") + ", got " + shape_str(x.shape));
      const int64_t c = x.shape[1];
      param = {c};
      if (n.op == OpKind::GroupNorm && c % n.attr_int("num_groups"))
        return err(id, "num_groups=" + std::to_string(n.attr_int("num_groups")) + " must divide the " +
                           std::to_string(c) + " channels of x " + shape_str(x.shape));
    }
    for (size_t k = 1; k < n.operands.size(); ++k) {
      const TensorType& t = in(id, static_cast<int>(k));
      if (t.shape != param)
        return err(id, "operand " + operand(id, static_cast<int>(k)) + " must be " + shape_str(param) +
                           (n.op == OpKind::LayerNorm ? " (normalized_shape)" : " (the channels, dim 1 of x)") +
                           ", got " + shape_str(t.shape));
    }
    n.type = x;
    return {};
  }

  Status pool(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& x = in(id, 0);
    if (n.op == OpKind::MaxPool1d || n.op == OpKind::AvgPool1d) return pool1d(id, x);
    if (x.rank() != 4) return err(id, "input must be 4-D NCHW, got " + shape_str(x.shape));
    if (n.op == OpKind::GlobalAvgPool) {
      n.type = {x.dtype, {x.shape[0], x.shape[1], 1, 1}};
      return {};
    }
    auto k = n.attr_ints("kernel_size"), s = n.attr_ints("stride"), p = n.attr_ints("padding");
    std::vector<int64_t> d = n.attrs.count("dilation") ? n.attr_ints("dilation") : std::vector<int64_t>{1, 1};
    bool ceil_mode = n.attr_bool("ceil_mode");
    for (int i = 0; i < 2; ++i)
      if (p[static_cast<size_t>(i)] > k[static_cast<size_t>(i)] / 2)
        return err(id, "padding " + hw(p[0], p[1]) + " must be at most half the kernel " + hw(k[0], k[1]));
    for (size_t i = 0; i < 2; ++i)
      if (Status st = check_padding(id, x.shape[2 + i], p[i]); !st) return st;
    int64_t oh = window_out(x.shape[2], k[0], s[0], p[0], d[0], ceil_mode);
    int64_t ow = window_out(x.shape[3], k[1], s[1], p[1], d[1], ceil_mode);
    if (oh < 1 || ow < 1) {
      std::string kern = k[0] == k[1] ? std::to_string(k[0]) : hw(k[0], k[1]);
      return err(id, "kernel " + kern + " is larger than the " + hw(x.shape[2], x.shape[3]) + " input" +
                         (p[0] || p[1] ? " with padding " + hw(p[0], p[1]) : std::string()));
    }
    n.type = {x.dtype, {x.shape[0], x.shape[1], oh, ow}};
    return {};
  }

  // The pooled size of a 4-D `in` under node id's window attributes (max_pool2d's rules).
  Expected<Shape> pooled_shape(ValueId id, const Shape& in) {
    const Node& n = g_.node(id);
    auto k = n.attr_ints("kernel_size"), s = n.attr_ints("stride"), p = n.attr_ints("padding");
    std::vector<int64_t> d = n.attrs.count("dilation") ? n.attr_ints("dilation") : std::vector<int64_t>{1, 1};
    for (int i = 0; i < 2; ++i)
      if (p[static_cast<size_t>(i)] > k[static_cast<size_t>(i)] / 2)
        return err(id, "padding " + hw(p[0], p[1]) + " must be at most half the kernel " + hw(k[0], k[1]));
    for (size_t i = 0; i < 2; ++i)
      if (Status st = check_padding(id, in[2 + i], p[i]); !st) return st.error();
    const bool ceil_mode = n.attrs.count("ceil_mode") && n.attr_bool("ceil_mode");
    int64_t oh = window_out(in[2], k[0], s[0], p[0], d[0], ceil_mode);
    int64_t ow = window_out(in[3], k[1], s[1], p[1], d[1], ceil_mode);
    if (oh < 1 || ow < 1) return err(id, "kernel " + hw(k[0], k[1]) + " is larger than the " + hw(in[2], in[3]) + " input");
    return Shape{in[0], in[1], oh, ow};
  }

  // A gather op's input_shape (or pooled x): 4-D, every dim >= 1, at most 2^48 elements.
  Status check_input_shape(ValueId id, const Shape& input, const std::string& what) {
    if (input.size() != 4) return err(id, "the " + what + " input must be 4-D NCHW, got " + shape_str(input));
    for (int64_t v : input)
      if (v < 1) return err(id, "'input_shape' " + shape_str(input) + " has a dim < 1");
    return check_shape_size(id, input);
  }

  // im2col's columns [C*kh*kw, N*Ho*Wo] of a 4-D `in` under node id's window attributes.
  Expected<Shape> im2col_shape(ValueId id, const Shape& in) {
    const Node& n = g_.node(id);
    auto k = n.attr_ints("kernel_size"), s = n.attr_ints("stride"), p = n.attr_ints("padding"),
         d = n.attr_ints("dilation");
    for (size_t i = 0; i < 2; ++i)
      if (Status st = check_padding(id, in[2 + i], p[i]); !st) return st.error();
    const int64_t oh = window_out(in[2], k[0], s[0], p[0], d[0], false);
    const int64_t ow = window_out(in[3], k[1], s[1], p[1], d[1], false);
    if (oh < 1 || ow < 1) return err(id, "kernel " + hw(k[0], k[1]) + " is larger than the " + hw(in[2], in[3]) + " input");
    const Shape out = {in[1] * k[0] * k[1], in[0] * oh * ow};
    if (Status st = check_shape_size(id, out); !st) return st.error();
    return out;
  }

  // insert_zeros and its backward: 'extra' and 'crop' are counts of rows / columns.
  Status spread_attrs_non_negative(ValueId id) {
    const Node& n = g_.node(id);
    for (const char* a : {"extra", "crop"}) {
      const auto& v = n.attr_ints(a);
      if (v[0] < 0 || v[1] < 0)
        return err(id, "'" + std::string(a) + "' must be non-negative, got " + attr_str(n.attrs.at(a)));
    }
    return {};
  }

  // insert_zeros_backward: the x whose insert_zeros (same stride, extra, crop) is shaped like grad.
  Status insert_zeros_backward(ValueId id, const TensorType& grad) {
    Node& n = g_.node(id);
    if (grad.rank() != 4) return err(id, "grad must be 4-D NCHW, got " + shape_str(grad.shape));
    const auto& s = n.attr_ints("stride");
    const auto& e = n.attr_ints("extra");
    const auto& c = n.attr_ints("crop");
    if (Status st = spread_attrs_non_negative(id); !st) return st;
    Shape out = grad.shape;
    for (size_t i = 0; i < 2; ++i) {
      if (e[i] > kMaxNumel || c[i] > kMaxNumel) return err(id, "'extra' or 'crop' is larger than 2^48");
      const int64_t spread = grad.shape[2 + i] - 1 - e[i] + 2 * c[i];  // (H - 1) * stride
      if (spread < 0 || spread % s[i] != 0) {
        const char* what = i == 0 ? " rows" : " columns";
        return err(id, "'grad' has " + std::to_string(grad.shape[2 + i]) + what + ": insert_zeros with stride " +
                           std::to_string(s[i]) + ", extra " + std::to_string(e[i]) + ", crop " +
                           std::to_string(c[i]) + " gives (H - 1) * " + std::to_string(s[i]) +
                           (1 + e[i] - 2 * c[i] < 0 ? " - " : " + ") + std::to_string(std::abs(1 + e[i] - 2 * c[i])) +
                           what + " for no integer H >= 1");
      }
      out[2 + i] = spread / s[i] + 1;
    }
    n.type = {grad.dtype, out};
    return {};
  }

  Status gather(ValueId id) {
    Node& n = g_.node(id);
    const TensorType& x = in(id, 0);
    if (n.op == OpKind::Flip) {
      if (Expected<std::vector<int64_t>> dims = sorted_dims(id, x); !dims) return dims.error();
      n.type = x;
      return {};
    }
    if (n.op == OpKind::Im2col) {
      if (x.rank() != 4) return err(id, "input must be 4-D NCHW, got " + shape_str(x.shape));
      Expected<Shape> out = im2col_shape(id, x.shape);
      if (!out) return out.error();
      n.type = {x.dtype, *out};
      return {};
    }
    if (n.op == OpKind::Im2colBackward) {  // grad must be im2col's result for an input_shape input
      const Shape input = n.attr_ints("input_shape");
      if (Status st = check_input_shape(id, input, "unfolded"); !st) return st;
      Expected<Shape> cols = im2col_shape(id, input);
      if (!cols) return cols.error();
      if (x.shape != *cols)
        return err(id, "'grad' is " + shape_str(x.shape) + " but im2col of " + shape_str(input) + " gives " +
                           shape_str(*cols));
      n.type = {x.dtype, input};
      return {};
    }
    if (n.op == OpKind::MaxPool2dDoubleBackward) {  // grad is shaped like x; the result like max_pool2d(x)
      if (x.rank() != 4) return err(id, "x must be 4-D NCHW, got " + shape_str(x.shape));
      const TensorType& grad = in(id, 1);
      if (grad.shape != x.shape)
        return err(id, "'grad' is " + shape_str(grad.shape) + " but x is " + shape_str(x.shape) +
                           " (grad is a gradient of x)");
      Expected<Shape> pooled = pooled_shape(id, x.shape);
      if (!pooled) return pooled.error();
      n.type = {grad.dtype, *pooled};
      return {};
    }
    if (n.op == OpKind::InsertZerosBackward) return insert_zeros_backward(id, x);
    if (n.op == OpKind::InsertZeros) {
      if (x.rank() != 4) return err(id, "input must be 4-D NCHW, got " + shape_str(x.shape));
      const auto& s = n.attr_ints("stride");
      const auto& e = n.attr_ints("extra");
      const auto& c = n.attr_ints("crop");
      if (Status st = spread_attrs_non_negative(id); !st) return st;
      Shape out = x.shape;
      for (size_t i = 0; i < 2; ++i) {
        if (s[i] > kMaxNumel / x.shape[2 + i] || e[i] > kMaxNumel || c[i] > kMaxNumel)
          return err(id, "the result has more than 2^48 elements");
        const int64_t spread = (x.shape[2 + i] - 1) * s[i] + 1 + e[i];
        if (spread - 2 * c[i] < 1)
          return err(id, "'crop' " + attr_str(n.attrs.at("crop")) + " removes every " + (i == 0 ? "row" : "column") +
                             " of the " + std::to_string(spread) + (i == 0 ? " spread rows" : " spread columns"));
        out[2 + i] = spread - 2 * c[i];
      }
      if (Status st = check_shape_size(id, out); !st) return st;
      n.type = {x.dtype, out};
      return {};
    }
    // The pools' backward: grad has the pooled shape of the input.
    const bool is_max = n.op == OpKind::MaxPool2dBackward;
    const Shape input = is_max ? x.shape : n.attr_ints("input_shape");
    const TensorType& grad = is_max ? in(id, 1) : x;
    if (Status st = check_input_shape(id, input, "pooled"); !st) return st;
    Expected<Shape> pooled = pooled_shape(id, input);
    if (!pooled) return pooled.error();
    if (grad.shape != *pooled)
      return err(id, "'grad' is " + shape_str(grad.shape) + " but pooling " + shape_str(input) + " gives " +
                         shape_str(*pooled));
    n.type = {grad.dtype, input};
    return {};
  }

  Status pool1d(ValueId id, const TensorType& x) {
    Node& n = g_.node(id);
    if (x.rank() < 1) return err(id, "input must have at least 1 dim");
    int64_t k = n.attr_int("kernel_size"), s = n.attr_int("stride"), p = n.attr_int("padding");
    if (p > k / 2) return err(id, "padding " + std::to_string(p) + " must be at most half the kernel " + std::to_string(k));
    int64_t len = x.shape.back();
    if (Status st = check_padding(id, len, p); !st) return st;
    int64_t out = window_out(len, k, s, p, 1, n.attr_bool("ceil_mode"));
    if (out < 1)
      return err(id, "kernel " + std::to_string(k) + " is larger than the last dim (" + std::to_string(len) + ")");
    Shape shape = x.shape;
    shape.back() = out;
    n.type = {x.dtype, shape};
    return {};
  }
};

}  // namespace

Status infer_types(Graph& g) { return Inference(g).run(); }

}  // namespace fusejit
