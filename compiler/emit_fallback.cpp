// Emitters for the kernels that run over materialized tensors: pointwise
// groups, reductions (and global average pool), softmax / log_softmax and
// row finishes (norms and pools: emit_norm_pool.cpp). Each fuses the
// elementwise consumers of its result into its store (the kernel's region).
#include <algorithm>
#include <limits>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {

unsigned grid_for(int64_t work, int per_block, int64_t cap) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, cap));
}

std::vector<std::string> element_loop(const Shape& domain, int threads, unsigned grid,
                                      const std::vector<std::string>& inner) {
  const int64_t n = numel(domain);
  const bool wide = n + static_cast<int64_t>(grid) * threads > kIntMax;
  const std::string I = wide ? "long long" : "int";
  std::vector<std::string> out = {"for (" + I + " e = (" + I + ")blockIdx.x * blockDim.x + threadIdx.x; e < kNumel; e += (" +
                                  I + ")gridDim.x * blockDim.x) {"};
  append(out, decompose_index("e", domain, "i", I));
  append(out, inner);
  out.push_back("}");
  return out;
}

std::string post_call(const std::string& fn, const std::string& value, int rank) {
  return fn + "(p, " + value + (rank ? ", " + coord_args(rank) : "") + ");";
}

RowLanes row_lanes(const KernelEmitter& em, const std::vector<const EpilogueTree*>& trees, const PointwiseConfig& cfg) {
  RowLanes r;
  if (!cfg.lanes) return r;
  r.lanes = 16;
  for (const EpilogueTree* t : trees) r.lanes = std::min(r.lanes, tree_lanes(em, *t));
  return r;
}

WideRowsLoop RowLanes::add(KernelEmitter& em, const EpilogueTree& tree, const std::string& name,
                           const std::string& comment) {
  WideRowsLoop w;
  w.fn = em.emit_tree(tree, name, comment);
  if (lanes > 1) w.lanes_fn = em.emit_lanes(tree, name + "_lanes", comment + ", kLanes consecutive elements of a row",
                                            lanes, buffers);
  any = any || !w.lanes_fn.empty();
  return w;
}

std::vector<std::string> RowLanes::setup(KernelEmitter& em) const {
  if (!any) return {};
  em.src().constants.push_back({"kLanes", lanes, "consecutive elements of a row a thread takes where they are aligned"});
  return {"const bool lanes_ok = " + lanes_aligned(em, lanes, buffers) + ";"};
}

std::vector<std::string> WideRowsLoop::over_rows(const Shape& wide, const std::string& I,
                                                 const std::string& args) const {
  const int rank = static_cast<int>(wide.size());
  auto loop = [&](const std::string& lanes, const std::string& call) {
    std::vector<std::string> out = {"for (" + I + " q = threadIdx.x" + lanes + "; q < count; q += blockDim.x" + lanes +
                                        ") {",
                                    "const int row = (int)(q / kRowLen);",
                                    "const " + I + " e = r0 * (" + I + ")kRowLen + q;"};
    append(out, decompose_index("e", wide, "i", I));
    out.push_back(post_call(call, args, rank));
    out.push_back("}");
    return out;
  };
  if (lanes_fn.empty()) return loop("", fn);
  std::vector<std::string> out = {"// a row's kRowLen elements are whole groups of kLanes", "if (lanes_ok) {"};
  append(out, loop(" * kLanes", lanes_fn));
  out.push_back("} else {");
  append(out, loop("", fn));
  out.push_back("}");
  return out;
}

// A row-finish kernel spreads each row's tiles over a block's threads or warps from this many tiles on
// (H100: 512 rows x 86 tiles took 24.7 us one thread a row).
constexpr int64_t kMinTilesPerRowToSplit = 16;

