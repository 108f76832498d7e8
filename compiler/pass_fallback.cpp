// Pass: kernels for everything the anchor kernel did not take, in graph
// order. Elementwise nodes group into pointwise kernels by shape; a reduction,
// softmax, norm (group / instance / layer), pool or gather (flip, im2col, a
// pool's backward) gets a kernel of its own that reads its input from memory
// (pools of one value to one shape share one: a pool pass),
// and the elementwise nodes that consume its result fuse into its store. The
// partial row reductions of the anchor (of one shape) share one RowFinish
// kernel, which runs the consumers of all of them; a partly fused softmax
// gets a RowFinish kernel of its own, which scales its elements in place.
// Leaf expressions get a kernel only when something needs them in memory
// (a graph output, or the input of a reduction/softmax/pool or of a view).
// Views (reshapes of a value in memory) get none: the buffer is read as the
// reshape's shape; one that is an output is copied to it. Transposes and
// expands are pointwise nodes like the elementwise ops (their operands read
// at swapped or broadcast coordinates).
#include <algorithm>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

KernelKind kind_for(OpKind op) {
  switch (op_category(op)) {
    case OpCategory::Reduction: return KernelKind::Reduce;
    case OpCategory::Normalize: return KernelKind::Softmax;
    case OpCategory::Norm: return KernelKind::Norm;  // batch_norm is lowered to elementwise ops before planning
    case OpCategory::Gather: return KernelKind::Gather;
    default: break;
  }
  if (op == OpKind::GlobalAvgPool) return KernelKind::Reduce;
  if (op == OpKind::MaxPool1d || op == OpKind::AvgPool1d) return KernelKind::Pool1d;
  if (op == OpKind::MaxPool2d || op == OpKind::AvgPool2d) return KernelKind::Pool2d;
  return KernelKind::Pointwise;
}

// What computing leaf expression v at one element costs: the tensors of v's
// element count it loads (inputs and views of them), and whether it reads
// any at swapped coordinates (a transpose: strided loads).
struct LeafCost {
  int64_t full_size_loads = 0;
  bool transposed = false;
};
LeafCost leaf_cost(const PlanContext& ctx, ValueId v) {
  const int64_t numel = ctx.node(v).type.numel();
  LeafCost c;
  std::set<ValueId> seen;
  std::vector<ValueId> stack = {v};
  while (!stack.empty()) {
    const ValueId u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    const Node& n = ctx.node(u);
    if (n.op == OpKind::Input || ctx.is_view(u)) {
      c.full_size_loads += n.type.numel() == numel;
      continue;
    }
    c.transposed = c.transposed || n.op == OpKind::Transpose;
    stack.insert(stack.end(), n.operands.begin(), n.operands.end());
  }
  return c;
}

// Whether leaf expression v is written out: as a graph output, for a view,
// or for kernels that read it from memory. Reductions, pools, softmax, norms
// and gathers compute it where they read it instead (no write and read back of a
// full tensor) unless it reads a transpose (the tiled transpose writing it out
// keeps the row kernel's loads contiguous) or recomputing costs more
// full-size loads than writing it once: L loads for each of C readers against
// L + 1 write + C reads.
bool needs_memory(const PlanContext& ctx, ValueId v) {
  if (ctx.is_output(v)) return true;
  if (ctx.node(v).op == OpKind::Input || ctx.is_view(v)) return false;  // in memory already (a view: as an input)
  int64_t readers = 0;
  for (ValueId u : ctx.users[static_cast<size_t>(v)]) {
    if (!ctx.reads_memory(u)) continue;
    if (!ctx.recomputes_operand(u, v)) return true;
    ++readers;
  }
  if (readers == 0) return false;
  const LeafCost c = leaf_cost(ctx, v);
  return c.transposed || c.full_size_loads * readers > c.full_size_loads + 1 + readers;
}

std::string label_of(const PlanContext& ctx, ValueId v) {
  return std::string(op_name(ctx.node(v).op)) + " %" + std::to_string(v);
}

