// Shared emitter parts: parameters, node functions, index arithmetic.
#include "compiler/emit_common.h"

#include <algorithm>
#include <limits>
#include <map>

namespace fusejit::cg {
namespace {

double attr_or(const Node& n, const std::string& key, double fallback) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return fallback;
  if (auto d = std::get_if<double>(&it->second)) return *d;
  if (auto i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return fallback;
}

// The body expression of an elementwise op over operands named a[0], a[1].
std::string op_expression(const Node& n, const std::vector<std::string>& a) {
  auto lit = [&](const std::string& key, double fallback) { return float_literal(attr_or(n, key, fallback)); };
  const double inf = std::numeric_limits<double>::infinity();
  switch (n.op) {
    case OpKind::Relu: return "fj::op::relu(" + a[0] + ")";
    case OpKind::LeakyRelu: return "fj::op::leaky_relu(" + a[0] + ", " + lit("negative_slope", 0.01) + ")";
    case OpKind::Gelu: {
      auto it = n.attrs.find("approximate");
      const bool tanh_approx = it != n.attrs.end() && std::get_if<std::string>(&it->second) &&
                               std::get<std::string>(it->second) == "tanh";
      return std::string(tanh_approx ? "fj::op::gelu_tanh(" : "fj::op::gelu_erf(") + a[0] + ")";
    }
    case OpKind::Sigmoid: return "fj::op::sigmoid(" + a[0] + ")";
    case OpKind::Tanh: return "fj::op::tanh_(" + a[0] + ")";
    case OpKind::Silu: return "fj::op::silu(" + a[0] + ")";
    case OpKind::Mish: return "fj::op::mish(" + a[0] + ")";
    case OpKind::Softplus:
      return "fj::op::softplus(" + a[0] + ", " + lit("beta", 1.0) + ", " + lit("threshold", 20.0) + ")";
    case OpKind::Hardswish: return "fj::op::hardswish(" + a[0] + ")";
    case OpKind::Hardsigmoid: return "fj::op::hardsigmoid(" + a[0] + ")";
    case OpKind::Hardtanh:
      return "fj::op::hardtanh(" + a[0] + ", " + lit("min_val", -1.0) + ", " + lit("max_val", 1.0) + ")";
    case OpKind::Elu: return "fj::op::elu(" + a[0] + ", " + lit("alpha", 1.0) + ")";
    case OpKind::Exp: return "fj::op::exp_(" + a[0] + ")";
    case OpKind::Log: return "fj::op::log_(" + a[0] + ")";
    case OpKind::Abs: return "fj::op::abs_(" + a[0] + ")";
    case OpKind::Neg: return "fj::op::neg(" + a[0] + ")";
    case OpKind::Sqrt: return "fj::op::sqrt_(" + a[0] + ")";
    case OpKind::Rsqrt: return "fj::op::rsqrt_(" + a[0] + ")";
    case OpKind::Square: return "fj::op::square(" + a[0] + ")";
    case OpKind::Clamp: return "fj::op::clamp(" + a[0] + ", " + lit("min", -inf) + ", " + lit("max", inf) + ")";
    case OpKind::Add: return "fj::op::add(" + a[0] + ", " + a[1] + ")";
    case OpKind::Sub: return "fj::op::sub(" + a[0] + ", " + a[1] + ")";
    case OpKind::Mul: return "fj::op::mul(" + a[0] + ", " + a[1] + ")";
    case OpKind::Div: return "fj::op::div(" + a[0] + ", " + a[1] + ")";
    case OpKind::Minimum: return "fj::op::minimum(" + a[0] + ", " + a[1] + ")";
    case OpKind::Maximum: return "fj::op::maximum(" + a[0] + ", " + a[1] + ")";
    case OpKind::Pow: return "fj::op::pow_(" + a[0] + ", " + a[1] + ")";
    case OpKind::Erf: return "fj::op::erf_(" + a[0] + ")";
    case OpKind::Cast:  // values are floats: a cast to 16 bits rounds, one to f32 is exact
      if (n.type.dtype == DType::BF16) return "fj::op::to_bf16(" + a[0] + ")";
      if (n.type.dtype == DType::F16) return "fj::op::to_f16(" + a[0] + ")";
      return a[0];
    case OpKind::Gt: return "fj::op::gt(" + a[0] + ", " + a[1] + ")";
    case OpKind::Ge: return "fj::op::ge(" + a[0] + ", " + a[1] + ")";
    case OpKind::Lt: return "fj::op::lt(" + a[0] + ", " + a[1] + ")";
    case OpKind::Le: return "fj::op::le(" + a[0] + ", " + a[1] + ")";
    case OpKind::Eq: return "fj::op::eq(" + a[0] + ", " + a[1] + ")";
    default: return "";
  }
}

std::string value_label(const Graph& g, ValueId v) {
  const std::string& name = g.node(v).name;
  return identifier(name.empty() ? "v" : name);
}

}  // namespace

KernelEmitter::KernelEmitter(const PlanContext& ctx, const Plan& plan, int index)
    : ctx_(ctx), plan_(plan), index_(index) {
  src_.ns = "k" + std::to_string(index);
}

DType KernelEmitter::buffer_dtype(BufferRef b) const {
  const Graph& g = ctx_.g;
  switch (b.kind) {
    case BufferKind::Input: return g.node(g.inputs()[static_cast<size_t>(b.index)]).type.dtype;
    case BufferKind::Output: return g.node(g.outputs[static_cast<size_t>(b.index)].value).type.dtype;
    case BufferKind::Scratch: {
      const auto it = plan_.scratch_dtype.find(b.index);
      return it == plan_.scratch_dtype.end() ? DType::F32 : it->second;
    }
  }
  return DType::F32;
}

std::string KernelEmitter::buffer_param(BufferRef b, bool write) {
  for (const Param& p : params_)
    if (p.buffer == b) return "p." + p.name;
  const Graph& g = ctx_.g;
  std::string name;
  switch (b.kind) {
    case BufferKind::Input: name = "in_" + value_label(g, g.inputs()[static_cast<size_t>(b.index)]); break;
    case BufferKind::Output:
      name = "out_" + identifier(g.outputs[static_cast<size_t>(b.index)].name.empty()
                                     ? std::to_string(b.index)
                                     : g.outputs[static_cast<size_t>(b.index)].name);
      break;
    case BufferKind::Scratch: name = "scratch" + std::to_string(b.index); break;
  }
  for (const Param& p : params_)
    if (p.name == name) name += "_" + std::to_string(params_.size());
  params_.push_back({b, write, name});
  return "p." + name;
}

std::string KernelEmitter::node_function(const EpilogueTree& tree, const EpiNode& n) {
  const Graph& g = ctx_.g;
  const Node& node = g.node(n.value);
  const int rank = static_cast<int>(tree.domain.size());
  CudaFunction f;
  f.prefix = "__device__ __forceinline__ float";
  switch (n.kind) {
    case EpiNode::Kind::Load: {
      const DType dt = buffer_dtype(n.buffer);
      f.name = "fj_load_" + value_label(g, n.value) + "_" + std::to_string(n.value);
      const std::vector<int> dims = n.dims.empty() ? broadcast_dims(node.type.shape, rank) : n.dims;
      f.params = "const " + ctype(dt) + "* __restrict__ p";
      for (int d : used_dims(node.type.shape, dims)) f.params += ", int i" + std::to_string(d);
      f.comment = "load " + g.describe(n.value) + " " + node.type.str() + " at " + shape_str(tree.domain);
      if (n.dims.size() == 1 && n.dims[0] >= 0) {
        f.name += "_dim" + std::to_string(n.dims[0]);
      } else if (!n.dims.empty()) {  // a transposed (or otherwise remapped) load: its dims' domain dims
        f.name += "_at";
        for (int d : used_dims(node.type.shape, dims)) f.name += "_" + std::to_string(d);
      }
      f.body = {"return fj::load_as_float(p, " + offset_expr_mapped(node.type.shape, dims, "i") + ");"};
      break;
    }
    case EpiNode::Kind::Store: {
      const DType dt = buffer_dtype(n.buffer);
      f.prefix = "__device__ __forceinline__ void";
      f.name = "fj_store_" + value_label(g, n.value) + "_" + std::to_string(n.value);
      f.params = ctype(dt) + "* __restrict__ p" + (rank ? ", " + coord_params(rank) : "") + ", float v";
      f.comment = "store " + g.describe(n.value) + " as " + std::string(dtype_name(dt));
      if (!n.dims.empty()) {  // a transpose of the value: at its swapped coordinates
        f.name += "_at";
        for (int d : n.dims)
          if (d >= 0) f.name += "_" + std::to_string(d);
        f.comment += ", at " + shape_str(node.type.shape) + " coordinates (dims swapped)";
      }
      f.body = {"fj::store_from_float(p, " +
                (n.dims.empty() ? offset_expr(tree.domain, rank, "i") : offset_expr_mapped(node.type.shape, n.dims, "i")) +
                ", v);"};
      break;
    }
    case EpiNode::Kind::Compute: {
      f.name = "fj_" + std::string(op_name(node.op)) + "_" + std::to_string(n.value);
      if (is_anchor(node.op)) {
        const bool bias = n.args.size() == 2;
        f.params = bias ? "float acc, float bias" : "float acc";
        f.comment = g.describe(n.value) + (bias ? ": accumulator plus its bias" : ": the accumulator");
        f.body = {bias ? "return acc + bias;" : "return acc;"};
      } else {
        const bool binary = node.operands.size() == 2;
        f.params = binary ? "float a, float b" : "float x";
        f.comment = g.describe(n.value);
        f.body = {"return " + op_expression(node, binary ? std::vector<std::string>{"a", "b"}
                                                         : std::vector<std::string>{"x"}) +
                  ";"};
      }
      break;
    }
    default: return "";
  }
  return src_.add_function(std::move(f));
}

std::string KernelEmitter::operand_at(ValueId v, const std::string& index) {
  if (auto it = plan_.buffer.find(v); it != plan_.buffer.end())
    return "fj::load_as_float(" + buffer_param(it->second, false) + ", " + index + ")";
  const Graph& g = ctx_.g;
  const Shape& shape = g.node(v).type.shape;
  Region at_element;
  at_element.domain = shape;
  const std::string value = emit_tree(build_epilogue_tree(ctx_, plan_, at_element, -1, v, false),
                                      "fj_value_" + std::to_string(v), g.describe(v) + " at its coordinates");
  const int rank = static_cast<int>(shape.size());
  CudaFunction f;
  f.comment = g.describe(v) + " at flat index `at`, computed from the inputs (the plan keeps it out of memory)";
  f.prefix = "__device__ __forceinline__ float";
  f.name = "fj_operand_" + std::to_string(v);
  f.params = "const Params& p, long long at";
  const bool narrow = numel(shape) <= std::numeric_limits<int>::max();  // 32-bit index arithmetic
  f.body = decompose_index(narrow ? "(int)at" : "at", shape, "i", narrow ? "int" : "long long");
  f.body.push_back("return " + value + "(p" + (rank ? ", " + coord_args(rank) : "") + ");");
  return src_.add_function(std::move(f)) + "(p, " + index + ")";
}

namespace {

// The variables of a tree's nodes as the composed function names them: one
// per value, and one more each time a value comes again at another coordinate
// map (a transposed read); stores name none.
struct TreeVars {
  std::vector<std::string> vars;
  std::map<ValueId, int> seen;
  explicit TreeVars(size_t nodes) : vars(nodes) {}
  std::string fresh(const EpiNode& n) {
    const int repeat = n.kind == EpiNode::Kind::Store ? 0 : seen[n.value]++;
    return "v" + std::to_string(n.value) + (repeat ? "_" + std::to_string(repeat) : "");
  }
  std::string args(const EpiNode& n) const {  // the variables of the nodes n reads, comma-separated
    std::string out;
    for (int a : n.args) out += (out.empty() ? "" : ", ") + vars[static_cast<size_t>(a)];
    return out;
  }
};

}  // namespace

std::string KernelEmitter::emit_tree(const EpilogueTree& tree, const std::string& name, const std::string& comment,
                                     const std::vector<BufferRef>& smem_tiles,
                                     const std::vector<BufferRef>& column_loads) {
  const int rank = static_cast<int>(tree.domain.size());
  TreeVars names(tree.nodes.size());
  std::vector<std::string>& vars = names.vars;
  CudaFunction f;
  f.comment = comment;
  f.name = name;
  f.prefix = std::string("__device__ __forceinline__ ") + (tree.result >= 0 ? "float" : "void");
  f.params = "const Params& p";
  if (tree.sources.size() > 1) {
    for (ValueId v : tree.sources) f.params += ", float src_" + std::to_string(v);
  } else if (tree.has_source) {
    f.params += ", float src";
  }
  if (rank) f.params += ", " + coord_params(rank);
  for (size_t k = 0; k < smem_tiles.size(); ++k)
    f.params += ", " + ctype(buffer_dtype(smem_tiles[k])) + "* __restrict__ tile" + std::to_string(k);
  if (!smem_tiles.empty()) f.params += ", int tile_at";
  for (size_t k = 0; k < column_loads.size(); ++k) f.params += ", const float* __restrict__ cols" + std::to_string(k);
  if (!column_loads.empty()) f.params += ", int tile_col";
  const Graph& g = ctx_.g;
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const EpiNode& n = tree.nodes[i];
    const std::string v = names.fresh(n), args = names.args(n);
    switch (n.kind) {
      case EpiNode::Kind::Source: vars[i] = tree.sources.size() > 1 ? "src_" + std::to_string(n.value) : "src"; break;
      case EpiNode::Kind::Constant:
        vars[i] = v;
        f.body.push_back("const float " + v + " = " + float_literal(g.node(n.value).constant_value()) + ";");
        break;
      case EpiNode::Kind::Load: {
        vars[i] = v;
        const Shape& shape = g.node(n.value).type.shape;
        if (auto at = std::find(column_loads.begin(), column_loads.end(), n.buffer); at != column_loads.end()) {
          f.body.push_back("const float " + v + " = cols" + std::to_string(at - column_loads.begin()) +
                           "[tile_col];  // " + g.describe(n.value) + ", staged for the tile's columns");
          break;
        }
        std::string call = node_function(tree, n) + "(" + buffer_param(n.buffer, false);
        for (int d : used_dims(shape, n.dims.empty() ? broadcast_dims(shape, rank) : n.dims))
          call += ", i" + std::to_string(d);
        f.body.push_back("const float " + v + " = " + call + ");");
        break;
      }
      case EpiNode::Kind::Compute:
        vars[i] = v;
        f.body.push_back("const float " + v + " = " + node_function(tree, n) + "(" + args + ");");
        break;
      case EpiNode::Kind::Store:
        if (auto at = std::find(smem_tiles.begin(), smem_tiles.end(), n.buffer); at != smem_tiles.end()) {
          f.body.push_back("fj::store_from_float(tile" + std::to_string(at - smem_tiles.begin()) + ", tile_at, " +
                           args + ");  // " + g.describe(n.value) + ", TMA-stored");
          break;
        }
        f.body.push_back(node_function(tree, n) + "(" + buffer_param(n.buffer, true) +
                         (rank ? ", " + coord_args(rank) : "") + ", " + args + ");");
        break;
    }
  }
  if (tree.result >= 0) f.body.push_back("return " + vars[static_cast<size_t>(tree.result)] + ";");
  if (!tree.results.empty()) {
    f.params += ", float* __restrict__ out";
    for (size_t k = 0; k < tree.results.size(); ++k)
      f.body.push_back("out[" + std::to_string(k) + "] = " + vars[static_cast<size_t>(tree.results[k])] + ";");
  }
  return src_.add_function(std::move(f));
}