std::vector<std::string> finish_block_rows(KernelEmitter& em, const RowFinishLines& lines, const Shape& domain,
                                           int64_t per_block, int threads, const std::string& I,
                                           const std::vector<ValueId>& finishes) {
  const bool spread = lines.tiles >= kMinTilesPerRowToSplit && per_block <= threads / 32;
  std::vector<std::string> out;
  if (spread) {
    em.src().constants.push_back({"kFinishThreads", threads, "threads of a block, all on each row's partials in turn"});
    append(out, {"__shared__ float combine_smem[kFinishThreads / 32];",
                 "for (int row = 0; row < kRowsPerBlock && r0 + row < kNumel; ++row) {",
                 "const " + I + " e = r0 + row;"});
    append(out, lines.by_block);
    out.push_back("if (threadIdx.x == 0) {");
  } else {
    append(out, {"if (threadIdx.x < kRowsPerBlock && r0 + (" + I + ")threadIdx.x < kNumel) {",
                 "const " + I + " e = r0 + threadIdx.x;", "const int row = threadIdx.x;"});
  }
  append(out, decompose_index("e", domain, "i", I));
  if (!spread) append(out, lines.by_thread);
  append(out, lines.rest);
  for (size_t j = 0; j < finishes.size(); ++j)
    out.push_back("finished[" + std::to_string(j) + "][row] = v" + std::to_string(finishes[j]) + ";");
  out.push_back("}");
  if (spread) out.push_back("}");
  return out;
}


namespace {

// reduce_columns (templates/reduce.cuh): warps per block (where it pays:
// reduce_by_columns, plan.cpp).
constexpr int kColumnGroups = 16;

// softmax_rows (templates/reduce.cuh): the most elements a thread holds in
// registers (the row read once); longer rows take three passes over memory.
constexpr int64_t kMaxSoftmaxRegisters = 32;



// Strides of a contiguous tensor.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d)
    st[static_cast<size_t>(d)] = st[static_cast<size_t>(d) + 1] * s[static_cast<size_t>(d) + 1];
  return st;
}

// "q0 * 64 + q1 * 8" for coordinates <prefix>j of `dims` (64-bit if `wide`).
std::string strided_sum(const std::vector<int>& dims, const std::vector<int64_t>& strides, const std::string& prefix,
                        bool wide) {
  std::string e;
  for (size_t j = 0; j < dims.size(); ++j) {
    const int64_t st = strides[static_cast<size_t>(dims[j])];
    std::string c = (wide ? "(long long)" : "") + prefix + std::to_string(j);
    e += (e.empty() ? "" : " + ") + (st == 1 ? c : c + " * " + int_literal(st));
  }
  return e.empty() ? "0" : e;
}

std::string reduce_op(OpKind op) {
  switch (op) {
    case OpKind::Max: return "fj::MaxOp";
    case OpKind::Min: return "fj::MinOp";
    case OpKind::LogSumExp: return "fj::LogSumExpOp";
    default: return "fj::SumOp";
  }
}

