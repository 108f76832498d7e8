// Builds epilogue trees from regions (see epilogue_tree.h).
#include "compiler/epilogue_tree.h"

#include <algorithm>
#include <map>

namespace fusejit::cg {
namespace {

class TreeBuilder {
 public:
  TreeBuilder(const PlanContext& ctx, const Plan& plan, const Region& region, std::vector<ValueId> sources,
              bool anchor_adds_bias)
      : ctx_(ctx), plan_(plan), region_(region), sources_(std::move(sources)), anchor_adds_bias_(anchor_adds_bias) {
    for (size_t k = 0; k < plan.kernels.size(); ++k) {  // the kernel this region belongs to, if any
      const KernelPlan& kp = plan.kernels[k];
      bool ours = &kp.region == &region || &kp.wide == &region || &kp.streamed == &region;
      for (const FusedTail& t : kp.tails) ours = ours || &t.post == &region;
      if (ours) kernel_ = static_cast<int>(k);
    }
  }

  EpilogueTree tree;

  // v at the domain's coordinates, broadcast (right-aligned).
  int visit(ValueId v) {
    return visit(v, broadcast_map(ctx_.node(v).type.shape, static_cast<int>(tree.domain.size())));
  }

  // v with its dim d at domain dim map[d] (-1: a size-1 dim). Pointwise nodes
  // pass maps on to their operands (transpose swaps, expand broadcasts); a
  // transpose, expand or mapped reshape is no node of its own.
  int visit(ValueId v, const std::vector<int>& map) {
    const Node& n = ctx_.node(v);
    const bool standard = map == broadcast_map(n.type.shape, static_cast<int>(tree.domain.size()));
    const std::pair<ValueId, std::vector<int>> key{v, map};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    int id;
    bool compute = in_region(v) || (ctx_.leaf_expr[static_cast<size_t>(v)] && ctx_.pointwise(v));
    // A leaf expression an earlier kernel wrote out, read at other coordinates
    // (under a transpose): one load of it, not a recomputation from strided loads.
    const int written = ctx_.written_by[static_cast<size_t>(v)];
    if (compute && !standard && !in_region(v) && written >= 0 && written < kernel_ && plan_.buffer.count(v))
      compute = false;
    if (compute && (n.op == OpKind::Transpose || n.op == OpKind::Expand || n.op == OpKind::Reshape)) {
      id = visit(n.operands[0], operand_map(ctx_, v, 0, map));
    } else if (std::find(sources_.begin(), sources_.end(), v) != sources_.end()) {
      tree.has_source = true;
      id = add({EpiNode::Kind::Source, v, {}, {}, {}});
      if (is_anchor(n.op) && anchor_adds_bias_) {  // the accumulator; the anchor adds its bias
        std::vector<int> args = {id};
        if (n.op != OpKind::Matmul && n.operands.size() == 3) {  // not memoized: its own dim mapping
          const ValueId bias = n.operands[2];
          EpiNode load{EpiNode::Kind::Load, bias, {}, plan_.buffer.at(bias), {}};
          if (n.op == OpKind::Conv2d) load.dims = {1};
          args.push_back(add(std::move(load)));
        }
        id = add({EpiNode::Kind::Compute, v, args, {}, {}});
      }
    } else if (n.op == OpKind::Constant) {
      id = add({EpiNode::Kind::Constant, v, {}, {}, {}});
    } else if (compute) {
      std::vector<int> args;
      for (size_t j = 0; j < n.operands.size(); ++j) args.push_back(visit(n.operands[j], operand_map(ctx_, v, j, map)));
      id = add({EpiNode::Kind::Compute, v, args, {}, {}});
    } else {
      id = add({EpiNode::Kind::Load, v, {}, plan_.buffer.at(v), standard ? std::vector<int>{} : map});
    }
    memo_[key] = id;
    return id;
  }

  void store(ValueId v) {
    const Node& n = ctx_.node(v);
    if (std::find(region_.transposed.begin(), region_.transposed.end(), v) != region_.transposed.end()) {
      // The operand at the domain's coordinates, stored with v's dim d at domain dim dims[d] (the two swapped).
      const int at = visit(n.operands[0]);
      const std::vector<int64_t> swapped = n.attr_ints("dims");
      std::vector<int> dims(n.type.shape.size(), -1);
      for (size_t d = 0; d < dims.size(); ++d)
        if (n.type.shape[d] != 1)
          dims[d] = static_cast<int>(static_cast<int64_t>(d) == swapped[0]   ? swapped[1]
                                     : static_cast<int64_t>(d) == swapped[1] ? swapped[0]
                                                                             : static_cast<int64_t>(d));
      for (const BufferRef& b : plan_.store_to.at(v)) add({EpiNode::Kind::Store, v, {at}, b, dims});
      return;
    }
    const int at = visit(v);
    for (const BufferRef& b : plan_.store_to.at(v)) add({EpiNode::Kind::Store, v, {at}, b, {}});
  }

 private:
  const PlanContext& ctx_;
  const Plan& plan_;
  const Region& region_;
  std::vector<ValueId> sources_;
  bool anchor_adds_bias_;
  std::map<std::pair<ValueId, std::vector<int>>, int> memo_;
  int kernel_ = -1;  // the kernel whose region this is (-1: none of the plan's)

  bool in_region(ValueId v) const {
    return std::find(region_.nodes.begin(), region_.nodes.end(), v) != region_.nodes.end();
  }
  int add(EpiNode n) {
    tree.nodes.push_back(std::move(n));
    return static_cast<int>(tree.nodes.size()) - 1;
  }
};

}  // namespace

EpilogueTree build_epilogue_tree(const PlanContext& ctx, const Plan& plan, const Region& region,
                                 const std::vector<ValueId>& sources, ValueId result, bool with_stores,
                                 bool anchor_adds_bias) {
  TreeBuilder b(ctx, plan, region, sources, anchor_adds_bias);
  b.tree.domain = region.domain;
  if (sources.size() > 1) b.tree.sources = sources;
  for (ValueId s : sources) b.visit(s);  // sources are evaluated even if only stored
  if (with_stores)
    for (ValueId v : region.stores) b.store(v);
  if (result >= 0) b.tree.result = b.visit(result);
  return b.tree;
}

EpilogueTree build_epilogue_tree(const PlanContext& ctx, const Plan& plan, const Region& region, ValueId source,
                                 ValueId result, bool with_stores) {
  return build_epilogue_tree(ctx, plan, region, source >= 0 ? std::vector<ValueId>{source} : std::vector<ValueId>{},
                             result, with_stores);
}

EpilogueTree build_row_pass_tree(const PlanContext& ctx, const Plan& plan, const Region& region,
                                 const std::vector<ValueId>& values) {
  TreeBuilder b(ctx, plan, region, {}, true);
  b.tree.domain = region.domain;
  for (ValueId v : region.stores) b.store(v);
  for (ValueId v : values) b.tree.results.push_back(b.visit(v));
  return b.tree;
}

}  // namespace fusejit::cg
