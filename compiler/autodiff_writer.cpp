// StageWriter: appends nodes to a backward stage graph with their shapes.
#include <algorithm>

#include "compiler/autodiff.h"

namespace fusejit::ad {

// The shortest trailing run of reduced elements worth a reduction of its own
// (see reduce).
constexpr int64_t kSplitReductionMinRow = 1024;

ValueId StageWriter::push(Node n, Shape shape) {
  ValueId id = g_.add(std::move(n));
  shapes_.push_back(std::move(shape));
  return id;
}

ValueId StageWriter::input(const std::string& name, const TensorType& type) {
  Node n;
  n.op = OpKind::Input;
  n.name = name;
  n.type = type;
  n.init = InitKind::Normal;
  return push(std::move(n), type.shape);
}

ValueId StageWriter::constant(double value) {
  Node n;
  n.op = OpKind::Constant;
  n.attrs["value"] = value;
  return push(std::move(n), {});
}

ValueId StageWriter::unary(OpKind op, ValueId x, AttrMap attrs) {
  Node n;
  n.op = op;
  n.operands = {x};
  n.attrs = std::move(attrs);
  return push(std::move(n), shape(x));
}

ValueId StageWriter::binary(OpKind op, ValueId a, ValueId b) {
  Node n;
  n.op = op;
  n.operands = {a, b};
  auto s = broadcast_shapes(shape(a), shape(b));
  return push(std::move(n), s ? *s : shape(a));  // a mismatch is prepare_graph's error
}

ValueId StageWriter::reduce(OpKind op, ValueId x, std::vector<int64_t> dims, bool keepdim) {
  const Shape& in = shape(x);
  const int rank = static_cast<int>(in.size());
  for (int64_t& d : dims)
    if (d < 0) d += rank;
  std::sort(dims.begin(), dims.end());
  // A sum over trailing dims and others ([0, 2, 3] of NCHW: a bias gradient)
  // as two: the trailing run first (a row reduction, rows enough to fill the
  // GPU), then the rest over the few values left. One reduction over them all
  // has only as many rows as outputs.
  size_t run = 0;
  int64_t run_len = 1;
  while (run < dims.size() && dims[dims.size() - 1 - run] == rank - 1 - static_cast<int64_t>(run))
    run_len *= in[static_cast<size_t>(dims[dims.size() - 1 - run])], ++run;
  if (op == OpKind::Sum && run > 0 && run < dims.size() && run_len >= kSplitReductionMinRow) {
    const std::vector<int64_t> trailing(dims.end() - static_cast<std::ptrdiff_t>(run), dims.end());
    const std::vector<int64_t> rest(dims.begin(), dims.end() - static_cast<std::ptrdiff_t>(run));
    const ValueId rows = reduce(op, x, trailing, /*keepdim=*/true);
    const ValueId r = reduce(op, rows, rest, /*keepdim=*/true);
    if (keepdim) return r;
    Shape out;
    for (int d = 0; d < rank; ++d)
      if (!std::binary_search(dims.begin(), dims.end(), d)) out.push_back(in[static_cast<size_t>(d)]);
    return reshape(r, out);
  }
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced) out.push_back(in[static_cast<size_t>(d)]);
    else if (keepdim) out.push_back(1);
  }
  Node n;
  n.op = op;
  n.operands = {x};
  n.attrs["dims"] = dims;
  n.attrs["keepdim"] = keepdim;
  return push(std::move(n), out);
}

ValueId StageWriter::expand(ValueId x, const Shape& shape_to) {
  if (shape(x) == shape_to) return x;
  Node n;
  n.op = OpKind::Expand;
  n.operands = {x};
  n.attrs["shape"] = shape_to;
  return push(std::move(n), shape_to);
}

ValueId StageWriter::reshape(ValueId x, const Shape& shape_to) {
  if (shape(x) == shape_to) return x;
  Node n;
  n.op = OpKind::Reshape;
  n.operands = {x};
  n.attrs["shape"] = shape_to;
  return push(std::move(n), shape_to);
}

ValueId StageWriter::transpose(ValueId x, int64_t d0, int64_t d1) {
  Shape s = shape(x);
  const int64_t rank = static_cast<int64_t>(s.size());
  if (d0 < 0) d0 += rank;
  if (d1 < 0) d1 += rank;
  std::swap(s[static_cast<size_t>(d0)], s[static_cast<size_t>(d1)]);
  Node n;
  n.op = OpKind::Transpose;
  n.operands = {x};
  n.attrs["dims"] = std::vector<int64_t>{std::min(d0, d1), std::max(d0, d1)};
  return push(std::move(n), s);
}

ValueId StageWriter::matmul(ValueId a, ValueId b) {
  const Shape& sa = shape(a);
  const Shape& sb = shape(b);
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  Shape out = broadcast_shapes(batch_a, batch_b).value_or(batch_a);
  out.push_back(sa[sa.size() - 2]);
  out.push_back(sb.back());
  Node n;
  n.op = OpKind::Matmul;
  n.operands = {a, b};
  return push(std::move(n), out);
}

ValueId StageWriter::linear(ValueId x, ValueId w) {
  Shape out = shape(x);
  out.back() = shape(w)[0];
  Node n;
  n.op = OpKind::Linear;
  n.operands = {x, w};
  return push(std::move(n), out);
}

ValueId StageWriter::op(OpKind op, std::vector<ValueId> operands, AttrMap attrs, const Shape& shape_out) {
  Node n;
  n.op = op;
  n.operands = std::move(operands);
  n.attrs = std::move(attrs);
  return push(std::move(n), shape_out);
}

ValueId StageWriter::copy(const Node& fwd, std::vector<ValueId> operands, const Shape& shape_out) {
  Node n;
  n.op = fwd.op;
  n.operands = std::move(operands);
  n.attrs = fwd.attrs;
  return push(std::move(n), shape_out);
}

void StageWriter::output(const std::string& name, ValueId v) { g_.outputs.push_back(Output{name, v, {}}); }

ValueId StageWriter::sum_to(ValueId v, const Shape& target) {
  const Shape& s = shape(v);
  if (s == target) return v;
  const size_t lead = s.size() - target.size();
  std::vector<int64_t> leading, stretched;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d < lead) leading.push_back(static_cast<int64_t>(d));
    else if (target[d - lead] == 1 && s[d] != 1) stretched.push_back(static_cast<int64_t>(d));
  }
  // One reduction where the dims allow (keepdim false drops the leading dims,
  // true keeps the stretched ones as 1), else a reduction and a reshape.
  if (stretched.empty()) return leading.empty() ? reshape(v, target) : reduce(OpKind::Sum, v, leading, false);
  if (leading.empty()) return reduce(OpKind::Sum, v, stretched, true);
  std::vector<int64_t> all = leading;
  all.insert(all.end(), stretched.begin(), stretched.end());
  return reshape(reduce(OpKind::Sum, v, all, /*keepdim=*/true), target);
}

ValueId StageWriter::keep_dims(ValueId v, const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return v;
  Shape kept = in;
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  return reshape(v, kept);
}

}  // namespace fusejit::ad
