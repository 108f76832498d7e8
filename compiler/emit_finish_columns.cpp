// A row-finish kernel whose wide stage repeats its finished values along the
// leading dims (KernelPlan::wide_columns: `h - mean(h, 0)`, each finished
// value a column of the wide domain). Blocks form a grid of column ranges
// (x: kRowsPerBlock finished values, finish_block_rows' name for them) and
// row ranges (y: kWideRowsPerBlock rows of the wide domain). Each block finishes its columns into shared memory (from
// the per-tile partials, as finish_block_rows does for rows; only the blocks
// of the first row range store the finished values' narrow outputs), then
// runs the wide region over its rows, consecutive threads on consecutive
// columns. Every row range re-reads its columns' partials: rows per block
// are at least twice the partials per column, so that costs at most half
// the wide stage's own reads.
#include <algorithm>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"
#include "compiler/epilogue_tree.h"

namespace fusejit::cg {

Expected<EmittedKernel> finish_kernel_columns(KernelEmitter& em, const KernelPlan& kp,
                                              const std::vector<ValueId>& finishes, const RowFinishLines& lines,
                                              const PointwiseConfig& cfg) {
  const PlanContext& ctx = em.ctx();
  const Shape& domain = kp.region.domain;
  const Shape& wide = kp.wide.domain;
  const int64_t cols = numel(domain), rows = column_broadcast_rows(domain, wide);
  if (rows == 0) return Error("codegen: internal error: " + shape_str(domain) + " is not a column of " + shape_str(wide));
  const int64_t cols_per_block = std::min<int64_t>((cols + 31) / 32 * 32, cfg.threads);
  int64_t rows_per_block = std::max<int64_t>(kRowFinishWideElementsPerBlock / cols_per_block, 2 * lines.tiles);
  rows_per_block = std::min(std::max<int64_t>(rows_per_block, (rows + 65534) / 65535), rows);  // grid.y <= 65535
  const unsigned grid_x = grid_for(cols, static_cast<int>(cols_per_block), 65535);
  const unsigned grid_y = grid_for(rows, static_cast<int>(rows_per_block), 65535);
  if (int64_t{grid_x} * cols_per_block < cols)
    return Error("codegen: " + std::to_string(cols) + " finished columns need more than 65535 blocks");
  KernelSource& s = em.src();
  s.constants.push_back({"kRowsPerBlock", cols_per_block, "finished values (columns of the wide stage) a block takes"});
  s.constants.push_back({"kWideRows", rows, "rows of the wide stage: its elements over its last dim"});
  s.constants.push_back({"kWideRowsPerBlock", rows_per_block, "rows of the wide stage a block takes"});
  Region all = kp.wide;
  all.nodes = kp.region.nodes;
  all.nodes.insert(all.nodes.end(), kp.wide.nodes.begin(), kp.wide.nodes.end());
  const std::string fn = em.emit_tree(build_epilogue_tree(ctx, em.plan(), all, finishes, -1, true), "fj_wide",
                                      "the finished values broadcast over the rows, at wide coordinates");
  const bool big = numel(wide) + int64_t{cfg.threads} > kIntMax;
  const std::string I = big ? "long long" : "int";
  // The narrow stores once: by the blocks of the first row range.
  RowFinishLines once = lines;
  once.rest = {"if (blockIdx.y == 0) {"};
  append(once.rest, lines.rest);
  once.rest.push_back("}");
  const std::string F = std::to_string(finishes.size());
  std::vector<std::string> out = {"__shared__ float finished[" + F + "][kRowsPerBlock];",
                                  "const " + I + " r0 = (" + I + ")blockIdx.x * kRowsPerBlock;  // first column"};
  append(out, finish_block_rows(em, once, domain, cols_per_block, cfg.threads, I, finishes));
  std::string args;
  for (size_t j = 0; j < finishes.size(); ++j)
    args += (args.empty() ? "" : ", ") + std::string("finished[") + std::to_string(j) + "][row]";
  append(out, {"__syncthreads();",
               "const int cols = (int)(kNumel - r0 < kRowsPerBlock ? kNumel - r0 : kRowsPerBlock);",
               "const " + I + " m0 = (" + I + ")blockIdx.y * kWideRowsPerBlock;",
               "const " + I + " count = (kWideRows - m0 < kWideRowsPerBlock ? kWideRows - m0 : kWideRowsPerBlock) * cols;",
               "for (" + I + " q = threadIdx.x; q < count; q += blockDim.x) {",
               "const int row = (int)(q % cols);  // the column: its finished values",
               "const " + I + " e = (m0 + q / cols) * (" + I + ")kNumel + r0 + row;"});
  append(out, decompose_index("e", wide, "i", I));
  out.push_back(post_call(fn, args, static_cast<int>(wide.size())));
  out.push_back("}");
  return finish_kernel(em, kp, out, {grid_x, grid_y, 1}, cfg.threads);
}

}  // namespace fusejit::cg