// What a kernel writing out leaf expression `v` is for (plan text).
std::string write_reason(const PlanContext& ctx, ValueId v) {
  if (ctx.is_output(v)) return "it is a graph output";
  for (ValueId u : ctx.users[static_cast<size_t>(v)])
    if (ctx.is_view(u)) return std::string("reshape %") + std::to_string(u) + " views its buffer";
  return "a reduction/softmax/pool reads it";
}

// Wide stages of a row-finish kernel whose blocks stream fewer elements than
// this run as one kernel only when they still fill the GPU with blocks.
constexpr int64_t kWideFuseMaxElements = int64_t{1} << 20;
constexpr int64_t kWideMinBlocks = 128;

// The elementwise consumers of a row-finish kernel's results over a shape the
// rows broadcast into (`x + sum(h, keepdim)`, or along leading dims: `h -
// mean(h, 0)`): into the kernel's wide region, so they do not need a
// pointwise kernel of their own.
void grow_row_broadcast(PlanContext& ctx, KernelPlan& k, int index) {
  std::vector<ValueId> sources = k.finishes;
  sources.insert(sources.end(), k.region.nodes.begin(), k.region.nodes.end());
  const std::set<ValueId> ours(sources.begin(), sources.end());
  for (ValueId v = k.root + 1; v < static_cast<ValueId>(ctx.g.nodes.size()); ++v) {
    const Node& n = ctx.node(v);
    if ((!is_elementwise(n.op) && n.op != OpKind::Expand) || ctx.leaf_expr[static_cast<size_t>(v)] || ctx.placed(v))
      continue;
    const int64_t len = row_broadcast_len(k.region.domain, n.type.shape);
    // Along leading dims (CUDA): blocks over columns and rows of the wide domain (finish_kernel_columns).
    const int64_t column_rows = ctx.arch == "cpu" ? 0 : column_broadcast_rows(k.region.domain, n.type.shape);
    if ((len == 0 && column_rows == 0) ||
        std::none_of(n.operands.begin(), n.operands.end(), [&](ValueId o) { return ours.count(o) > 0; }))
      continue;
    if (len == 0) {
      k.wide.domain = n.type.shape;
      k.wide_columns = true;
      grow_region(ctx, k.wide, sources, k.root, index, /*allow_placed=*/true);
      k.notes.push_back("the finished values broadcast over " + shape_str(n.type.shape) + " in this kernel (a column " +
                        "each, " + std::to_string(column_rows) + " rows)");
      return;
    }
    const int64_t rows = numel(k.region.domain);
    const int64_t per_block = std::max<int64_t>(1, kRowFinishWideElementsPerBlock / len);
    if (rows * len > kWideFuseMaxElements && (rows + per_block - 1) / per_block < kWideMinBlocks) {
      k.notes.push_back("%" + std::to_string(v) + " " + shape_str(n.type.shape) +
                        " not in the row-finish kernel: its " + std::to_string(rows) +
                        " rows are too few blocks for the broadcast; a pointwise kernel runs it");
      return;
    }
    k.wide.domain = n.type.shape;
    grow_region(ctx, k.wide, sources, k.root, index, /*allow_placed=*/true);
    k.notes.push_back("the finished rows broadcast over " + shape_str(n.type.shape) + " in this kernel (" +
                      std::to_string(len) + " elements per row)");
    return;
  }
}

// The reductions a row pass or a row stage takes: sum, mean, max, min.
bool row_pass_op(OpKind op) {
  return op == OpKind::Sum || op == OpKind::Mean || op == OpKind::Max || op == OpKind::Min;
}