// A row pass (pass_fallback.cpp): the reductions of the same rows (the root,
// then the tails) in one fj::reduce_rows_multi, the leaf expressions they
// reduce computed once per element, and the streamed outputs stored there.
Expected<EmittedKernel> emit_row_pass(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const Shape& xs = g.node(r.operands[0]).type.shape;
  const ReduceGeometry geo = reduce_geometry(g, kp.root);
  if (geo.len > kIntMax) return Error("codegen: a reduction over more than 2^31 elements");
  std::vector<ValueId> reductions = {kp.root};
  std::vector<const Region*> posts = {&kp.region};
  for (const FusedTail& t : kp.tails) {
    reductions.push_back(t.op);
    posts.push_back(&t.post);
  }
  const RowConfig& cfg = ctx.heur.row;
  int group = cfg.group_for(geo.len);
  if (group > 32) group = cfg.threads;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  std::string what, ops, values;
  std::vector<ValueId> operands;
  for (ValueId red : reductions) {
    what += (what.empty() ? "" : ", ") + g.describe(red);
    ops += ", " + reduce_op(g.node(red).op);
    operands.push_back(g.node(red).operands[0]);
  }
  for (ValueId v : kp.streamed.stores) values += (values.empty() ? "" : ", ") + g.describe(v);
  s.comment = kp.name + ": " + what + " of " + g.node(r.operands[0]).type.str() + " over dims " +
              attr_str(AttrValue(r.attr_ints("dims"))) + " in one pass, " + std::to_string(group) + " threads per row" +
              (values.empty() ? std::string() : "; stores " + values + " on the way");
  s.constants.push_back({"kRows", geo.rows, "rows (outputs of each reduction)"});
  s.constants.push_back({"kLen", geo.len, "elements reduced into each"});
  Region pass = kp.streamed;
  pass.domain = xs;
  const std::string element = em.emit_tree(build_row_pass_tree(ctx, plan, pass, operands), "fj_row_element",
                                           "the values reduced (and those stored) at one element of the rows");
  std::vector<std::string> run = {"fj::reduce_rows_multi<" + std::to_string(group) + ", " + std::to_string(cfg.threads) +
                                      ops + ">(",
                                  "    kRows, kLen,", "[&](long long o) { return o; },",
                                  "[&](long long o, int r, float* v) {"};
  append(run, decompose_index("o", geo.kept_shape, "c", "long long"));
  append(run, decompose_index("r", geo.reduced_shape, "q", "int"));
  std::string coords;
  for (int d = 0, kept = 0, red = 0; d < static_cast<int>(xs.size()); ++d) {
    const bool reduced = std::find(geo.reduced.begin(), geo.reduced.end(), d) != geo.reduced.end();
    coords += (d ? ", " : "") + (reduced ? "q" + std::to_string(red++) : "c" + std::to_string(kept++));
  }
  run.push_back(element + "(p" + (coords.empty() ? "" : ", " + coords) + ", v);");
  run.push_back("},");
  run.push_back("[&](long long o, const float* v) {");
  append(run, decompose_index("o", r.type.shape, "i", "long long"));
  for (size_t j = 0; j < reductions.size(); ++j) {
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, *posts[j], reductions[j], -1, true),
                                          j == 0 ? "fj_post" : "fj_post_" + std::to_string(reductions[j]),
                                          g.describe(reductions[j]) + " and its fused consumers, at output coordinates");
    const std::string value = "v[" + std::to_string(j) + "]";
    const bool mean = reduce_geometry(g, reductions[j]).mean;
    run.push_back(post_call(post, mean ? value + " / (float)kLen" : value, static_cast<int>(r.type.shape.size())));
  }
  run.push_back("});");
  return finish_kernel(em, kp, run, {grid_for(geo.rows, cfg.threads / group, kIntMax), 1, 1}, cfg.threads);
}