namespace {

// Whether a load of `shape` under the domain-dim map `dims` reads consecutive
// elements along domain dim `last` (its innermost dim of size > 1 sits there)
// at offsets that are multiples of `lanes` at the first lane.
bool steps_by_one_along(const Shape& shape, const std::vector<int>& dims, int last, int lanes) {
  for (int j = static_cast<int>(shape.size()) - 1; j >= 0; --j)
    if (shape[static_cast<size_t>(j)] != 1)
      return dims[static_cast<size_t>(j)] == last && shape[static_cast<size_t>(j)] % lanes == 0;
  return false;
}

}  // namespace

std::string KernelEmitter::emit_lanes(const EpilogueTree& tree, const std::string& name, const std::string& comment,
                                      int lanes, std::vector<BufferRef>& lane_buffers) {
  const int rank = static_cast<int>(tree.domain.size());
  if (rank == 0 || !tree.results.empty() || tree.domain.back() % lanes) return "";
  for (const EpiNode& n : tree.nodes)
    if (n.kind == EpiNode::Kind::Store && !n.dims.empty()) return "";  // remapped stores: one element at a time
  const int last = rank - 1;
  const std::string L = std::to_string(lanes), lane_coord = "(i" + std::to_string(last) + " + l)";
  auto add_lane_buffer = [&](BufferRef b) {
    if (std::find(lane_buffers.begin(), lane_buffers.end(), b) == lane_buffers.end()) lane_buffers.push_back(b);
  };
  CudaFunction f;
  f.comment = comment;
  f.name = name;
  f.prefix = "__device__ __forceinline__ void";
  f.params = "const Params& p";
  if (tree.sources.size() > 1) {
    for (ValueId v : tree.sources) f.params += ", float src_" + std::to_string(v);
  } else if (tree.has_source) {
    f.params += ", float src";
  }
  f.params += ", " + coord_params(rank);
  std::vector<std::string> loop, after;  // the lane loop's body; the lanes' stores after it
  TreeVars names(tree.nodes.size());
  std::vector<std::string>& vars = names.vars;  // inside the lane loop: v, or v[l] for a lane-wide load
  const Graph& g = ctx_.g;
  int stores = 0;
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const EpiNode& n = tree.nodes[i];
    const std::string v = names.fresh(n), args = names.args(n);
    switch (n.kind) {
      case EpiNode::Kind::Source: vars[i] = tree.sources.size() > 1 ? "src_" + std::to_string(n.value) : "src"; break;
      case EpiNode::Kind::Constant:
        vars[i] = v;
        f.body.push_back("const float " + v + " = " + float_literal(g.node(n.value).constant_value()) + ";");
        break;
      case EpiNode::Kind::Load: {
        const Shape& shape = g.node(n.value).type.shape;
        const std::vector<int> dims = n.dims.empty() ? broadcast_dims(shape, rank) : n.dims;
        const std::vector<int> used = used_dims(shape, dims);
        const bool per_lane = std::find(used.begin(), used.end(), last) != used.end();
        if (per_lane && steps_by_one_along(shape, dims, last, lanes)) {  // one access for the lanes
          vars[i] = v + "[l]";
          f.body.push_back("float " + v + "[" + L + "];  // " + g.describe(n.value));
          f.body.push_back("fj::load_lanes_as_float<" + L + ">(" + buffer_param(n.buffer, false) + ", " +
                           offset_expr_mapped(shape, dims, "i") + ", " + v + ");");
          add_lane_buffer(n.buffer);
          break;
        }
        vars[i] = v;
        std::string call = node_function(tree, n) + "(" + buffer_param(n.buffer, false);
        for (int d : used) call += ", " + (d == last ? lane_coord : "i" + std::to_string(d));
        (per_lane ? loop : f.body).push_back("const float " + v + " = " + call + ");");
        break;
      }
      case EpiNode::Kind::Compute:
        vars[i] = v;
        loop.push_back("const float " + v + " = " + node_function(tree, n) + "(" + args + ");");
        break;
      case EpiNode::Kind::Store: {
        const std::string s = "s" + std::to_string(stores++);
        f.body.push_back("float " + s + "[" + L + "];  // " + g.describe(n.value) + ", stored");
        loop.push_back(s + "[l] = " + args + ";");
        after.push_back("fj::store_lanes_from_float<" + L + ">(" + buffer_param(n.buffer, true) + ", " +
                        offset_expr(tree.domain, rank, "i") + ", " + s + ");");
        add_lane_buffer(n.buffer);
        break;
      }
    }
  }
  if (tree.result >= 0) {  // each lane's value to out[l]
    f.params += ", float (&out)[" + L + "]";
    loop.push_back("out[l] = " + vars[static_cast<size_t>(tree.result)] + ";");
  }
  f.body.push_back("#pragma unroll");
  f.body.push_back("for (int l = 0; l < " + L + "; ++l) {");
  f.body.insert(f.body.end(), loop.begin(), loop.end());
  f.body.push_back("}");
  f.body.insert(f.body.end(), after.begin(), after.end());
  return src_.add_function(std::move(f));
}

