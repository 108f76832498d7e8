// A row-finish kernel with row stages (KernelPlan::row_stages): each block
// finishes a few rows (one thread a row), then for each stage a warp a row
// (or, with fewer rows than warps in the block, the whole block a row)
// reduces the value the stage reduces along the row's wide elements (the
// narrow and wide regions, and the earlier stages' consumers, recomputed at
// those coordinates), and last the block goes over the rows' elements once
// more for the last stage's consumers and their stores.
#include <algorithm>
#include <limits>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"
#include "compiler/epilogue_tree.h"

namespace fusejit::cg {
namespace {

std::string combine_op(OpKind op) {
  return op == OpKind::Max ? "fj::MaxOp" : op == OpKind::Min ? "fj::MinOp" : "fj::SumOp";
}

}  // namespace

Expected<EmittedKernel> finish_kernel_row_stages(KernelEmitter& em, const KernelPlan& kp,
                                                 const std::vector<ValueId>& finishes, const RowFinishLines& lines,
                                                 const PointwiseConfig& cfg) {
  const PlanContext& ctx = em.ctx();
  const Graph& g = ctx.g;
  const Shape& domain = kp.region.domain;
  const Shape& wide = kp.wide.domain;
  const int64_t rows = numel(domain), len = row_broadcast_len(domain, wide);
  const int64_t per_block = std::clamp<int64_t>(kRowFinishWideElementsPerBlock / len, 1, cfg.threads);
  if (len > kIntMax) return Error("codegen: a row of more than 2^31 elements");
  KernelSource& s = em.src();
  s.constants.push_back({"kRowLen", len, "elements of a finished row's wide stage"});
  s.constants.push_back({"kRowsPerBlock", per_block, "rows a block finishes, then reduces and broadcasts, at a time"});
  const bool block_rows = per_block < cfg.threads / 32;  // long rows: the whole block reduces each
  s.constants.push_back({"kWarps", cfg.threads / 32, block_rows ? "warps of a block" : "warps of a block, a row each at a time"});
  if (block_rows) s.constants.push_back({"kThreads", cfg.threads, "threads of a block, all on one row at a time"});
  const int wide_rank = static_cast<int>(wide.size());
  const unsigned grid = grid_for(rows, static_cast<int>(per_block), cfg.max_blocks);
  const bool big = (rows + static_cast<int64_t>(grid) * per_block) * len > kIntMax;
  const std::string I = big ? "long long" : "int";
  const std::string F = std::to_string(finishes.size()), S = std::to_string(kp.row_stages.size());

  // One tree a stage: what it reduces (stores: the previous stage's consumers'), then the last consumers.
  Region region;
  region.domain = wide;
  region.nodes = kp.region.nodes;
  region.nodes.insert(region.nodes.end(), kp.wide.nodes.begin(), kp.wide.nodes.end());
  std::vector<ValueId> sources = finishes;
  std::string args;  // the trees' source values: finished[j][row], then row_values[k][row]
  for (size_t j = 0; j < finishes.size(); ++j) args += (j ? ", " : "") + std::string("finished[") + std::to_string(j) + "][row]";
  std::vector<std::string> out = {
      "__shared__ float finished[" + F + "][kRowsPerBlock];",
      "__shared__ float row_values[" + S + "][kRowsPerBlock];",
      "for (" + I + " r0 = (" + I + ")blockIdx.x * kRowsPerBlock; r0 < kNumel; r0 += (" + I +
          ")gridDim.x * kRowsPerBlock) {",
      "__syncthreads();  // the previous rows' readers are done"};
  if (block_rows) out.insert(out.begin() + 2, "__shared__ float stage_smem[kWarps];  // the block's reductions");
  append(out, finish_block_rows(em, lines, domain, per_block, cfg.threads, I, finishes));
  out.push_back("__syncthreads();");
  out.push_back("const int rows_here = (int)(kNumel - r0 < kRowsPerBlock ? kNumel - r0 : kRowsPerBlock);");
  // The trees first (each stage's reduced value, with the stores due at wide coordinates; then the last
  // consumers), so that they share one lane count.
  std::vector<EpilogueTree> trees;
  std::vector<ValueId> stored = kp.wide.stores;  // what the next tree stores at wide coordinates
  std::vector<std::vector<ValueId>> stage_sources;  // each stage's trees' sources
  for (const FusedTail& stage : kp.row_stages) {
    Region at = region;
    at.stores = stored;
    trees.push_back(build_epilogue_tree(ctx, em.plan(), at, sources, g.node(stage.op).operands[0], true));
    stage_sources.push_back(sources);
    sources.push_back(stage.op);
    region.nodes.insert(region.nodes.end(), stage.post.nodes.begin(), stage.post.nodes.end());
    stored = row_stage_wide_stores(g, stage);
  }
  Region last = region;
  last.stores = stored;
  trees.push_back(build_epilogue_tree(ctx, em.plan(), last, sources, -1, true));
  std::vector<const EpilogueTree*> all;
  for (const EpilogueTree& t : trees) all.push_back(&t);
  RowLanes lanes = row_lanes(em, all, cfg);

  for (size_t i = 0; i < kp.row_stages.size(); ++i) {
    const FusedTail& stage = kp.row_stages[i];
    const Node& r = g.node(stage.op);
    const bool stores = std::any_of(trees[i].nodes.begin(), trees[i].nodes.end(),
                                    [](const EpiNode& n) { return n.kind == EpiNode::Kind::Store; });
    const WideRowsLoop fns = lanes.add(em, trees[i], "fj_stage" + std::to_string(i),
                                       "the value " + g.describe(stage.op) + " reduces along its row, at wide coordinates" +
                                           (stores ? ", and the stores due there" : ""));
    const std::string op = combine_op(r.op);
    const std::string step = block_rows ? "kThreads" : "32", first = block_rows ? "threadIdx.x" : "threadIdx.x % 32";
    // the row's elements from q on, `lanes` a time (kLanes or 1): fn's values into acc
    auto reduce_loop = [&](const std::string& lanes_factor, const std::string& fn, bool by_lanes) {
      std::vector<std::string> loop = {"for (int q = " + first + lanes_factor + "; q < kRowLen; q += " + step +
                                           lanes_factor + ") {",
                                       "const " + I + " e = (r0 + row) * (" + I + ")kRowLen + q;"};
      append(loop, decompose_index("e", wide, "i", I));
      if (by_lanes) {
        loop.push_back("float lane_values[kLanes];");
        loop.push_back(fn + "(p, " + args + ", " + coord_args(wide_rank) + ", lane_values);");
        loop.push_back("for (int l = 0; l < kLanes; ++l) acc = " + op + "::combine(acc, lane_values[l]);");
      } else {
        loop.push_back("acc = " + op + "::combine(acc, " + fn + "(p, " + args + ", " + coord_args(wide_rank) + "));");
      }
      loop.push_back("}");
      return loop;
    };
    append(out, {block_rows ? "for (int row = 0; row < rows_here; ++row) {"
                            : "for (int row = threadIdx.x / 32; row < rows_here; row += kWarps) {",
                 "float acc = " + op + "::identity();"});
    if (fns.lanes_fn.empty()) {
      append(out, reduce_loop("", fns.fn, false));
    } else {
      out.push_back("if (lanes_ok) {");
      append(out, reduce_loop(" * kLanes", fns.lanes_fn, true));
      out.push_back("} else {");
      append(out, reduce_loop("", fns.fn, false));
      out.push_back("}");
    }
    out.push_back(std::string("acc = fj::group_combine<") + (block_rows ? "kThreads, kThreads" : "32, 32") +
                  ">(acc, [](float a, float b) { return " + op + "::combine(a, b); }, " +
                  (block_rows ? "stage_smem" : "nullptr") + ");");
    out.push_back(block_rows ? "if (threadIdx.x == 0) {" : "if (threadIdx.x % 32 == 0) {");
    out.push_back("row_values[" + std::to_string(i) + "][row] = acc" +
                  (r.op == OpKind::Mean ? " / (float)kRowLen;" : ";"));
    if (const Region rows_region = row_stage_row_stores(g, kp, i); !rows_region.stores.empty()) {
      // outputs, or read by another kernel: once a row, from the row's values
      std::vector<ValueId> row_sources = stage_sources[i];
      row_sources.push_back(stage.op);
      const std::string store = em.emit_tree(build_epilogue_tree(ctx, em.plan(), rows_region, row_sources, -1, true),
                                             "fj_stage" + std::to_string(i) + "_rows",
                                             "stage " + std::to_string(i) + "'s row values stored at row coordinates");
      append(out, {"const " + I + " e = r0 + row;"});
      append(out, decompose_index("e", domain, "i", I));
      out.push_back(post_call(store, args + ", row_values[" + std::to_string(i) + "][row]",
                              static_cast<int>(domain.size())));
    }
    out.push_back("}");
    out.push_back("}");
    out.push_back("__syncthreads();");
    args += ", row_values[" + std::to_string(i) + "][row]";
  }
  const WideRowsLoop final_pass =
      lanes.add(em, trees.back(), "fj_wide", "the last stage's consumers and their stores, at wide coordinates");
  const std::vector<std::string> setup = lanes.setup(em);
  out.insert(out.begin(), setup.begin(), setup.end());
  out.push_back("const " + I + " count = (" + I + ")rows_here * kRowLen;");
  append(out, final_pass.over_rows(wide, I, args));
  out.push_back("}");
  return finish_kernel(em, kp, out, {grid, 1, 1}, cfg.threads);
}

}  // namespace fusejit::cg