Expected<EmittedKernel> emit_reduce(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  if (!kp.tails.empty() || !kp.streamed.stores.empty()) return emit_row_pass(ctx, plan, index);
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const ReduceGeometry geo = reduce_geometry(g, kp.root);
  if (geo.len > kIntMax) return Error("codegen: a reduction over more than 2^31 elements");
  const RowConfig& cfg = ctx.heur.row;
  int group = cfg.group_for(geo.len);
  if (group > 32) group = cfg.threads;
  // Columns: the kept dims after the last reduced one (`inner` consecutive
  // outputs read consecutive elements) take reduce_columns when they fill warps.
  int64_t inner = 1;
  for (int d = static_cast<int>(xs.size()) - 1; d >= 0 && (geo.reduced.empty() || d > geo.reduced.back()); --d)
    inner *= xs[static_cast<size_t>(d)];
  const int64_t column_blocks = geo.rows / inner * ((inner + 31) / 32);
  const bool columns = reduce_by_columns(g, kp.root);

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root) + " of " + g.node(x).type.str() + " over dims " +
              attr_str(AttrValue(r.op == OpKind::GlobalAvgPool ? std::vector<int64_t>{2, 3} : r.attr_ints("dims"))) +
              (columns ? ", 32 consecutive outputs per block (columns)" : ", " + std::to_string(group) + " threads per output");
  s.constants.push_back({"kRows", geo.rows, "outputs"});
  if (columns) s.constants.push_back({"kInner", inner, "consecutive outputs reading consecutive elements"});
  s.constants.push_back({"kLen", geo.len, "elements reduced into each"});
  const auto strides = strides_of(xs);
  const bool wide = numel(xs) > kIntMax;
  const std::string element = em.operand_at(x, "b + " + strided_sum(geo.reduced, strides, "q", wide));
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                        "the result and its fused consumers, at output coordinates");
  const int out_rank = static_cast<int>(r.type.shape.size());
  std::vector<std::string> run = {"fj::reduce_rows<" + std::to_string(group) + ", " + std::to_string(cfg.threads) +
                                      ", " + reduce_op(r.op) + ">(",
                                  "    kRows, kLen,", "[&](long long o) -> long long {"};
  if (columns)
    run = {"fj::reduce_columns<" + std::to_string(kColumnGroups) + ", " + reduce_op(r.op) + ">(", "    kInner, kLen,",
           "[&](long long o) -> long long {"};
  append(run, decompose_index("o", geo.kept_shape, "c", "long long"));
  run.push_back("return " + strided_sum(geo.kept, strides, "c", true) + ";");
  run.push_back("},");
  run.push_back("[&](long long b, int r) -> float {");
  append(run, decompose_index("r", geo.reduced_shape, "q", "int"));
  run.push_back("return " + element + ";");
  run.push_back("},");
  run.push_back("[&](long long o, float v) {");
  append(run, decompose_index("o", r.type.shape, "i", "long long"));
  run.push_back(post_call(post, geo.mean ? "v / (float)kLen" : "v", out_rank));
  run.push_back("});");
  if (columns)
    return finish_kernel(em, kp, run, {static_cast<unsigned>(column_blocks), 1, 1}, 32 * kColumnGroups);
  const unsigned grid = grid_for(geo.rows, cfg.threads / group, kIntMax);
  return finish_kernel(em, kp, run, {grid, 1, 1}, cfg.threads);
}

Expected<EmittedKernel> emit_softmax(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const int64_t dim = r.attr_int("dim");
  const int64_t len = xs[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < xs.size(); ++d) inner *= xs[d];
  const int64_t rows = numel(xs) / len;
  if (len > kIntMax) return Error("codegen: a softmax row longer than 2^31");
  const RowConfig& cfg = ctx.heur.row;
  int group = cfg.group_for(len);
  if (group > 32) group = cfg.threads;
  // Up to kMaxSoftmaxRegisters elements a thread: the row held in registers (read once).
  const int64_t per_thread = (len + group - 1) / group;
  const int64_t held = per_thread <= kMaxSoftmaxRegisters ? per_thread : 0;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root) + " of " + g.node(x).type.str() + " along dim " +
              std::to_string(dim) + ", " + std::to_string(group) + " threads per row" +
              (held ? ", " + std::to_string(held) + " elements a thread in registers" : "");
  s.constants.push_back({"kRows", rows, "rows"});
  s.constants.push_back({"kLen", len, "row length (dim " + std::to_string(dim) + ")"});
  s.constants.push_back({"kInner", inner, "stride of dim " + std::to_string(dim)});
  const std::string element = em.operand_at(x, "b + (long long)r * kInner");
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                        "the result and its fused consumers, at output coordinates");
  const int rank = static_cast<int>(xs.size());
  std::vector<std::string> run = {
      "fj::softmax_rows<" + std::to_string(group) + ", " + std::to_string(cfg.threads) + ", " +
          (r.op == OpKind::LogSoftmax ? "true" : "false") + ", " + std::to_string(held) + ">(",
      "    kRows, kLen,",
      "[&](long long o) -> long long { return (o / kInner) * ((long long)kLen * kInner) + o % kInner; },",
      "[&](long long b, int r) -> float { return " + element + "; },",
      "[&](long long o, long long b, int r, float v) {"};
  // (32-bit coordinate arithmetic where the tensor allows it: a 64-bit division per dim an element is not cheap)
  const std::string I = numel(xs) > kIntMax ? "long long" : "int";
  run.push_back("const " + I + " off = (" + I + ")(b + (long long)r * kInner);");
  append(run, decompose_index("off", xs, "i", I));
  run.push_back(post_call(post, "v", rank));
  run.push_back("});");
  const unsigned grid = grid_for(rows, cfg.threads / group, kIntMax);
  return finish_kernel(em, kp, run, {grid, 1, 1}, cfg.threads);
}

