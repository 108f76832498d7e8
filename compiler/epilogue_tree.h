// compiler/epilogue_tree.h — a region as a tree of load / compute / store
// nodes (like CUTLASS's epilogue visitor tree). The emitter turns every node
// into one generated device function and the tree into a composed function
// that calls them in order at one coordinate of the region's domain.
#pragma once

#include <vector>

#include "compiler/plan.h"

namespace fusejit::cg {

struct EpiNode {
  enum class Kind { Source, Constant, Load, Compute, Store };
  Kind kind = Kind::Compute;
  ValueId value = -1;     // the IR value produced (Store: the value stored)
  std::vector<int> args;  // indices of the nodes it reads
  BufferRef buffer{BufferKind::Input, -1};  // Load: read from; Store: written to
  // Load: the domain dim of each tensor dim; empty = PyTorch broadcasting
  // (right-aligned). A conv's bias [Cout] maps to dim 1 of [N, Cout, OH, OW].
  std::vector<int> dims;
};

struct EpilogueTree {
  Shape domain;
  std::vector<EpiNode> nodes;  // in evaluation order
  int result = -1;             // node whose value the composed function returns, or -1
  // Several results (a row pass): the composed function returns nothing and
  // writes these nodes' values to its last parameter, `float* out`, in order.
  std::vector<int> results;
  bool has_source = false;     // the composed function takes the source value (`src`)
  // With more than one source (a row-finish kernel's finished reductions):
  // the composed function takes `float src_<value>` for each, in this order.
  std::vector<ValueId> sources;
};

// The tree for `region`: `source` (or -1) arrives in a register — for the
// anchor that is the raw accumulator, and the anchor node (adding its own bias)
// becomes the first compute node; `result` (or -1) is returned; every store of
// the region is included when `with_stores`.
EpilogueTree build_epilogue_tree(const PlanContext& ctx, const Plan& plan, const Region& region, ValueId source,
                                 ValueId result, bool with_stores);
// The same with several values arriving in registers; an anchor among them
// arrives with its bias added unless `anchor_adds_bias`.
EpilogueTree build_epilogue_tree(const PlanContext& ctx, const Plan& plan, const Region& region,
                                 const std::vector<ValueId>& sources, ValueId result, bool with_stores,
                                 bool anchor_adds_bias = true);

// The tree of a row pass (KernelPlan::streamed): `values` at one element of
// the region's domain, as EpilogueTree::results, and the region's stores.
EpilogueTree build_row_pass_tree(const PlanContext& ctx, const Plan& plan, const Region& region,
                                 const std::vector<ValueId>& values);

}  // namespace fusejit::cg
