// compiler/passes.h — the planning passes, one per file, run in this order by
// generate_program (codegen.cpp). Each reads and extends the Plan.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>

#include "compiler/plan.h"

namespace fusejit::cg {

// pass_leaf_exprs.cpp: marks inputs, constants and elementwise nodes computed
// from those alone. They are recomputed wherever needed (loads by broadcast
// index), never given a kernel of their own unless something needs them in
// memory.
void mark_leaf_exprs(PlanContext& ctx);

// pass_anchor_epilogue.cpp: the anchor kernel, with every elementwise node of
// the anchor's output shape that can be computed in its epilogue.
Status plan_anchor_kernel(PlanContext& ctx, Plan& plan);
// Transposes of the linear / matmul epilogue's values, stored by it at swapped
// coordinates (pass_epilogue_transpose.cpp).
void store_epilogue_transposes(PlanContext& ctx, Plan& plan);

// pass_mainloop.cpp: the anchor's mainloop (SIMT FFMA or sm_90a wgmma) and
// its precision kind, with a note saying why.
Status choose_mainloop(PlanContext& ctx, Plan& plan);

// pass_fuse_pool.cpp: moves a max/avg pool (kernel == stride, no padding,
// floor mode) into the conv epilogue when the epilogue's only consumer is
// that pool, with the pool's elementwise consumers.
void fuse_pool(PlanContext& ctx, Plan& plan);

// pass_fuse_pool1d.cpp: moves max/avg pool1d along a linear's / matmul's N
// into the epilogue when the pools are the epilogue's only consumers and no
// row reduction took the tile. One pool with kernel == stride, no padding,
// floor mode: tiles of whole windows, where the backend's check allows (a
// reason if not, else ""). Otherwise (several pools, overlapping or padded
// windows; `overlapping_tiles`, the CUDA backend): column tiles that overlap
// by the widest window's span (KernelPlan::pool1d_overlap). `prefix` starts
// its plan notes.
using Pool1dWindowCheck = std::function<std::string(int64_t kernel)>;
void fuse_pool1d(PlanContext& ctx, Plan& plan, const Pool1dWindowCheck& window_blocker, const std::string& prefix,
                 bool overlapping_tiles = false);
// The largest column overlap (a window's span) that overlapping tiles take: every tile is at least 16 columns wide.
constexpr int64_t kMaxPool1dOverlap = 7;

// pass_fuse_reduction.cpp: moves reductions along the anchor's N (linear and
// matmul: the last dim; conv: the channels) into the epilogue when one tile
// spans N, with their elementwise consumers.
void fuse_row_reductions(PlanContext& ctx, Plan& plan);
// The widest tile the anchor's mainloop (or the config) allows: a row
// reduction or softmax spanning more columns is finished from per-tile partials.
int64_t max_epilogue_cols(const PlanContext& ctx, const KernelPlan& kp);

// pass_fuse_row_broadcast.cpp (row_broadcast=1, wgmma linear / matmul): the
// consumers over the anchor's domain of its whole-row reduction (`h - max(h)`)
// into KernelPlan::wide, run on the accumulators once the rows are reduced.
void fuse_row_broadcast(PlanContext& ctx, Plan& plan);
// The same where N spans 2 to 8 column tiles (after choose_anchor_tile): the
// partial reduction finished across a cluster of that many blocks
// (WgmmaConfig::cluster_n, wgmma_row_cluster.cuh), no row-finish kernel.
void fuse_row_cluster(PlanContext& ctx, Plan& plan);
// The cluster tile for a row statistic over N (2 to 8 column tiles, cooperative, cluster_n set), or nullopt with
// why_not: the configured tile, else the narrowest that 8 blocks span, wider while the grid still fills the SMs.
std::optional<WgmmaConfig> cluster_row_tile(const PlanContext& ctx, const KernelPlan& kp, std::string& why_not);

// pass_fuse_softmax.cpp: softmax / log_softmax along a linear's or matmul's
// N into the epilogue: whole when one tile spans N; else the epilogue stores
// exp(y - the tile's row max) and per-tile partials, and a RowFinish kernel
// scales each element in place (no fp32 copy of y, no second row pass);
// that wide form only with softmax_parts=1. CUDA only (the CPU backend runs a row kernel).
void fuse_row_softmax(PlanContext& ctx, Plan& plan);
// row_cluster=1 (after choose_anchor_tile): a softmax in parts whose N 2 to 8 column tiles span finished whole
// across a cluster of that many blocks (fj::tile_row_softmax_cluster); else back to the row kernel (or the parts
// with softmax_parts=1).
void fuse_softmax_cluster(PlanContext& ctx, Plan& plan);
// pass_fuse_norm_epilogue.cpp (after choose_anchor_tile; norm_epilogue=0 turns it off): a group_norm / layer_norm over a wgmma
// linear's or matmul's [M, N] output whose groups lie in one column tile, done on the accumulators
// (fj::tile_segment_norm) with its consumers: no norm kernel, the output not stored for one.
void fuse_norm_epilogue(PlanContext& ctx, Plan& plan);

// pass_fuse_spatial.cpp: a reduction over a conv's output pixels
// (global_avg_pool; sum, mean, max, min over dims [2, 3]) or over every row of
// a linear / matmul ([M, N] -> [N]) as per-tile, per-column partials from the
// epilogue (tiles of one image's pixels, or of the rows) and a RowFinish
// kernel, when it is the epilogue's only consumer.
void fuse_spatial_reduction(PlanContext& ctx, Plan& plan);
// The dims such a reduction takes: [2, 3] (conv2d), all but the last (linear,
// matmul), none for other anchors.
std::vector<int64_t> gemm_row_dims(const PlanContext& ctx, ValueId anchor);
// pass_spatial_atomics.cpp (after plan_fallback_kernels): those partials of a sum / mean / global_avg_pool added
// atomically into one f32 per (image, channel) where the finish kernel reads each once (atomic_partials=1).
void sum_spatial_partials_atomically(PlanContext& ctx, Plan& plan);
// pass_spatial_cluster.cpp (after choose_anchor_tile; sm_90, spatial_cluster != 0): that reduction finished in the
// halo-patch conv kernel by a cluster of blocks over each image's tiles; no partials, no finish kernel.
void finish_spatial_in_clusters(PlanContext& ctx, Plan& plan);

// pass_schedule.cpp: picks the anchor's tile (heuristics or override) to
// suit the fused tails.
Status choose_anchor_tile(PlanContext& ctx, Plan& plan);
// The mma.sync tile's heuristic (before split-K), and `tile` with split-K
// where the tiles would leave most SMs idle (or split_k= in the config);
// wgrad_nhwc: a dW reading x in NHWC (KernelPlan::wgrad_nhwc).
MmaConfig default_mma_tile(const AnchorGeometry& geo, int64_t min_bn);
// pass_schedule_mma.cpp: the mma.sync anchor's tile (choose_anchor_tile's Mma case).
Status choose_mma_tile(PlanContext& ctx, KernelPlan& kp, const AnchorGeometry& geo);
// pass_schedule_gemv.cpp: why the GEMV loop cannot run the anchor ("" if it can), and its tile and split-K.
inline constexpr int64_t kMaxGemvRows = 32;
std::string gemv_blocker(const PlanContext& ctx, const KernelPlan& kp, const AnchorGeometry& geo);
TileConfig gemv_tile(const PlanContext& ctx, const AnchorGeometry& geo);
// Shared by the schedule passes: ceil(a / b); the first of `options` at least `extent` (else the last); the
// most splits a K of `k_tiles` k-tiles may take.
int64_t ceil_div(int64_t a, int64_t b);
int cover(int64_t extent, std::initializer_list<int> options);
int64_t max_split_k(int64_t k_tiles);
MmaConfig with_split_k(const PlanContext& ctx, const AnchorGeometry& geo, const std::string& mma_kind,
                       int64_t min_bn, MmaConfig tile, bool wgrad_nhwc = false);

// pass_fallback.cpp: every node not yet placed gets a kernel: pointwise groups
// over materialized tensors, row kernels for reductions and softmax, window
// kernels for pools; elementwise consumers fuse into their stores.
Status plan_fallback_kernels(PlanContext& ctx, Plan& plan);

// pass_buffers.cpp: what each kernel stores (outputs, and values another
// kernel reads) and the scratch buffers for intermediates.
void assign_buffers(PlanContext& ctx, Plan& plan);

// pass_tma_store.cpp: a wgmma anchor's pointwise epilogue writes its outputs
// (anchor-shaped, rows TMA can write) through shared-memory tiles and TMA bulk
// stores, which overlap the next tile's mainloop; the ring gives up stages
// (down to 3) to make room. Sets KernelPlan::tma_stores, or a note why not.
void choose_tma_stores(PlanContext& ctx, Plan& plan);
// Columns per TMA store chunk of a tile bn wide: 128 bytes (swizzled), else
// 96 to 112 bytes unswizzled where such chunks split the tile; 0: none.
int tma_store_chunk_cols(int bn, int elem_bytes);
// Epilogue ops a few instructions long (relu, clamp, +, *, ...): the wgmma
// epilogue's defaults (TMA stores, 2-block clusters) are measured on those.
bool cheap_epilogue_op(OpKind op);

// Fallback planning (pass_fuse_norm_tail.cpp): a 2-D pool, or a reduction
// over trailing dims, of a norm kernel's result (its region's ops before it)
// becomes the norm kernel's tail, done in its last pass, where each of the
// tail's outputs reads one norm row and nothing else reads what it reads.
void fuse_tail_into_norm(PlanContext& ctx, KernelPlan& kp, int index);

// Helpers shared by the passes (plan.cpp).
// Grows `region` with the unplaced elementwise nodes after `after` (in order)
// whose shape equals the domain and whose operands are `sources`, region
// nodes, leaf expressions or values placed in earlier kernels
// (`allow_placed`). Marks them placed in kernel `kernel`.
void grow_region(PlanContext& ctx, Region& region, const std::vector<ValueId>& sources, ValueId after,
                 int kernel, bool allow_placed);
// Makes `v` (not placed) a tail of `kp`, kernel `kernel` of the plan: placed there, with the elementwise ops after
// it over its shape (grow_region) as the tail's post region.
void add_tail(PlanContext& ctx, KernelPlan& kp, ValueId v, int kernel);
// Values in `inside` that have users outside it, or are outputs.
std::vector<ValueId> exits_of(const PlanContext& ctx, const std::vector<ValueId>& inside);

}  // namespace fusejit::cg