// Combines the per-tile partials the anchor epilogue stored for each row
// reduction over a wide N (one thread per row, all of them), then runs
// their consumers with the finished values in registers.
// A row-finish kernel with a wide stage: each block finishes a few rows
// (`inner`, one thread per row: the narrow region and its stores), keeps the
// finished values in shared memory, then computes the wide region over those
// rows' elements (the narrow region recomputed at the wide coordinates).
Expected<EmittedKernel> finish_kernel_wide(KernelEmitter& em, const KernelPlan& kp, const std::vector<ValueId>& finishes,
                                           const RowFinishLines& lines, const PointwiseConfig& cfg) {
  const PlanContext& ctx = em.ctx();
  const Shape& domain = kp.region.domain;
  const int64_t rows = numel(domain), len = row_broadcast_len(domain, kp.wide.domain);
  const int64_t per_block = std::clamp<int64_t>(kRowFinishWideElementsPerBlock / len, 1, cfg.threads);
  KernelSource& s = em.src();
  s.constants.push_back({"kRowLen", len, "elements of the wide stage per finished row"});
  s.constants.push_back({"kRowsPerBlock", per_block, "rows a block finishes, then broadcasts, at a time"});
  Region all = kp.wide;
  all.nodes = kp.region.nodes;
  all.nodes.insert(all.nodes.end(), kp.wide.nodes.begin(), kp.wide.nodes.end());
  const EpilogueTree tree = build_epilogue_tree(ctx, em.plan(), all, finishes, -1, true);
  RowLanes lanes = row_lanes(em, {&tree}, cfg);
  const WideRowsLoop wide = lanes.add(em, tree, "fj_wide", "the finished values broadcast over their rows, at wide coordinates");
  const unsigned grid = grid_for(rows, static_cast<int>(per_block), cfg.max_blocks);
  const bool big = (rows + static_cast<int64_t>(grid) * per_block) * len > kIntMax;
  const std::string I = big ? "long long" : "int";
  const std::string F = std::to_string(finishes.size());
  std::vector<std::string> out = lanes.setup(em);
  append(out, {"__shared__ float finished[" + F + "][kRowsPerBlock];",
               "for (" + I + " r0 = (" + I + ")blockIdx.x * kRowsPerBlock; r0 < kNumel; r0 += (" + I +
                   ")gridDim.x * kRowsPerBlock) {",
               "__syncthreads();  // the previous rows' readers are done"});
  append(out, finish_block_rows(em, lines, domain, per_block, cfg.threads, I, finishes));
  std::string args;
  for (size_t j = 0; j < finishes.size(); ++j)
    args += (args.empty() ? "" : ", ") + std::string("finished[") + std::to_string(j) + "][row]";
  out.push_back("__syncthreads();");
  out.push_back("const " + I + " count = (kNumel - r0 < kRowsPerBlock ? kNumel - r0 : kRowsPerBlock) * kRowLen;");
  append(out, wide.over_rows(kp.wide.domain, I, args));
  out.push_back("}");
  return finish_kernel(em, kp, out, {grid, 1, 1}, cfg.threads);
}

