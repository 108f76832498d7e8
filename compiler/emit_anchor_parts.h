// compiler/emit_anchor_parts.h — pieces of the anchor emitter (emit_anchor.cpp):
// template aliases for each mainloop policy, copy widths and epilogue chunks,
// and how an anchor maps GEMM coordinates (m, n) to output coordinates.
#pragma once

#include <string>
#include <vector>

#include "compiler/emit_common.h"

namespace fusejit::cg::anchor {

// `using Tile = ...;` for each mainloop policy (and `using Kind` for mma.sync).
// overlapping_tiles (wgmma): a Tile derived from the policy whose kNStep is the constant kColumnStep (emit_pool1d.cpp).
std::string tile_alias(const TileConfig& t, bool b_k_contiguous);  // (GEMV: B's layout)
std::string wgmma_alias(const WgmmaConfig& t, const std::string& kind, bool b_n_major, bool overlapping_tiles = false);
void add_mma_aliases(const MmaConfig& t, const std::string& kind, std::vector<std::string>& out);
// The template's name for an MMA kind ("bf16" -> "BF16", "f32x3" -> "F32x3").
std::string kind_enum(const std::string& kind);

// The widest copy fj::mma::copy_tile makes from rows of `ld` elements: the
// alignment the operand's base address needs.
int mma_copy_bytes(int64_t ld, int elem_bytes);

// Bytes of shared memory the wgmma ring and `reserved` bytes leave each
// consumer's epilogue (ping-pong: half of it each).
int64_t wgmma_epilogue_room(const WgmmaConfig& t, bool three_tf32, int64_t reserved = 0);
// Columns the wgmma epilogue stages at a time: the widest that fits in that
// room (at least wgmma_min_epilogue_chunk: the ring leaves room for it).
int wgmma_epilogue_chunk(const WgmmaConfig& t, bool three_tf32, int64_t reserved = 0);

// The TMA views of a linear / matmul on wgmma: A [rows, K] in BM-row boxes; B
// ([N, K] boxes of BN / cluster rows, or [K, N] 64-column boxes); 3xTF32's
// residuals; the TMA-stored outputs (BM rows x 128 bytes).
std::vector<TensorMapSpec> gemm_tensor_maps(const Graph& g, const Plan& plan, const KernelPlan& kp,
                                            const AnchorGeometry& geo, int64_t rows);

// The TMA views of a conv2d on wgmma: x staged in NHWC ({C, W, H, N}, boxes
// of BK channels x the patch, or its input halo for wgmma.conv_halo), w as
// [Cout][KH*KW*Cin] (BN-row boxes), and 3xTF32's residuals, tiled like them.
std::vector<TensorMapSpec> conv_tensor_maps(const Graph& g, const KernelPlan& kp, const AnchorGeometry& geo,
                                            const ConvPatch& patch);
// The wgmma conv's mainloop call up to its epilogue lambda: per-tap boxes
// (conv_wgmma.cuh) or, for wt.conv_halo, the resident-filter halo mainloop
// (conv_wgmma_halo.cuh, whose `Halo` alias it adds to s).
// A wgmma kernel's tensor-map parameters (in launch order: the operands', a
// dW's further views of x (x_cols: its kernel columns), then the TMA-stored
// outputs'), its fj::GemmMaps initializer, and the run() parameters /
// arguments of the maps past GemmMaps.
struct WgmmaMapParams {
  std::vector<std::string> params;
  std::string operands, out_maps, out_args;
};
WgmmaMapParams wgmma_map_params(const KernelPlan& kp, int x_cols = 0);
// An internal error unless each tensor map has its kernel parameter, in order.
Status check_map_params(const WgmmaMapParams& m, const std::vector<TensorMapSpec>& maps, const std::string& kernel);

// A conv on halo patches (conv_patch.cuh): the Conv alias and the head of the
// persistent pixel-tile loop up to the accumulation (`prefetch`: through
// registers held across tiles; KernelPlan::halo_prefetch; `pipeline`: KernelPlan::halo_pipeline).
// image_cluster > 0 (KernelPlan::spatial_cluster): a cluster of that many blocks loops over one image's tiles,
// each folding per-channel values (`fold`, fj::begin_column_fold<SpatialOp, Tile::BN>).
Expected<std::vector<std::string>> halo_patch_loop(const PlanContext& ctx, const AnchorGeometry& geo,
                                                   const ConvPatch& patch, const MmaConfig& mt, bool prefetch,
                                                   bool pipeline, int elem_bytes, const std::string& T, const std::string& x,
                                                   const std::string& w, KernelSource& s, int image_cluster = 0);
// The pixel tiles a halo-patch conv block loops over: every block strides over all tiles (image_cluster 0), or
// (KernelPlan::spatial_cluster) a cluster's blocks over one image's, block `rank` from the image's tile `rank`,
// each with its fold (`head` declares image, image_first, image_end, fold). first_loaded / next: the tiles whose
// halo a prefetching block loads first / after `pixel_tile` (Pixels::kTiles: none).
struct PixelTileRange {
  std::vector<std::string> head;
  std::string first, end, stride, first_loaded, next;
};
PixelTileRange pixel_tile_range(KernelSource& s, int image_cluster);
// A conv's pixel reduction in the epilogue of one tile (`tile`: the pixel tile's index expression): its
// per-channel values stored as per-tile partials, added atomically or folded into the block's column of an image
// cluster; `value` is the reduced value's lambda. Raises smem_floats (emit_spatial_tail.cpp).
std::vector<std::string> spatial_tail_epilogue(KernelEmitter& em, const FusedTail& tail, const std::string& suffix,
                                               std::vector<std::string> value, int threads, const std::string& tile,
                                               int64_t staged_room, int64_t& smem_floats);
// After that loop: block 0 of each image cluster combines the folds and runs the spatial tail's consumers
// (tail.post) at [image, channel], storing the outputs (pass_spatial_cluster.cpp; emit_spatial_tail.cpp).
std::vector<std::string> spatial_cluster_finish(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail);
// nchw_x (conv_nchw=1): the x parameter the producer reads (per-tap A tiles, or with conv_halo=1 each patch's
// halo); elem_type: x's element type; lookahead: conv_nchw's k-tiles of loads in flight (per-tap A tiles).
std::string conv_wgmma_call(const WgmmaConfig& wt, const ConvPatch& patch, KernelSource& s,
                            const std::string& nchw_x, const std::string& elem_type, int lookahead = 1);

// The wgmma mainloop's `const fj::SplitK split{...};` (its constants added to `s`).
std::string wgmma_split_k(const KernelPlan& kp, KernelEmitter& em, KernelSource& s);

// conv2d: the ConvShape struct of named constants (conv_simt.cuh's shape concept).
CudaStruct conv_shape_struct(const Graph& g, const Node& conv, const AnchorGeometry& geo);
// conv2d's kernel taps as a constant-memory table and a Taps struct in `s`
// (K <= 4096, offsets that fit an int): "Taps"; else "fj::NoTaps<ConvShape>".
std::string add_conv_tap_table(const AnchorGeometry& geo, KernelSource& s);
// The fj:: reduction functor of a row reduction.
std::string reduce_op_type(OpKind op);

// An epilogue lambda: `head`, the coordinate statements (a row that computes
// nothing returns; 0.f from a lambda returning float), `call`, "});".
std::vector<std::string> epilogue_lambda(const std::string& head, const std::vector<std::string>& coords,
                                         const std::string& call);

// A 2-D max / avg pool fused into the conv epilogue (pass_fuse_pool.cpp): the
// fj::tile_pool call over tiles of whole windows (`pool_windows` a tile), the
// pre-pool value's lambda, and the pooled value's (a max pool first: the
// moved non-decreasing ops on the window's max and min). Raises `smem_floats`
// to the staged columns it needs, at most `room` bytes. `in_registers` (halo
// patches whose warps hold whole windows): fj::patch_pool_in_registers instead.
std::vector<std::string> conv_pool_epilogue(const PlanContext& ctx, const Plan& plan, const KernelPlan& kp,
                                            KernelEmitter& em, const FusedTail& pool, int64_t pool_windows,
                                            int tile_m, int tile_n, int64_t room, int64_t& smem_floats,
                                            bool in_registers = false);

// How one anchor kind maps GEMM coordinates (m, n) to output coordinates.
struct AnchorShape {
  std::string rows;   // GEMM M expression for the epilogue bound
  std::string cols;   // GEMM N expression
  // Statements declaring i0..i<R-1> from m and n (may `return` for rows that
  // compute nothing).
  std::vector<std::string> coords;
  bool per_batch_rows = false;  // matmul with m within one batch entry (coordinates j*): not the wgmma path
  // Statements declaring the coordinates of a row reduction's output (dims
  // without N; keepdim puts 0 there) from m.
  std::vector<std::string> reduced_coords(const AnchorGeometry& geo, bool keepdim) const;
};

// 1-D pools on overlapping column tiles (KernelPlan::pool1d_overlap; emit_pool1d.cpp): a Pool<i> window struct per pool in em's source, then the fj::tile_pool1d_halo call (chunk
// columns staged at a time) with the pre-pool value's lambda and each pool's store lambda. Raises smem_floats.
Expected<std::vector<std::string>> pool1d_halo_epilogue(const PlanContext& ctx, const Plan& plan,
                                                        const KernelPlan& kp, KernelEmitter& em,
                                                        const AnchorShape& shape, int tile_m, int tile_n, int chunk,
                                                        int64_t& smem_floats);
// One pool whose windows tile the columns (kernel == stride, no padding; the window divides `chunk`): the
// fj::tile_pool1d_staged call with its pre-pool and store lambdas. Raises smem_floats.
Expected<std::vector<std::string>> pool1d_whole_windows_epilogue(const PlanContext& ctx, const Plan& plan,
                                                                 const KernelPlan& kp, KernelEmitter& em,
                                                                 const FusedTail& pool, const AnchorShape& shape,
                                                                 int tile_m, int tile_n, int chunk,
                                                                 int64_t& smem_floats);

// conv2d_weight_grad on wgmma (conv_wgmma.cuh WgradOperands): the conv's shape struct, the tensor maps of grad (in
// place) and of x in NHWC, the dW coordinates of a tile's (m, n); returns the mainloop call up to its epilogue.
std::string wgrad_wgmma_setup(const Graph& g, const Plan& plan, const KernelPlan& kp, const AnchorGeometry& geo,
                              KernelSource& s, AnchorShape& shape, std::vector<TensorMapSpec>& maps);

// The wgmma conv's runs epilogue (KernelPlan::conv_runs, conv_wgmma_store.cuh):
// the stored value's function, its per-channel inputs staged for the tile
// after a staged chunk of at most `room` bytes, the fj::tile_nchw_store call.
// Raises `smem_floats` to what it stages.
std::vector<std::string> conv_runs_epilogue(const PlanContext& ctx, const Plan& plan, const KernelPlan& kp,
                                            KernelEmitter& em, const AnchorGeometry& geo, const AnchorShape& shape,
                                            const std::string& coord_call, int64_t room, int64_t& smem_floats);

// The epilogue call for TMA-stored outputs (kp.tma_stores), in the wgmma
// epilogue lambda: `pairs` (one output): fj::tile_pointwise_tma_pairs with
// `fn` the stored value's function; else fj::tile_pointwise_tma with `fn` the
// epilogue tree that stores into the slots. `coord_call`: fn's coordinate
// arguments; `column_args`: its column_loads arguments (pairs only).
std::vector<std::string> tma_store_epilogue(const Graph& g, const KernelPlan& kp, const AnchorShape& shape,
                                            const std::string& fn, bool pairs, const std::string& coord_call,
                                            const std::string& column_args = "");

// A softmax / log_softmax fused into the epilogue (pass_fuse_softmax.cpp):
// the fj::tile_row_softmax call, `value` the lambda of its input (at m, n),
// `row` the row's index in the softmax's [rows, N] view (from m);
// `row_sharers` is Frag::kRowSharers. Raises `smem_floats` to the epilogue
// shared memory it needs (row statistics, then the staged stores). emit_row_tails.cpp.
std::vector<std::string> softmax_tail_epilogue(KernelEmitter& em, const FusedTail& tail, const AnchorShape& shape,
                                               std::vector<std::string> value, const std::string& row,
                                               int64_t row_sharers, int64_t& smem_floats);

// A group / layer norm done on a wgmma tile's accumulators (pass_fuse_norm_epilogue.cpp): the
// fj::tile_segment_norm call, `value` the lambda of its input (at m, n); weight and bias per column, then the
// norm's consumers, stored. Raises `smem_floats` (the staged stores). emit_norm_epilogue.cpp.
std::vector<std::string> norm_tail_epilogue(KernelEmitter& em, const FusedTail& tail, const AnchorShape& shape,
                                            std::vector<std::string> value, int64_t& smem_floats);

// A row reduction over an N wider than the tile: the fj::tile_row_partials
// call storing this tile's partial of each row to the reduction's scratch,
// `value` the lambda of its input, `suffix` the reduction's index (constant
// names). emit_row_tails.cpp.
std::vector<std::string> row_partials_epilogue(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail,
                                               const AnchorShape& shape, const std::string& suffix,
                                               std::vector<std::string> value, bool wgmma, bool halo_patches);

// A whole-row reduction broadcast back over the tile (KernelPlan::wide on a
// wgmma anchor): the fj::tile_row_broadcast call, `value` the lambda of the
// reduction's input, `coord_call` the wide function's coordinate arguments;
// the row-shaped consumers run once a row (their stores, and the row value
// the broadcast reads). Raises `smem_floats` (row totals, then the staged
// chunks). emit_row_tails.cpp.
std::vector<std::string> row_broadcast_epilogue(KernelEmitter& em, const AnchorGeometry& geo, const FusedTail& tail,
                                                const AnchorShape& shape, std::vector<std::string> value,
                                                const std::string& coord_call,
                                                int64_t row_sharers, int64_t& smem_floats);

// The inputs `tree` reads along its coordinate `col_dim` only (default the
// last: a bias over N; conv2d's channels: 1), every load of them so, at most
// `max`: the wgmma epilogue stages their values for a tile's columns in
// shared memory (KernelEmitter::emit_tree's column_loads).
std::vector<BufferRef> column_loads(const Graph& g, const EpilogueTree& tree, size_t max, int col_dim = -1);
// The epilogue statements that copy `cols` (column_loads) for the tile's
// columns [n0, n0 + bn) to smem + at + k * bn (zero past `n_bound`), and the
// arguments (", cols0, ..., n - n0") the tree's function then takes.
// The wgmma staged elementwise epilogue with two adjacent columns a call
// (epilogue_pairs=1; chunk 0: from the registers, epilogue_direct=1): the
// fj::tile_pointwise_staged_pairs (fj::tile_pointwise_pairs) call, its pair
// lambda (KernelEmitter::emit_tree_pair) and `fn`'s one-element lambda for
// ragged chunks and outputs not aligned to two elements (checked once a
// tile). Empty where the tree or chunk does not take pairs.
std::vector<std::string> staged_pairs_epilogue(KernelEmitter& em, const EpilogueTree& tree,
                                               const std::vector<BufferRef>& cols, int chunk, const AnchorShape& shape,
                                               const std::string& coord_call, const std::string& column_args,
                                               const std::string& fn);

struct ColumnStaging {
  std::vector<std::string> lines;
  std::string args;
};
ColumnStaging stage_columns(KernelEmitter& em, const std::vector<BufferRef>& cols, int64_t at, int bn,
                            const std::string& n_bound);

}  // namespace fusejit::cg::anchor
