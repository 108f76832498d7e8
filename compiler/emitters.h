// compiler/emitters.h — one emitter per kernel kind; each turns a planned
// kernel into its KernelSource and LaunchSpec.
#pragma once

#include <optional>

#include "compiler/cuda_source.h"
#include "compiler/epilogue_tree.h"
#include "compiler/plan.h"

namespace fusejit::cg {

struct EmittedKernel {
  KernelSource source;
  LaunchSpec launch;
};

class KernelEmitter;  // emit_common.h

// emit_fallback.cpp: wraps `run` (the body of the kernel's `run(p)`) into the
// kernel and its launch: `grid` blocks of `threads` threads.
Expected<EmittedKernel> finish_kernel(KernelEmitter& em, const KernelPlan& kp, std::vector<std::string> run,
                                      std::array<unsigned, 3> grid, int threads);

// emit_anchor.cpp: linear / matmul / conv2d mainloop with its epilogue,
// fused pool or fused row reductions.
Expected<EmittedKernel> emit_anchor_kernel(const PlanContext& ctx, const Plan& plan, int index);

// emit_operand_staging.cpp: whether the anchor kernel `kp` reads its
// operands' TF32 residuals (wgmma f32x3) or an fp32 B transposed (wgmma
// matmul), and the kernel that writes them, launched before it.
bool needs_tf32_split(const KernelPlan& kp);
bool needs_operand_staging(const KernelPlan& kp);
Expected<EmittedKernel> emit_operand_staging_kernel(const PlanContext& ctx, const Plan& plan, int anchor);

// emit_transpose.cpp: a pointwise kernel that only copies one tensor read at
// swapped coordinates, its contiguous dim along domain dim `load_dim` (not
// the last): a tiled transpose through shared memory (both sides coalesced).
struct TransposeTile {
  int load_dim = -1;
};
std::optional<TransposeTile> transpose_tile(const PlanContext& ctx, const Plan& plan, int index);
Expected<EmittedKernel> emit_tiled_transpose(const PlanContext& ctx, const Plan& plan, int index,
                                             const TransposeTile& tile);

// emit_pointwise.cpp: a pointwise kernel (a tiled transpose where it only
// copies a transposed tensor, emit_transpose.cpp).
Expected<EmittedKernel> emit_pointwise(const PlanContext& ctx, const Plan& plan, int index);

// emit_norm_pool.cpp: a group / instance / layer norm kernel (and a pool or
// reduction of its result, KernelPlan::tails); a 2-D / 1-D pool kernel.
Expected<EmittedKernel> emit_norm(const PlanContext& ctx, const Plan& plan, int index);
Expected<EmittedKernel> emit_pool(const PlanContext& ctx, const Plan& plan, int index);

// emit_fallback.cpp: pointwise, reduction, softmax, norm and pool kernels.
Expected<EmittedKernel> emit_fallback_kernel(const PlanContext& ctx, const Plan& plan, int index);
// Helpers of the fallback emitters: blocks for `work` items, `per_block` a
// block, at most `cap`; a grid-stride loop over the elements of `domain`
// running `inner` with coordinates i0..i<R-1> (and the flat index e) in
// scope; the call of a region function `fn` for `value` at those coordinates.
unsigned grid_for(int64_t work, int per_block, int64_t cap);
std::vector<std::string> element_loop(const Shape& domain, int threads, unsigned grid,
                                      const std::vector<std::string>& inner);
std::string post_call(const std::string& fn, const std::string& value, int rank);
// The trees a row-finish kernel runs over its rows' wide elements, each as
// `fn` at an element and, where the trees allow one lane count they share
// (RowLanes), `lanes_fn` at kLanes consecutive elements of a row (vector
// loads and stores), taken where the run-time alignment check `lanes_ok`
// (RowLanes::setup, before the rows' loop) passes.
struct WideRowsLoop {
  std::string fn, lanes_fn;
  // The loop over the `count` elements of rows r0.. (kRowLen each; the block's threads in turn), calling the
  // functions with `args` (the finished values of element q's row) and the element's coordinates in `wide`.
  std::vector<std::string> over_rows(const Shape& wide, const std::string& I, const std::string& args) const;
};
struct RowLanes {
  int lanes = 1;                    // shared by every tree (1: none)
  std::vector<BufferRef> buffers;   // accessed whole lanes at a time, by any tree
  bool any = false;                 // a tree has a lanes_fn
  // fn and lanes_fn of `tree` (a tree emit_lanes declines keeps fn alone).
  WideRowsLoop add(KernelEmitter& em, const EpilogueTree& tree, const std::string& name, const std::string& comment);
  // kLanes and `const bool lanes_ok = ...;`, once every tree is added (nothing where no tree has lanes).
  std::vector<std::string> setup(KernelEmitter& em) const;
};
// The lane count `trees` share (PointwiseConfig::lanes; 1 where any takes none).
RowLanes row_lanes(const KernelEmitter& em, const std::vector<const EpilogueTree*>& trees, const PointwiseConfig& cfg);
// How a row-finish kernel finishes row `e` (emit_fallback.cpp): the
// statements that define v<r> for each finished reduction r from its
// partials, by one thread (by_thread) or by every thread of the block
// together (by_block: with many tiles a row), then the row's stores (rest,
// coordinates i.. in scope), one thread.
struct RowFinishLines {
  std::vector<std::string> by_thread, by_block, rest;
  int64_t tiles = 0;
};
// The statements, inside a block's loop over its rows r0 .. r0 +
// kRowsPerBlock - 1, that finish those rows into finished[j][row] (j: the
// finishes' order): a thread a row, or the whole block on each row in turn
// where the rows have many tiles and the block few rows.
std::vector<std::string> finish_block_rows(KernelEmitter& em, const RowFinishLines& lines, const Shape& domain,
                                           int64_t per_block, int threads, const std::string& I,
                                           const std::vector<ValueId>& finishes);
// A row-finish kernel whose wide stage takes its finished values as columns
// (KernelPlan::wide_columns; emit_finish_columns.cpp).
Expected<EmittedKernel> finish_kernel_columns(KernelEmitter& em, const KernelPlan& kp,
                                              const std::vector<ValueId>& finishes, const RowFinishLines& lines,
                                              const PointwiseConfig& cfg);
// A row-finish kernel with row stages (emit_row_stages.cpp).
Expected<EmittedKernel> finish_kernel_row_stages(KernelEmitter& em, const KernelPlan& kp,
                                                 const std::vector<ValueId>& finishes, const RowFinishLines& lines,
                                                 const PointwiseConfig& cfg);

// emit_softmax_finish.cpp: the RowFinish kernel of a softmax fused in parts.
Expected<EmittedKernel> emit_softmax_finish(const PlanContext& ctx, const Plan& plan, int index);

// emit_gather.cpp: flip, im2col, insert_zeros, the pools' backward and their
// adjoints, one thread an output element, the fused consumers applied before
// the store.
Expected<EmittedKernel> emit_gather(const PlanContext& ctx, const Plan& plan, int index);

// A readable kernel name: fj_conv2d_k3_relu_add_maxpool4, fj_softmax_7, ...
// (`index`: the kernel's place in the plan, -1 if unknown).
std::string kernel_base_name(const PlanContext& ctx, const KernelPlan& kp, int index = -1);
// Sets every KernelPlan::name: its base name, made unique by its index.
void name_kernels(const PlanContext& ctx, Plan& plan);

}  // namespace fusejit::cg