// A row-finish kernel that also reduces its finished rows to one value (its
// tail): its blocks (KernelPlan::across_blocks) finish the rows (`inner`),
// each thread folding its rows' values in order and each block its threads'
// in a fixed order; with one block thread 0 then runs the reduction's
// consumers, with more each block stores its fold and the last to finish
// (fj::last_block_of_grid) combines the folds in block order and runs them.
Expected<EmittedKernel> finish_kernel_across(KernelEmitter& em, const KernelPlan& kp,
                                             const std::vector<ValueId>& finishes, std::vector<std::string> inner,
                                             const PointwiseConfig& cfg) {
  const PlanContext& ctx = em.ctx();
  const FusedTail& tail = kp.tails[0];
  const Node& r = ctx.node(tail.op);
  const Shape& domain = kp.region.domain;
  const ValueId x = r.operands[0];
  std::string value;  // the value reduced, at the row's coordinates
  if (std::find(finishes.begin(), finishes.end(), x) != finishes.end()) {
    value = "v" + std::to_string(x);
  } else {
    std::string args;
    for (ValueId f : finishes) args += (args.empty() ? "" : ", ") + std::string("v") + std::to_string(f);
    const std::string fn = em.emit_tree(build_epilogue_tree(ctx, em.plan(), kp.region, finishes, x, false),
                                        "fj_across_value", "the value " + ctx.g.describe(tail.op) + " reduces");
    value = fn + "(p, " + args + (domain.empty() ? "" : ", " + coord_args(static_cast<int>(domain.size()))) + ")";
  }
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, em.plan(), tail.post, tail.op, -1, true),
                                        "fj_across_post", "the reduction over every row and its consumers");
  const int blocks = kp.across_blocks;
  const std::string I = numel(domain) + int64_t{blocks} * cfg.threads > kIntMax ? "long long" : "int";
  const std::string op = reduce_op(r.op);
  const std::string block_combine = "across = fj::group_combine<kThreads, kThreads>(across, [](float a, float b) { "
                                    "return " + op + "::combine(a, b); }, across_smem);";
  std::vector<std::string> out = {"__shared__ float across_smem[kThreads / 32];",
                                  "float across = " + op + "::identity();"};
  if (blocks == 1) {
    em.src().constants.push_back({"kThreads", cfg.threads, "one block finishes every row"});
    out.push_back("for (int e = threadIdx.x; e < kNumel; e += kThreads) {");
  } else {
    em.src().constants.push_back({"kThreads", cfg.threads, "threads of a block"});
    em.src().constants.push_back({"kBlocks", blocks, "blocks, each folding every kBlocks-th run of kThreads rows"});
    out.push_back("for (" + I + " e = (" + I + ")blockIdx.x * kThreads + threadIdx.x; e < kNumel; e += (" + I +
                  ")kBlocks * kThreads) {");
  }
  append(out, decompose_index("e", domain, "i", I));
  append(out, inner);
  out.push_back("across = " + op + "::combine(across, " + value + ");");
  out.push_back("}");
  out.push_back(block_combine);
  if (blocks > 1) {
    const std::string folds = em.buffer_param({BufferKind::Scratch, kp.across_folds}, true);
    append(out, {"if (threadIdx.x == 0) " + folds + "[blockIdx.x] = across;",
                 "if (!fj::last_block_of_grid(reinterpret_cast<int*>(" +
                     em.buffer_param({BufferKind::Scratch, kp.across_counter}, true) + "))) return;",
                 "across = " + op + "::identity();  // the blocks' folds, in block order",
                 "for (int b = threadIdx.x; b < kBlocks; b += kThreads) across = " + op + "::combine(across, __ldcg(" +
                     folds + " + b));",
                 block_combine});
  }
  out.push_back("if (threadIdx.x == 0) {");
  const int rank = static_cast<int>(r.type.shape.size());
  for (int d = 0; d < rank; ++d) out.push_back("const int i" + std::to_string(d) + " = 0;");
  out.push_back(post_call(post, r.op == OpKind::Mean ? "across / (float)kNumel" : "across", rank));
  out.push_back("}");
  return finish_kernel(em, kp, out, {static_cast<unsigned>(blocks), 1, 1}, cfg.threads);
}