// Row stages: a sum / mean / max / min along the wide rows, keepdim,
// of a value the wide stage computes (`mean(h - max(h))`), and the elementwise
// ops after it (over the rows, or broadcast back over the wide domain), run in
// the same row-finish kernel: on the GPU a warp (or the block) reduces each
// row, then the block goes over the rows again, recomputing what it needs;
// the CPU backend goes along each row once per stage. Stage by stage, while each
// reduction and its row-shaped consumers are needed only here (no output:
// nothing is stored at row coordinates).
void grow_row_stages(PlanContext& ctx, KernelPlan& k, int index) {
  if (!ctx.heur.row_stages || k.wide.nodes.empty() || k.wide_columns) return;
  const Shape& rows = k.region.domain;
  const Shape& wide = k.wide.domain;
  std::set<ValueId> inside(k.finishes.begin(), k.finishes.end());
  inside.insert(k.region.nodes.begin(), k.region.nodes.end());
  inside.insert(k.wide.nodes.begin(), k.wide.nodes.end());
  const auto count = static_cast<ValueId>(ctx.g.nodes.size());
  for (ValueId r = k.root + 1; r < count; ++r) {
    const Node& n = ctx.node(r);
    if (!row_pass_op(n.op) || ctx.placed(r) || n.type.shape != rows) continue;
    const ValueId x = n.operands[0];
    if (!inside.count(x) || ctx.node(x).type.shape != wide) continue;
    std::set<ValueId> ours = inside;
    ours.insert(r);
    std::vector<ValueId> post;
    for (ValueId v = r + 1; v < count; ++v) {
      const Node& m = ctx.node(v);
      if (ctx.placed(v) || ctx.leaf_expr[static_cast<size_t>(v)] || !is_elementwise(m.op)) continue;
      if (std::none_of(m.operands.begin(), m.operands.end(), [&](ValueId o) { return o == r || (ours.count(o) && !inside.count(o)); }))
        continue;  // the stage's consumers: what reads r or them
      bool ok = m.type.shape == rows || m.type.shape == wide;
      for (ValueId o : m.operands) ok = ok && (ours.count(o) > 0 || ctx.leaf_expr[static_cast<size_t>(o)]);
      if (!ok) continue;  // reads a later stage's reduction, or another kernel's value
      post.push_back(v);
      ours.insert(v);
    }
    // r and its row-shaped consumers may be outputs or read by another
    // kernel: stored at row coordinates once the row is reduced (the wide
    // trees recompute them at each element).
    auto kept_here = [&](ValueId v) {
      const auto& users = ctx.users[static_cast<size_t>(v)];
      return !ctx.is_output(v) && std::all_of(users.begin(), users.end(), [&](ValueId u) { return ours.count(u) > 0; });
    };
    bool stored = !kept_here(r);
    for (ValueId v : post) stored = stored || (ctx.node(v).type.shape == rows && !kept_here(v));
    FusedTail stage;
    stage.op = r;
    stage.post.domain = wide;
    stage.post.nodes = post;
    ctx.kernel_of[static_cast<size_t>(r)] = index;
    for (ValueId v : post) ctx.kernel_of[static_cast<size_t>(v)] = index;
    std::string ops;
    for (ValueId v : post) ops += (ops.empty() ? "" : ", ") + label_of(ctx, v);
    k.notes.push_back(label_of(ctx, r) + " along the rows of " + shape_str(wide) + " in this kernel" +
                      (ops.empty() ? std::string() : ", then " + ops) +
                      (stored ? " (row values stored at row coordinates)" : ""));
    k.row_stages.push_back(std::move(stage));
    inside = std::move(ours);
  }
}

// A sum / mean / max / min of a row-finish kernel's results over all their
// elements (`max(sum(h, 1), 0)`): done by the kernel itself, as its tail, with
// the reduction's elementwise consumers. Up to kAcrossRowsMaxRows rows in one
// block; more (CUDA) in a block per kAcrossRowsMaxRows rows (at most
// kAcrossMaxBlocks), each folding a fixed share, the last to finish combining
// the folds in block order (deterministic). The CPU backend folds every row in
// one work item, so a reduce kernel runs it there beyond kAcrossRowsMaxRows.
constexpr int64_t kAcrossMaxBlocks = 512;

