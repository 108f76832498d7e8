// An elementwise epilogue at two adjacent columns a call (epilogue_pairs=1):
// the wgmma staged epilogue hands a thread columns n and n + 1 of a row
// (fj::tile_pointwise_staged_pairs), and each output is written by one store
// of both (fj::store_pair_from_float: 4 bytes in 16-bit, 8 in fp32) instead of
// two, with its index math done once.
#include <algorithm>
#include <map>

#include "compiler/emit_common.h"

namespace fusejit::cg {

std::string KernelEmitter::emit_tree_pair(const EpilogueTree& tree, const std::string& name, const std::string& comment,
                                          const std::vector<BufferRef>& column_loads) {
  const int rank = static_cast<int>(tree.domain.size());
  if (rank == 0 || !tree.has_source || tree.sources.size() > 1 || tree.result >= 0 || !tree.results.empty() ||
      tree.domain.back() % 2)
    return "";
  for (const EpiNode& n : tree.nodes) {
    if (n.kind != EpiNode::Kind::Store) continue;
    const DType dt = buffer_dtype(n.buffer);
    if (!n.dims.empty() || (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16)) return "";
  }
  const Graph& g = ctx_.g;
  const int last = rank - 1;
  const std::string next = "(i" + std::to_string(last) + " + 1)";
  CudaFunction f;
  f.comment = comment;
  f.name = name;
  f.prefix = "__device__ __forceinline__ void";
  f.params = "const Params& p, float src_a, float src_b, " + coord_params(rank);
  for (size_t k = 0; k < column_loads.size(); ++k) f.params += ", const float* __restrict__ cols" + std::to_string(k);
  if (!column_loads.empty()) f.params += ", int tile_col";
  // a[i], b[i]: node i's value at columns n and n + 1 (the same variable where it does not depend on the column)
  std::vector<std::string> a(tree.nodes.size()), b(tree.nodes.size());
  std::map<ValueId, int> seen;
  auto fresh = [&](const EpiNode& n) {
    const int repeat = seen[n.value]++;
    return "v" + std::to_string(n.value) + (repeat ? "_" + std::to_string(repeat) : "");
  };
  auto args_of = [&](const EpiNode& n, const std::vector<std::string>& vars) {
    std::string out;
    for (int i : n.args) out += (out.empty() ? "" : ", ") + vars[static_cast<size_t>(i)];
    return out;
  };
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const EpiNode& n = tree.nodes[i];
    switch (n.kind) {
      case EpiNode::Kind::Source:
        a[i] = "src_a";
        b[i] = "src_b";
        break;
      case EpiNode::Kind::Constant: {
        const std::string v = fresh(n);
        f.body.push_back("const float " + v + " = " + float_literal(g.node(n.value).constant_value()) + ";");
        a[i] = b[i] = v;
        break;
      }
      case EpiNode::Kind::Load: {
        const std::string v = fresh(n);
        a[i] = v + "_a";
        b[i] = v + "_b";
        if (auto at = std::find(column_loads.begin(), column_loads.end(), n.buffer); at != column_loads.end()) {
          const std::string cols = "cols" + std::to_string(at - column_loads.begin());
          f.body.push_back("const float " + a[i] + " = " + cols + "[tile_col], " + b[i] + " = " + cols +
                           "[tile_col + 1];  // " + g.describe(n.value) + ", staged for the tile's columns");
          break;
        }
        const Shape& shape = g.node(n.value).type.shape;
        const std::vector<int> dims = used_dims(shape, n.dims.empty() ? broadcast_dims(shape, rank) : n.dims);
        const std::string fn = node_function(tree, n) + "(" + buffer_param(n.buffer, false);
        std::string call_a = fn, call_b = fn;
        bool along = false;
        for (int d : dims) {
          call_a += ", i" + std::to_string(d);
          call_b += ", " + (d == last ? next : "i" + std::to_string(d));
          along = along || d == last;
        }
        if (!along) {
          a[i] = b[i] = v;
          f.body.push_back("const float " + v + " = " + call_a + ");");
        } else {
          f.body.push_back("const float " + a[i] + " = " + call_a + "), " + b[i] + " = " + call_b + ");");
        }
        break;
      }
      case EpiNode::Kind::Compute: {
        const std::string v = fresh(n), fn = node_function(tree, n);
        const std::string args_a = args_of(n, a), args_b = args_of(n, b);
        if (args_a == args_b) {  // per-row: one value for both columns
          a[i] = b[i] = v;
          f.body.push_back("const float " + v + " = " + fn + "(" + args_a + ");");
        } else {
          a[i] = v + "_a";
          b[i] = v + "_b";
          f.body.push_back("const float " + a[i] + " = " + fn + "(" + args_a + "), " + b[i] + " = " + fn + "(" +
                           args_b + ");");
        }
        break;
      }
      case EpiNode::Kind::Store: {
        const size_t src = static_cast<size_t>(n.args.at(0));
        f.body.push_back("fj::store_pair_from_float(" + buffer_param(n.buffer, true) + ", " +
                         offset_expr(tree.domain, rank, "i") + ", " + a[src] + ", " + b[src] + ");  // " +
                         g.describe(n.value));
        break;
      }
    }
  }
  return src_.add_function(std::move(f));
}

}  // namespace fusejit::cg