Expected<EmittedKernel> emit_row_finish(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  if (op_category(g.node(kp.root).op) == OpCategory::Normalize) return emit_softmax_finish(ctx, plan, index);
  const std::vector<ValueId> finishes = kp.finishes.empty() ? std::vector<ValueId>{kp.root} : kp.finishes;
  const PartialBuffers& first = plan.partials.at(finishes[0]);
  const Shape& domain = kp.region.domain;
  const PointwiseConfig& cfg = ctx.heur.pointwise;
  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  std::string what;
  for (ValueId r : finishes) what += (what.empty() ? "" : ", ") + g.describe(r);
  s.comment = kp.name + ": finishes " + what + " from " + std::to_string(first.tiles) + " per-tile partials per row";
  s.constants.push_back({"kNumel", first.rows, "rows"});
  s.constants.push_back({"kTiles", first.tiles, "partials per row: the anchor's column (or pixel) tiles"});
  s.constants.push_back({"kReduced", first.reduced, "elements reduced per row"});
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, finishes, -1, true), "fj_post",
                                        "the results and their fused consumers, at output coordinates");
  const std::string at = "(long long)t * kNumel + e";
  // `const float v<r> = fj::<combine><Op<targs>>(<head>[&](int t) { sums }, [&](int t) { maxima }<tail>)`, one per finish.
  auto combine_lines = [&](const std::string& combine, const std::string& targs, const std::string& head,
                           const std::string& tail) {
    std::vector<std::string> lines;
    for (ValueId r : finishes) {
      const PartialBuffers& pb = plan.partials.at(r);
      const OpKind op = g.node(r).op;
      const std::string sums = em.buffer_param({BufferKind::Scratch, pb.sums}, false);
      const std::string maxima = pb.maxima >= 0 ? em.buffer_param({BufferKind::Scratch, pb.maxima}, false) : "";
      lines.push_back("const float v" + std::to_string(r) + " = fj::" + combine + "<" + reduce_op(op) + targs + ">(" + head +
                      "[&](int t) { return " + sums + "[" + at + "]; },");
      lines.push_back("    [&](int t) { return " + (maxima.empty() ? std::string("0.f") : maxima + "[" + at + "]") +
                      "; }" + tail + ")" + (op == OpKind::Mean || op == OpKind::GlobalAvgPool ? " / (float)kReduced;" : ";"));
    }
    return lines;
  };
  std::string args;
  for (ValueId r : finishes) args += (args.empty() ? "" : ", ") + std::string("v") + std::to_string(r);
  if (kp.tails.empty() && kp.wide.nodes.empty() && first.tiles >= kMinTilesPerRowToSplit) {
    // Many tiles per row: 32 rows a block, the tiles spread over its warps
    // (fj::combine_partials_block), so that a few hundred rows still fill the GPU.
    s.constants.push_back({"kWarps", cfg.threads / 32, "warps of a block, each folding every kWarps-th tile of its 32 rows"});
    const unsigned grid = grid_for(first.rows, 32, cfg.max_blocks);
    const std::string I = first.rows + static_cast<int64_t>(grid) * 32 > kIntMax ? "long long" : "int";
    std::vector<std::string> out = {
        "__shared__ float finish_smem[2 * kWarps * 32];",
        "for (" + I + " r0 = (" + I + ")blockIdx.x * 32; r0 < kNumel; r0 += (" + I + ")gridDim.x * 32) {",
        "const " + I + " e = r0 + threadIdx.x % 32;", "const bool row_ok = e < kNumel;"};
    append(out, combine_lines("combine_partials_block", ", kTiles, kWarps", "row_ok, ", ", finish_smem"));
    out.push_back("if (threadIdx.x < 32 && row_ok) {");
    append(out, decompose_index("e", domain, "i", I));
    out.push_back(post_call(post, args, static_cast<int>(domain.size())));
    out.push_back("}");
    out.push_back("}");
    return finish_kernel(em, kp, out, {grid, 1, 1}, cfg.threads);
  }
  // Atomic sums (pass_spatial_atomics.cpp): read once a row, then zeroed for the next launch.
  std::vector<std::string> zero_sums;
  for (ValueId r : finishes)
    if (const PartialBuffers& pb = plan.partials.at(r); pb.atomic)
      zero_sums.push_back(em.buffer_param({BufferKind::Scratch, pb.sums}, true) + "[e] = 0.f;");
  RowFinishLines lines;
  lines.tiles = first.tiles;
  lines.by_thread = combine_lines("combine_partials", ", kTiles", "", "");
  lines.by_block = combine_lines("combine_partials_spread", ", kTiles, kFinishThreads", "", ", combine_smem");
  lines.rest = zero_sums;
  lines.rest.push_back(post_call(post, args, static_cast<int>(domain.size())));
  if (!kp.row_stages.empty()) return finish_kernel_row_stages(em, kp, finishes, lines, cfg);
  if (!kp.wide.nodes.empty())
    return kp.wide_columns ? finish_kernel_columns(em, kp, finishes, lines, cfg)
                           : finish_kernel_wide(em, kp, finishes, lines, cfg);
  std::vector<std::string> inner = lines.by_thread;
  append(inner, lines.rest);
  if (!kp.tails.empty()) return finish_kernel_across(em, kp, finishes, std::move(inner), cfg);
  const unsigned grid = grid_for(first.rows, cfg.threads, cfg.max_blocks);
  return finish_kernel(em, kp, element_loop(domain, cfg.threads, grid, inner), {grid, 1, 1}, cfg.threads);
}

}  // namespace