void fuse_reduction_across_rows(PlanContext& ctx, KernelPlan& k, int index) {
  if (!k.wide.nodes.empty()) return;
  std::set<ValueId> ours(k.finishes.begin(), k.finishes.end());
  ours.insert(k.region.nodes.begin(), k.region.nodes.end());
  const int64_t rows = numel(k.region.domain);
  for (ValueId v = k.root + 1; v < static_cast<ValueId>(ctx.g.nodes.size()); ++v) {
    const Node& n = ctx.node(v);
    const bool kind = n.op == OpKind::Sum || n.op == OpKind::Mean || n.op == OpKind::Max || n.op == OpKind::Min;
    if (!kind || ctx.placed(v) || !ours.count(n.operands[0]) || n.type.numel() != 1) continue;
    const std::string label = std::string(op_name(n.op)) + " %" + std::to_string(v);
    if (rows > kAcrossRowsMaxRows && ctx.arch == "cpu") {
      k.notes.push_back(label + " not in the row-finish kernel: " + std::to_string(rows) +
                        " rows are too many for one work item; a reduce kernel runs it");
      return;
    }
    add_tail(ctx, k, v, index);
    k.across_blocks = static_cast<int>(std::min(ceil_div(rows, kAcrossRowsMaxRows), kAcrossMaxBlocks));
    k.notes.push_back(label + " of the " + std::to_string(rows) + " finished rows in this kernel (" +
                      (k.across_blocks == 1 ? std::string("one block")
                                            : std::to_string(k.across_blocks) +
                                                  " blocks; the last to finish combines their folds") +
                      ")");
    return;
  }
}

// Row passes (CUDA): a reduce kernel takes the later reductions of the same
// rows (same operand shape, dims and output shape: `sum(g)` and `sum(g *
// mask)` over H, W) into its pass, one read of the data for all of them, and
// stores the leaf expressions it computes that are graph outputs (dZ next to
// the bias gradient summed from it) instead of a pointwise kernel writing them
// before a second read. Sum, mean, max, min; fj::reduce_rows only. (A pass
// of fj::reduce_columns storing dZ was tried for a linear's bias gradient: with
// a store after each element's loads a thread keeps one row in flight, and the
// pass took 24 us on the H200 for 1024 x 8192 bf16, against 11 + 5 for a
// pointwise kernel writing dZ and the column sum reading it.)
bool row_pass_root(const PlanContext& ctx, ValueId r) {
  return ctx.heur.row_pass && ctx.arch.rfind("sm_", 0) == 0 && row_pass_op(ctx.node(r).op) &&
         !reduce_by_columns(ctx.g, r);
}

bool same_rows(const PlanContext& ctx, ValueId r, ValueId u) {
  const Node& a = ctx.node(r);
  const Node& b = ctx.node(u);
  return a.type.shape == b.type.shape && ctx.node(a.operands[0]).type.shape == ctx.node(b.operands[0]).type.shape &&
         reduce_geometry(ctx.g, r).reduced == reduce_geometry(ctx.g, u).reduced;
}

// Whether each row of reduction r is one contiguous run of its operand (the
// reduced dims trailing): a row pass stores values only then, so its stores
// stay as coalesced as a pointwise kernel's.
bool contiguous_rows(const PlanContext& ctx, ValueId r) {
  const Shape& xs = ctx.node(ctx.node(r).operands[0]).type.shape;
  const std::vector<int> reduced = reduce_geometry(ctx.g, r).reduced;
  if (reduced.empty()) return false;
  for (int d = reduced.front(); d < static_cast<int>(xs.size()); ++d)
    if (xs[static_cast<size_t>(d)] != 1 && std::find(reduced.begin(), reduced.end(), d) == reduced.end()) return false;
  return true;
}