int tree_lanes(const KernelEmitter& em, const EpilogueTree& tree) {
  if (tree.domain.empty()) return 1;
  int widest = 1;
  for (const EpiNode& n : tree.nodes)
    if (n.kind == EpiNode::Kind::Store || n.kind == EpiNode::Kind::Load)
      widest = std::max(widest, dtype_size(em.buffer_dtype(n.buffer)));
  int lanes = 16 / widest;
  while (lanes > 1 && tree.domain.back() % lanes) lanes /= 2;
  return lanes;
}

std::string lanes_aligned(KernelEmitter& em, int lanes, const std::vector<BufferRef>& buffers) {
  std::string aligned;
  for (const BufferRef& b : buffers) {
    const int bytes = lanes * dtype_size(em.buffer_dtype(b));
    aligned += (aligned.empty() ? "" : " && ") + std::string("fj::aligned_to<") + std::to_string(bytes) + ">(" +
               em.buffer_param(b, b.kind != BufferKind::Input) + ")";
  }
  return aligned.empty() ? "true" : aligned;
}

std::vector<BufferRef> KernelEmitter::finish(const std::string& kernel_name, int threads,
                                             const std::vector<std::string>& body, int min_blocks,
                                             const std::vector<std::string>& extra_params) {
  CudaStruct params;
  params.name = "Params";
  params.comment = "the kernel's buffers";
  std::vector<BufferRef> args;
  std::string entry_params, init;
  for (const Param& p : params_) {
    const std::string type = (p.write ? "" : "const ") + ctype(buffer_dtype(p.buffer)) + "* __restrict__";
    params.members.push_back(type + " " + p.name + ";");
    entry_params += (entry_params.empty() ? "" : ", ") + type + " " + p.name;
    init += (init.empty() ? "" : ", ") + p.name;
    args.push_back(p.buffer);
  }
  for (const std::string& e : extra_params) entry_params += (entry_params.empty() ? "" : ", ") + e;
  src_.structs.insert(src_.structs.begin(), params);
  src_.entry.prefix = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) +
                      (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "") + ")";
  src_.entry.name = kernel_name;
  src_.entry.params = entry_params;
  src_.entry.body = {"const " + src_.ns + "::Params p{" + init + "};"};
  for (const std::string& line : body) src_.entry.body.push_back(line);
  return args;
}