Expected<EmittedKernel> finish_kernel(KernelEmitter& em, const KernelPlan& kp, std::vector<std::string> run,
                                      std::array<unsigned, 3> grid, int threads) {
  KernelSource& s = em.src();
  CudaFunction fn;
  fn.prefix = "__device__ __forceinline__ void";
  fn.name = "run";
  fn.params = "const Params& p";
  fn.body = std::move(run);
  s.functions.push_back(fn);
  EmittedKernel out;
  out.launch.kernel = kp.name;
  out.launch.grid = grid;
  out.launch.block = {static_cast<unsigned>(threads), 1, 1};
  out.launch.args = em.finish(kp.name, threads, {s.ns + "::run(p);"});
  out.source = std::move(em.src());
  return out;
}

Expected<EmittedKernel> emit_fallback_kernel(const PlanContext& ctx, const Plan& plan, int index) {
  switch (plan.kernels[static_cast<size_t>(index)].kind) {
    case KernelKind::Pointwise: return emit_pointwise(ctx, plan, index);  // emit_pointwise.cpp
    case KernelKind::Reduce: return emit_reduce(ctx, plan, index);
    case KernelKind::Softmax: return emit_softmax(ctx, plan, index);
    case KernelKind::Pool2d:
    case KernelKind::Pool1d: return emit_pool(ctx, plan, index);
    case KernelKind::RowFinish: return emit_row_finish(ctx, plan, index);
    case KernelKind::Norm: return emit_norm(ctx, plan, index);
    case KernelKind::Gather: return emit_gather(ctx, plan, index);
    case KernelKind::Anchor: break;
  }
  return Error("codegen: internal error: anchor kernel passed to the fallback emitter");
}

}  // namespace fusejit::cg