// A leaf expression a row pass may store: a graph output that nothing reads
// from memory (its readers recompute it; no view), computed without strided
// (transposed) loads.
bool streamable(const PlanContext& ctx, ValueId x) {
  const Node& n = ctx.node(x);
  if (!ctx.leaf_expr[static_cast<size_t>(x)] || n.op == OpKind::Input || n.op == OpKind::Constant ||
      ctx.is_view(x) || !ctx.is_output(x))
    return false;
  for (ValueId u : ctx.users[static_cast<size_t>(x)])
    if (ctx.is_view(u) || (ctx.reads_memory(u) && !ctx.recomputes_operand(u, x))) return false;
  return !leaf_cost(ctx, x).transposed;
}

// Whether a row pass will reduce leaf expression x (so it can store x).
bool row_pass_reads(const PlanContext& ctx, ValueId x) {
  for (ValueId u : ctx.users[static_cast<size_t>(x)])
    if (ctx.node(u).operands[0] == x && row_pass_root(ctx, u) && contiguous_rows(ctx, u)) return true;
  return false;
}

// Joins the later reductions of kernel `index`'s rows and the outputs it can store.
void join_row_pass(PlanContext& ctx, Plan& plan, int index) {
  KernelPlan& k = plan.kernels[static_cast<size_t>(index)];
  if (!row_pass_root(ctx, k.root)) return;
  std::vector<ValueId> reductions = {k.root};
  for (ValueId u = k.root + 1; u < static_cast<ValueId>(ctx.g.nodes.size()); ++u) {
    if (ctx.placed(u) || !row_pass_op(ctx.node(u).op) || !same_rows(ctx, k.root, u)) continue;
    const ValueId x = ctx.node(u).operands[0];
    const int in_memory = ctx.memory_kernel(x);
    const bool readable = ctx.node(x).op == OpKind::Input || (in_memory >= 0 && in_memory < index) ||
                          (in_memory < 0 && ctx.leaf_expr[static_cast<size_t>(x)] && !ctx.is_view(x) &&
                           (streamable(ctx, x) || !needs_memory(ctx, x)));
    if (!readable) continue;
    add_tail(ctx, k, u, index);
    reductions.push_back(u);
    k.notes.push_back(label_of(ctx, u) + " reduces the same rows in the same pass");
  }
  for (ValueId r : reductions) {
    const ValueId x = ctx.node(r).operands[0];
    if (!contiguous_rows(ctx, r) || !streamable(ctx, x) || ctx.memory_kernel(x) >= 0) continue;
    k.streamed.domain = ctx.node(x).type.shape;
    k.streamed.stores.push_back(x);
    ctx.written_by[static_cast<size_t>(x)] = index;
    k.notes.push_back("stores %" + std::to_string(x) + " (a graph output) as the pass computes it");
  }
}

// Pool passes (CUDA and the CPU backend): a pool kernel takes the later pools of the same value
// to the same shape (1-D with 1-D, 2-D with 2-D: `max_pool1d(g, 4, 2, 1)` and
// `avg_pool1d(g, 3, 2, 1)`), each window of each pool computed by the thread
// of its output element: one read of the value from memory for all of them
// (the windows overlap in L1) instead of one a pool.
void join_pool_pass(PlanContext& ctx, KernelPlan& k, int index) {
  if (!ctx.heur.pool_pass) return;
  const Node& r = ctx.node(k.root);
  for (ValueId u = k.root + 1; u < static_cast<ValueId>(ctx.g.nodes.size()); ++u) {
    const Node& n = ctx.node(u);
    if (ctx.placed(u) || kind_for(n.op) != k.kind || n.operands[0] != r.operands[0] || n.type.shape != r.type.shape)
      continue;
    add_tail(ctx, k, u, index);
    k.notes.push_back(label_of(ctx, u) + " pools the same value in the same pass");
  }
}