std::vector<std::string> decompose_index(const std::string& linear, const Shape& shape, const std::string& prefix,
                                         const std::string& index_type) {
  std::vector<std::string> out;
  const int rank = static_cast<int>(shape.size());
  int last_real = -1;  // the outermost dim that is not 1
  for (int d = 0; d < rank; ++d)
    if (shape[static_cast<size_t>(d)] != 1) {
      last_real = d;
      break;
    }
  bool declared = false;
  for (int d = rank - 1; d >= 0; --d) {
    const std::string name = "const int " + prefix + std::to_string(d);
    const int64_t extent = shape[static_cast<size_t>(d)];
    if (extent == 1) {
      out.push_back(name + " = 0;");
      continue;
    }
    const std::string rest = declared ? "rest_" + prefix : linear;
    if (d == last_real) {
      out.push_back(name + " = (int)(" + rest + ");");
      continue;
    }
    if (!declared) {
      out.push_back(index_type + " rest_" + prefix + " = " + linear + ";");
      declared = true;
    }
    out.push_back(name + " = (int)(rest_" + prefix + " % " + int_literal(extent) + ");");
    out.push_back("rest_" + prefix + " /= " + int_literal(extent) + ";");
  }
  return out;
}

std::vector<int> broadcast_dims(const Shape& shape, int domain_rank) {
  std::vector<int> dims;
  const int rank = static_cast<int>(shape.size());
  for (int d = 0; d < rank; ++d) dims.push_back(domain_rank - rank + d);
  return dims;
}