// Materializes leaf expression v (kept unplaced: users still recompute it).
void write_leaf(PlanContext& ctx, Plan& plan, ValueId v) {
  const int index = static_cast<int>(plan.kernels.size());
  KernelPlan k;
  k.kind = KernelKind::Pointwise;
  k.region.domain = ctx.node(v).type.shape;
  k.region.stores.push_back(v);
  const LeafEvaluation eval = recomputed_nodes(ctx, v, index);
  std::string ops, loaded;
  for (ValueId u : eval.ops) ops += (ops.empty() ? "" : ", ") + label_of(ctx, u);
  for (ValueId u : eval.loaded) loaded += (loaded.empty() ? "%" : ", %") + std::to_string(u);
  k.notes.push_back("%" + std::to_string(v) + " is computed from inputs alone" +
                    (ops.empty() ? std::string() : " (" + ops + ")") +
                    (loaded.empty() ? std::string() : ", reading " + loaded + " at swapped coordinates from the buffer an earlier kernel wrote") +
                    "; written out because " + write_reason(ctx, v));
  ctx.written_by[static_cast<size_t>(v)] = index;
  plan.kernels.push_back(std::move(k));
}

}  // namespace

namespace {

// Gives `v` (not placed yet) its kernel, or none where it needs none.
Status plan_node(PlanContext& ctx, Plan& plan, ValueId v) {
  {
    const Node& n = ctx.node(v);
    const auto i = static_cast<size_t>(v);
    const int index = static_cast<int>(plan.kernels.size());
    KernelPlan k;
    if (ctx.leaf_expr[i]) {
      // Stored by a row pass already, or left to the row pass that will reduce it
      // (plan_fallback_kernels writes it at the end if none did).
      if (!needs_memory(ctx, v) || ctx.written_by[i] >= 0 || (streamable(ctx, v) && row_pass_reads(ctx, v)))
        return Status::success();
      write_leaf(ctx, plan, v);
      return Status::success();
    }
    if (ctx.is_view(v)) {  // no kernel: the operand's buffer, read as this shape
      const ValueId x = n.operands[0];
      ctx.written_by[i] = ctx.memory_kernel(x);
      if (ctx.written_by[i] < 0)
        return Error("codegen: internal error: reshape %" + std::to_string(v) + " views %" + std::to_string(x) +
                     ", which no kernel writes");
      if (!ctx.is_output(v) || ctx.stored_through_view(v)) return Status::success();
      k.kind = KernelKind::Pointwise;  // a copy to the output's buffer
      k.region.domain = n.type.shape;
      k.region.stores.push_back(v);
      k.notes.push_back("reshape %" + std::to_string(v) + " views %" + std::to_string(x) +
                        "'s buffer; copied out because it is a graph output");
      plan.kernels.push_back(std::move(k));
      return Status::success();
    }
    if (is_anchor(n.op)) return Error("codegen: more than one anchor op");
    k.kind = plan.partials.count(v) ? KernelKind::RowFinish : kind_for(n.op);
    k.region.domain = n.type.shape;
    if (k.kind == KernelKind::Pointwise) {
      k.region.nodes.push_back(v);
    } else if (k.kind == KernelKind::RowFinish) {
      // One kernel finishes every partial row reduction of this shape (their
      // inputs are all in the anchor kernel, so none depends on another).
      // A softmax's finish scales its own elements: a kernel of its own.
      k.root = v;
      auto softmax = [&](ValueId r) { return op_category(ctx.node(r).op) == OpCategory::Normalize; };
      for (const auto& [r, pb] : plan.partials)
        if (!ctx.placed(r) && ctx.node(r).type.shape == n.type.shape && softmax(r) == softmax(v) &&
            (!softmax(v) || r == v)) {
          k.finishes.push_back(r);
          ctx.kernel_of[static_cast<size_t>(r)] = index;
        }
    } else {
      k.root = v;
      const ValueId x = n.operands.empty() ? -1 : n.operands[0];
      if (x >= 0 && ctx.recomputes_operand(v, x) && ctx.leaf_expr[static_cast<size_t>(x)] && ctx.memory_kernel(x) < 0 &&
          ctx.node(x).op != OpKind::Input && ctx.node(x).op != OpKind::Constant && !ctx.is_view(x) &&
          !(k.kind == KernelKind::Reduce && row_pass_root(ctx, v) && contiguous_rows(ctx, v) && streamable(ctx, x))) {
        std::string ops;
        for (ValueId u : recomputed_nodes(ctx, x, index).ops) ops += (ops.empty() ? "" : ", ") + label_of(ctx, u);
        k.notes.push_back("%" + std::to_string(x) + " (" + ops + ") is computed from the inputs where " +
                          label_of(ctx, v) + " reads it, not written out and read back");
      }
      if ((k.kind == KernelKind::Softmax || k.kind == KernelKind::Norm) && ctx.kernel_of[static_cast<size_t>(n.operands[0])] == 0)
        k.notes.push_back(std::string(op_name(n.op)) + " %" + std::to_string(v) +
                          " not fused into the anchor epilogue: it needs its whole row before writing any "
                          "element; a row kernel normalizes the materialized input");
    }
    ctx.kernel_of[i] = index;
    plan.kernels.push_back(std::move(k));
    KernelPlan& placed = plan.kernels.back();
    std::vector<ValueId> sources = placed.finishes;
    if (placed.root >= 0 && sources.empty()) sources.push_back(placed.root);
    grow_region(ctx, placed.region, sources, v, index, /*allow_placed=*/true);
    if (placed.kind == KernelKind::RowFinish && op_category(n.op) != OpCategory::Normalize) {
      grow_row_broadcast(ctx, placed, index);
      grow_row_stages(ctx, placed, index);
      fuse_reduction_across_rows(ctx, placed, index);
    }
    if (placed.kind == KernelKind::Reduce) join_row_pass(ctx, plan, index);
    if (placed.kind == KernelKind::Pool1d || placed.kind == KernelKind::Pool2d) join_pool_pass(ctx, placed, index);
    if (placed.kind == KernelKind::Norm) fuse_tail_into_norm(ctx, placed, index);
  }
  return Status::success();
}

// A pointwise node not placed yet (it waits, see below).
bool pending(const PlanContext& ctx, ValueId v) {
  return !ctx.placed(v) && !ctx.leaf_expr[static_cast<size_t>(v)] && ctx.pointwise(v);
}

// Places the waiting pointwise nodes `v` needs in memory, operands first.
Status place_pending(PlanContext& ctx, Plan& plan, ValueId v) {
  if (!pending(ctx, v) && !(ctx.is_view(v) && ctx.written_by[static_cast<size_t>(v)] < 0)) return Status::success();
  for (ValueId o : ctx.node(v).operands)
    if (Status s = place_pending(ctx, plan, o); !s) return s;
  return ctx.placed(v) || ctx.is_view(v) ? Status::success() : plan_node(ctx, plan, v);
}

}  // namespace

// Pointwise nodes wait for their kernel until a row kernel or a view needs
// them in memory, or to the end: by then more of their operands are in
// memory, so one pointwise kernel takes more of them (a pointwise op between
// two row kernels joins the pointwise kernel after the second).
Status plan_fallback_kernels(PlanContext& ctx, Plan& plan) {
  const auto count = static_cast<ValueId>(ctx.g.nodes.size());
  for (ValueId v = 0; v < count; ++v) {
    if (ctx.placed(v) || pending(ctx, v)) continue;
    for (ValueId o : ctx.node(v).operands)
      if (Status s = place_pending(ctx, plan, o); !s) return s;
    if (Status s = plan_node(ctx, plan, v); !s) return s;
  }
  for (ValueId v = 0; v < count; ++v)
    if (pending(ctx, v))
      if (Status s = plan_node(ctx, plan, v); !s) return s;
  for (ValueId v = 0; v < count; ++v)  // left to a row pass that did not store it
    if (ctx.leaf_expr[static_cast<size_t>(v)] && ctx.memory_kernel(v) < 0 && needs_memory(ctx, v)) write_leaf(ctx, plan, v);
  return Status::success();
}

}  // namespace fusejit::cg