std::vector<int> used_dims(const Shape& shape, const std::vector<int>& dims) {
  std::vector<int> out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) out.push_back(dims[d]);
  return out;
}

std::string offset_expr_mapped(const Shape& shape, const std::vector<int>& dims, const std::string& prefix) {
  const int rank = static_cast<int>(shape.size());
  const bool wide = numel(shape) > std::numeric_limits<int>::max();
  std::string expr;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t extent = shape[static_cast<size_t>(d)];
    if (extent != 1) {
      std::string coord = prefix + std::to_string(dims[static_cast<size_t>(d)]);
      if (wide) coord = "(long long)" + coord;
      std::string term = stride == 1 ? coord : coord + " * " + int_literal(stride);
      expr = expr.empty() ? term : term + " + " + expr;
    }
    stride *= extent;
  }
  return expr.empty() ? "0" : expr;
}

std::string offset_expr(const Shape& shape, int domain_rank, const std::string& prefix) {
  return offset_expr_mapped(shape, broadcast_dims(shape, domain_rank), prefix);
}

std::string coord_params(int rank, const std::string& prefix) {
  std::string s;
  for (int d = 0; d < rank; ++d) s += (d ? ", int " : "int ") + prefix + std::to_string(d);
  return s;
}

std::string coord_args(int rank, const std::string& prefix) {
  std::string s;
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + prefix + std::to_string(d);
  return s;
}

CudaStruct pool1d_shape_struct(const Graph& g, ValueId pool, const std::string& name) {
  const Node& p = g.node(pool);
  CudaStruct s;
  s.name = name;
  auto member = [&](const std::string& n, int64_t v) {
    s.members.push_back("static constexpr int " + n + " = " + int_literal(v) + ";");
  };
  member("kW", g.node(p.operands[0]).type.shape.back());
  member("kKW", p.attr_int("kernel_size"));
  member("kSW", p.attr_int("stride"));
  member("kPW", p.attr_int("padding"));
  member("kDW", 1);
  return s;
}

std::string op_list(const Graph& g, const std::vector<ValueId>& nodes) {
  std::string s;
  for (ValueId v : nodes) s += (s.empty() ? "" : "_") + std::string(op_name(g.node(v).op));
  return s;
}

}  // namespace fusejit::cg
