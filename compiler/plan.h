// compiler/plan.h — the fusion plan: which nodes run in which kernel, what each
// kernel stores, and the heuristic parameters of each scheduler. Built by the
// passes in passes.h (one per file), read by the emitters (emit_*.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/program.h"
#include "fusejit/ir.h"

namespace fusejit::cg {

// ---- heuristic parameters, one plain struct per scheduler ----------------------

// The SIMT mainloop's tile (templates/gemm_simt.cuh SimtTile), or the GEMV
// loop's (gemv: templates/gemm_gemv.cuh GemvTile; fp32 linear / matmul with at
// most 32 rows, sm_80+): bm x bn, tn columns a thread, bm / tm groups of
// threads splitting each k-tile (a thread ends with tm rows), operands copied
// by cp.async through a ring of `stages` k-tiles.
struct TileConfig {
  int bm = 128, bn = 128, bk = 8, tm = 8, tn = 8;
  bool warp_along_m = false;  // true for conv: NCHW stores are contiguous along m
  int split_k = 1;  // blocks that share one output tile, each over a K range of whole bk tiles (linear, matmul)
  bool gemv = false;
  int stages = 2;   // gemv: k-tiles in the ring
  int threads() const { return (bm / tm) * (bn / tn); }
  // Shared memory of the mainloop (floats): GemvTile::kSmemFloats (b_k_contiguous: linear's W) or SimtTile's.
  int64_t smem_floats(bool b_k_contiguous) const;
  std::string str() const;  // "128x128x8 (8x8 per thread)"
};

// The anchor's mainloop: the SIMT FFMA loop (any arch, any layout), the
// sm_90a tensor-core pipeline (templates/gemm_wgmma.cuh: TMA + wgmma), or the
// sm_80+ one (templates/gemm_mma.cuh: cp.async + mma.sync; conv2d's im2col
// gather in templates/conv_mma.cuh).
enum class Mainloop { Simt, Wgmma, Mma };
std::string_view mainloop_name(Mainloop);  // "ffma", "wgmma", "mma"

// The wgmma mainloop's tile (WgmmaTile), schedule and rasterization.
// Cooperative: BM / 64 consumer warpgroups share each tile. Ping-pong (BM =
// 64): two consumers take alternate tiles whole, one's epilogue overlapping
// the other's mainloop; each has its own epilogue shared memory. Split-K
// (templates/wgmma_schedule.cuh): tiles from split_from on are computed as
// split_k K ranges, each a unit of work of its own. cluster_m = 2: clusters
// of two blocks on vertically adjacent tiles share B's k-tiles (TMA
// multicast; either schedule, no split-K, not 3xTF32).
struct WgmmaConfig {
  int bm = 128, bn = 256, stages = 4;
  int raster_group = 8;  // row tiles that sweep the column tiles together (L2 reuse)
  bool pingpong = false;
  int tma_slots = 2;     // shared-memory slots per TMA-stored output (128-byte column chunks)
  int split_k = 1;       // K ranges per split tile (1: none)
  int64_t split_from = 0;  // the first split tile (earlier tiles: whole)
  int cluster_m = 1;       // blocks per cluster along M (1 or 2)
  int cluster_n = 1;       // blocks per cluster along N (2..8: a row reduction across them, wgmma_row_cluster.cuh)
  bool swap_ab = false;    // tf32 matmul, B [K, N] as wgmma's register operand: bm rows x bn (64 a consumer) columns
  int b_row_bytes = 128;   // B's rows in a stage (144: the tf32 swap-AB dW's rows of x, templates/wgrad_swap_ab.cuh)
  int b_rows = 0;          // B's rows a stage holds (0: bn; 64: the swap-AB dW's consumers share one box of x)
  int b_stage_rows() const { return b_rows > 0 ? b_rows : bn; }
  // conv2d (templates/conv_wgmma_halo.cuh): the column tile's filter resident in shared memory and one TMA box of
  // input halo per patch; `stages` counts halo buffers, conv_halo_bytes the filter and them.
  bool conv_halo = false;
  int64_t conv_halo_bytes = 0;
  int conv_halo_b_stages = 0;  // conv_halo=2: the filter streamed through a ring of this many k-tiles (0: resident)
  int consumers() const { return pingpong ? 2 : (swap_ab ? bn : bm) / 64; }
  int threads() const { return 128 * (consumers() + 1); }  // a producer warpgroup and the consumers
  std::string str() const;  // "128x256, 4 stages, raster group 8" ("64x256 ping-pong, ...")
};

// The mma.sync mainloop's tile (MmaTile): k-tiles of 128 bytes (BK = 32 fp32
// or 64 16-bit elements), warps of WM = BM / 2 rows by WN = BN / 4 columns
// (at least 16, at most 32: BN = 256 takes 2 x 8 warps).
struct MmaConfig {
  int bm = 128, bn = 128, stages = 3;
  int split_k = 1;  // blocks that share one output tile, each over a K range (linear, matmul)
  int warp_n = 0;   // a warp's columns; 0: the default, bn / 4 within [16, 32]
  int wm() const { return bm / 2; }
  int wn() const { return warp_n > 0 ? warp_n : bn / 4 < 16 ? 16 : bn / 4 > 32 ? 32 : bn / 4; }
  int bk(int elem_bytes) const { return 128 / elem_bytes; }
  int threads() const { return (bm / wm()) * (bn / wn()) * 32; }
  std::string str() const;  // "128x128, 3 stages, 256 threads"
};

// Elementwise kernels over materialized tensors: one element per thread,
// grid-stride loop.
struct PointwiseConfig {
  int threads = 256;
  int64_t max_blocks = 1 << 20;
  bool lanes = true;  // a thread takes up to 16 bytes of consecutive elements where they allow it (emit_pointwise; the row-finish kernels' wide pass)
};

// Row kernels (reductions, softmax): G threads per row, G chosen by row length.
struct RowConfig {
  int threads = 256;
  int group_for(int64_t row_len) const;  // 1, 2, ..., 32 or `threads`
};

struct Heuristics {
  std::string mainloop = "auto";   // auto | ffma | wgmma | mma (wgmma, mma: an error where it cannot run)
  std::optional<TileConfig> tile;  // override for the SIMT anchor's tile
  std::optional<bool> gemv;        // the GEMV loop for fp32 GEMMs of few rows on FFMA (1: an error where it cannot run)
  std::optional<TileConfig> gemv_tile;  // its tile: bn, bk, tn, stages, and tm = the k groups (bm follows M)
  std::optional<WgmmaConfig> wgmma;  // override for the wgmma anchor's tile
  std::string wgmma_schedule = "auto";  // auto | cooperative | pingpong
  int tma_store = -1;              // wgmma epilogue outputs by TMA bulk stores: 1 where eligible, 0 never, -1 auto
  std::optional<int> tma_slots;    // shared-memory slots per TMA-stored output (default 2)
  std::optional<MmaConfig> mma;      // override for the mma.sync anchor's tile
  std::optional<int> split_k;        // override for the anchor's split-K (1: none), wgmma or mma.sync
  std::optional<int64_t> split_from; // wgmma split-K: tiles before this one stay whole
  std::optional<int> wgmma_cluster;  // wgmma: blocks per cluster along M (1 or 2)
  std::optional<bool> wgmma_swap_ab; // tf32 matmul with B [K, N]: B as wgmma's register operand (no transposed copy)
  std::optional<bool> conv_patch;    // mma.sync conv2d: halo patches in shared memory (where eligible) or the gather
  std::optional<bool> conv_halo;     // wgmma conv2d: 1 = filter resident, a halo box per patch (else an error)
  bool conv_halo_stream = false;     // conv_halo=2: a halo per patch and channel block, the filter streamed
  std::optional<bool> wgrad_nhwc;    // mma.sync conv2d_weight_grad: x staged to NHWC (where eligible) or gathered
  std::optional<bool> wgrad_flat;    // the tf32 swap-AB dW over flattened grad planes (default: where grad's rows need a copy)
  std::optional<int> mma_min_blocks; // mma.sync: __launch_bounds__ blocks per SM (a register cap); default 1 or 2
  bool fuse_pool = true;           // pool in the conv epilogue when it fits
  bool pool_first = true;          // a fused max pool before the non-decreasing ops leading to it
  bool pool1d_overlap = false;     // 1-D pools along N on overlapping column tiles where whole windows do not fit
                                   // (opt-in until its kernels have run on a GPU: session 53 got no device)
  bool pool_registers = true;      // halo-patch pools reduced in the mma fragment's registers where warps hold windows
  std::optional<bool> halo_pipeline; // halo patches in several channel blocks, fp32 / tf32: two cp.async halo buffers
                                     // (default: 3xTF32 where they fit; KernelPlan::halo_pipeline)
  std::optional<bool> halo_prefetch; // halo patches: the next tile's halo loaded to registers during the MMAs
                                     // (default: 3xTF32 where eligible; KernelPlan::halo_prefetch)
  bool staging_prefetch = false;   // 16-bit NHWC staging: a block's next tile loaded during the current one's stores
  int conv_nchw = 0;               // wgmma conv2d: the producer's threads read NCHW x, 1 or 2 k-tiles ahead (0: staged)
  bool fuse_reductions = true;     // row reductions in the GEMM/conv epilogue
  bool atomic_partials = true;     // a conv's fused pixel sums added atomically (0: per-tile partials, fixed order)
  int spatial_cluster = 0;         // sm_90 halo-patch conv: its pixel reduction finished in the kernel by clusters
                                   // of this many blocks an image (1..16; -1 = auto: as the grid needs; 0: never,
                                   // the default: slower than the partials on the H100, session 52)
  bool softmax_parts = false;      // a softmax along an N wider than a tile: per-tile partials + a finish kernel
  bool conv_tap_table = true;      // conv taps from a constant table (K <= 4096), not divisions
  bool simplify = true;            // graph simplification before planning (compiler/simplify.h)
  bool row_pass = true;            // reductions over the same rows share one pass (pass_fallback.cpp)
  bool pool_pass = true;           // pools of one value to one shape share one kernel (pass_fallback.cpp)
  bool epilogue_transpose = true;  // a transpose of a linear / matmul epilogue value stored from the epilogue
  bool row_stages = true;          // reductions along a row-finish kernel's wide rows in the same kernel
  bool norm_tail = true;           // a 2-D pool or trailing-dims reduction of a norm's result done by the norm kernel
  bool norm_epilogue = true;       // a group / layer norm whose groups lie in one wgmma column tile done in the epilogue
  bool norm_cache = true;          // a norm kernel's rows copied to shared memory by its first pass (read once)
  bool row_broadcast = true;       // wgmma: a whole-row reduction broadcast back over the tile in the epilogue
  bool row_cluster = false;        // and across a cluster of column tiles where N is wider (opt-in: not faster yet)
  bool epilogue_pairs = false;     // wgmma staged epilogue: two adjacent columns a call, one store of both (opt-in)
  bool epilogue_direct = false;    // wgmma linear / matmul, cheap elementwise epilogue: stores from registers (opt-in)
  int conv_runs = 2;               // a wgmma conv's NCHW outputs (up to this many) staged in their type, stored in runs
  bool scratch_graph_dtype = false;  // a bf16 / f16 value another kernel reads goes to scratch in its type (PyTorch's
                                     // rounding), not f32
  PointwiseConfig pointwise;
  RowConfig row;
};

// Parses CodegenOptions::config: "key=value" items separated by ',' or ';' or
// spaces. Keys: mainloop=auto|ffma|wgmma|mma, tile=BMxBNxTMxTN[xBK],
// wgmma_tile=BMxBNxSTAGES[xGROUP], wgmma_schedule=auto|cooperative|pingpong, tma_store=0|1, mma_tile=BMxBNxSTAGES,
// split_k=1..1024, split_from=N (wgmma: the first tile split; default 0), wgmma_cluster=1|2, wgmma_swap_ab=0|1,
// tma_slots=1..8, conv_patch=0|1, conv_halo=0|1|2,
// wgrad_nhwc=0|1, wgrad_flat=0|1, mma_min_blocks=1..32, halo_pipeline=0|1, halo_prefetch=0|1, conv_nchw=0..2, staging_prefetch=0|1,
// fuse_pool=0|1, pool1d_overlap=0|1, pool_first=0|1, pool_registers=0|1, fuse_reductions=0|1, atomic_partials=0|1, spatial_cluster=0|auto|1..16, softmax_parts=0|1, conv_tap_table=0|1, simplify=0|1, row_pass=0|1, pool_pass=0|1, epilogue_transpose=0|1, row_stages=0|1, norm_tail=0|1, norm_cache=0|1, norm_epilogue=0|1, row_broadcast=0|1, row_cluster=0|1, epilogue_pairs=0|1, epilogue_direct=0|1, conv_runs=0..4, pointwise_threads=N, pointwise_lanes=0|1, row_threads=N, scratch_dtype=f32|graph. Empty: defaults.
Expected<Heuristics> parse_heuristics(const std::string& config);

// Checks that a tile is one the SIMT mainloop instantiates correctly.
Status validate_tile(const TileConfig& t);

// Dynamic shared memory a wgmma kernel may ask for: sm_90's 227 KiB per
// block less 1 KiB for its static shared memory (the mbarriers).
constexpr int64_t kWgmmaDynamicSmemLimit = 226 * 1024;
// Static shared memory that clusters along N add (fj::RowExchange: two slots of BM floats and two barriers).
constexpr int64_t kRowExchangeReserve = 2048;

// Shared memory (bytes) of a wgmma tile's ring and 1 KiB to align it (3xTF32
// stages hold each operand's residual tile too); WgmmaTile::kRingBytes + 1024.
int64_t wgmma_smem_bytes(const WgmmaConfig& t, bool three_tf32);
// Checks a wgmma tile: shapes WgmmaTile instantiates, within 227 KiB.
Status validate_wgmma(const WgmmaConfig& t, bool three_tf32);
// Rows of K-major B's TMA box in a 2-block cluster (gemm_wgmma.cuh
// kClusterBoxRows): half the tile's, or a third where a half is not whole
// 8-row swizzle atoms (168 columns: 56).
int wgmma_cluster_b_box_rows(const WgmmaConfig& t);
// The narrowest chunk of columns the epilogue stages at a time (8-column
// groups dividing bn: 24 for 168-column tiles, else 16).
int wgmma_min_epilogue_chunk(const WgmmaConfig& t);
// Whether the tile is valid and its ring leaves room for the narrowest
// epilogue staging (BM x (that chunk + 8) floats) and 4 KiB of epilogue scratch.
bool wgmma_fits_with_epilogue(const WgmmaConfig& t, bool three_tf32);
// The most stages (at most 8) with which the tile still fits so.
int wgmma_max_stages(WgmmaConfig t, bool three_tf32);
// Shared memory of one TMA-stored output: tma_slots slots of BM rows x 128 bytes
// (fj::tile_pointwise_tma stores the tile in chunks of 128-byte columns).
int64_t wgmma_store_tile_bytes(const WgmmaConfig& t);

// SMs of the usual GPU of an arch (H100: 132, A100: 108): a heuristic's
// guess of how many blocks fill the device (the tuner measures the real one).
int64_t sm_count_guess(const std::string& arch);
inline constexpr int64_t kSmThreads = 2048;  // threads an SM holds at once (sm_80 .. sm_90)

// Shared memory an SM has for blocks (H100: 228 KiB, A100: 164 KiB; less on
// the consumer chips): with sm_count_guess, how many blocks fill the device.
int64_t sm_shared_bytes_guess(const std::string& arch);
// The default minimum blocks an SM of an mma.sync kernel's __launch_bounds__:
// 2 blocks of up to 256 threads (128 registers a thread), 1 for 3xTF32 (its
// split operands stay live) or wider blocks (emit_anchor.cpp); 4 for tf32 /
// 16-bit halo patches of 128 threads.
int mma_default_min_blocks(const std::string& mma_kind, int threads, bool halo_patches = false);
// Blocks of an mma.sync tile an SM runs at once: the register budget above
// (or `min_blocks`, the config's mma_min_blocks), its threads and its ring of
// shared memory (1 KiB of each block reserved).
int64_t mma_resident_blocks(const MmaConfig& t, const std::string& mma_kind, const std::string& arch,
                            std::optional<int> min_blocks);

// Shared memory (bytes) of an mma.sync tile's ring (128-byte rows of k);
// fp32 B read as [K, N] (matmul) has padded rows (MmaTile::smem_bytes).
int64_t mma_smem_bytes(const MmaConfig& t, bool fp32_kn_b = false);
// Checks an mma.sync tile: shapes MmaTile instantiates, within 226 KiB.
Status validate_mma(const MmaConfig& t);

// ---- the anchor's GEMM view --------------------------------------------------------

struct AnchorGeometry {
  OpKind op = OpKind::Linear;
  ValueId node = -1;
  int64_t m = 0, n = 0, k = 0;  // per batch (matmul) or per group (conv)
  int64_t batch = 1;            // matmul: product of the broadcast batch dims
  bool b_batched = false;       // matmul: B has batch dims (else one [K, N] B for every entry)
  int64_t groups = 1;           // conv2d
  Shape out;                    // the anchor's output shape
  // conv2d only
  int64_t batch_n = 0, cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};
AnchorGeometry analyze_anchor(const Graph& g, ValueId anchor);
// Whether a tf32 swap-AB dW's block can take one kernel row's taps over all of Cout (at most 128) as 192 columns
// whose consumers share one box of x (Cin 64, KW 3; templates/wgrad_swap_ab.cuh), and that box's rows: 36 pixels
// (144 bytes) where the taps' shifts reach at most 4 past the box's start (unpadded, dilated 2), 44 (176 bytes,
// also conflict-free: a stride of 4 banks mod 8) up to 12 (padded 1 or 2); 0 where the block cannot share one.
int wgrad_swap_shared_box_bytes(const AnchorGeometry& geo);
bool wgrad_swap_shares_x(const AnchorGeometry& geo);
// A matmul whose B has no batch dims as one GEMM: x's leading dims flattened
// into M (as linear's), batch 1. Other anchors unchanged.
AnchorGeometry flatten_batch_rows(AnchorGeometry geo);

// conv2d on wgmma (templates/conv_wgmma.cuh): each output tile of bm rows is
// a patch of bh x bw output pixels of one image. conv_patch picks bw (a power
// of two, at most 128) with the fewest padded pixels (bw < 32 counts extra:
// short runs per channel in the NCHW stores); a fused pool's (qh, qw) window
// must divide the patch. bh == 0: no patch holds whole windows.
struct ConvPatch {
  int bh = 0, bw = 0;
  int64_t tiles_per_image = 0;
};
// halo_elem_bytes > 0: mma.sync halo patches (conv_patch.cuh) of that element
// size. Where the halo takes several channel blocks (Cin/groups over 16 fp32
// channels), its copy dominates and its area counts too: squarer patches.
// wgmma_halo: the patches of conv_wgmma_halo.cuh, 8 or 64 pixels wide (a wgmma's rows: 8 output rows or one).
// pool_warp_rows > 0 (a pool reduced in mma.sync registers): patches whose qh rows fit that many warp rows
// whole, where one exists.
ConvPatch conv_patch(const AnchorGeometry& geo, int bm, int qh = 1, int qw = 1, int halo_elem_bytes = 0,
                     bool wgmma_halo = false, int pool_warp_rows = 0);
// Whether a qh x qw pool over halo patches `patch` reduces in the mma fragment's registers
// (fj::patch_pool_in_registers): whole windows in each warp's `warp_rows` rows.
bool pool_registers_fit(const ConvPatch& patch, int warp_rows, int qh, int qw);
// conv2d on wgmma with the filter resident (templates/conv_wgmma_halo.cuh):
// shared memory of a column tile's filter (bn rows) and `buffers` halo boxes of
// `patch` (fj::ConvHalo::kRingBytes; `nchw`: halos written from NCHW x, rows aligned to 16 bytes).
int64_t conv_halo_ring_bytes(const AnchorGeometry& geo, const ConvPatch& patch, int bn, int elem_bytes, int buffers,
                             bool nchw = false, int b_stages = 0);
// conv2d on mma.sync from shared-memory copies of each patch's input halo
// (templates/conv_patch.cuh): why a conv cannot take it ("" if it can), and
// the bytes of its operand copies (fj::ConvPatchMma::kSmemBytes). The halo
// holds a block of channel chunks at a time (conv_patch_block_chunks: all of
// them for Cin/groups <= 16 fp32 or 32 16-bit channels); K runs block by block.
std::string conv_patch_blocker(const AnchorGeometry& geo, int elem_bytes);
int conv_patch_block_chunks(const AnchorGeometry& geo, int elem_bytes);
int conv_patch_blocks(const AnchorGeometry& geo, int elem_bytes);  // channel blocks of the halo (1: every channel)
constexpr int64_t kMaxPatchOperandBytes = 96 * 1024;
// `pipelined`: two halo buffers where they apply (conv_patch_pipelined); `vector_f32`: 4-byte halos copied by
// vectors too (halo_prefetch=1; ConvPatchMma's VF), their rows then padded like 16-bit ones.
int64_t conv_patch_operand_bytes(const AnchorGeometry& geo, const ConvPatch& patch, int bn, int elem_bytes,
                                 bool pipelined = false, bool vector_f32 = false);
// Whether halo_pipeline=1 gives this conv two cp.async halo buffers (4-byte
// elements, several channel blocks: fj::ConvPatchMma's HB = 2).
bool conv_patch_pipelined(const AnchorGeometry& geo, int elem_bytes, bool halo_pipeline);
// Why halo_prefetch=1 cannot apply to these halo patches (ConvPatchMma::kPrefetch; 4-byte elements with
// VF = true), or "".
std::string conv_patch_prefetch_blocker(const AnchorGeometry& geo, const ConvPatch& patch, int threads,
                                       int elem_bytes);

// ---- the plan ------------------------------------------------------------------------

// Elementwise nodes evaluated together at every coordinate of `domain`.
struct Region {
  Shape domain;
  std::vector<ValueId> nodes;   // computed here, each of shape == domain, topological
  std::vector<ValueId> stores;  // values written to memory (set by assign_buffers)
  // Transposes of this region's values (anchor epilogues) that it stores at
  // their swapped coordinates: each is in `stores`, none is computed here.
  std::vector<ValueId> transposed;
};

enum class KernelKind { Anchor, Pointwise, Reduce, Softmax, Pool2d, Pool1d, RowFinish, Norm, Gather };
std::string_view kernel_kind_name(KernelKind);

// A group / instance / layer norm as rows: x is `rows` contiguous runs of
// `len` elements (one per sample and group); element `off` of x (flat) has
// the affine index (off % affine_span) / affine_div.
struct NormGeometry {
  int64_t rows = 0, len = 1, affine_span = 1, affine_div = 1;
};
NormGeometry norm_geometry(const Graph& g, ValueId norm);

// A reduction (or global_avg_pool) as rows: its input's dims split into the
// kept ones (one output element each: `rows`) and the reduced ones (`len`
// elements each), in order.
struct ReduceGeometry {
  std::vector<int> kept, reduced;
  Shape kept_shape, reduced_shape;
  int64_t rows = 1, len = 1;
  bool mean = false;  // mean or global_avg_pool: the sum divided by len
};
ReduceGeometry reduce_geometry(const Graph& g, ValueId reduction);
// Whether a reduce kernel takes fj::reduce_columns (the kept dims after the
// last reduced one give runs of consecutive outputs that fill warps) rather
// than fj::reduce_rows.
bool reduce_by_columns(const Graph& g, ValueId reduction);

// A row-finish kernel reduces its finished rows to one value as well
// (pass_fallback.cpp): in one block when there are at most this many, else in
// a block per this many (CUDA; the CPU backend: a reduce kernel).
inline constexpr int64_t kAcrossRowsMaxRows = 1024;

// A pool or row reduction done inside the anchor's epilogue, with the
// elementwise consumers of its result fused into its store. A `partial` row
// reduction (N wider than a tile) stores one partial per (row, column tile)
// instead; one RowFinish kernel combines the partials of every such
// reduction and runs their consumers.
struct FusedTail {
  ValueId op = -1;
  Region post;  // domain: the tail op's output shape (empty for partial tails)
  bool partial = false;
  // A partial reduction over the GEMM rows (pass_fuse_spatial.cpp): a conv's
  // output pixels (each tile holds pixels of one image) or every row of a
  // linear / matmul; each tile stores a partial per channel (column).
  bool spatial = false;
  // A max pool fused into the conv epilogue: the non-decreasing ops right
  // before it (their other operand constant over each window), in order, which
  // then run once per window on the window's max (pass_fuse_pool.cpp); the
  // windows reduce the value before the first of them.
  std::vector<ValueId> after_max;
};

// Scratch of a partial row reduction: [tiles][rows] floats (and the row
// maxima, same layout, for logsumexp and softmax; a softmax's rows are its
// [.., N] shape's rows).
struct PartialBuffers {
  int64_t tiles = 0, rows = 0;
  int64_t reduced = 0;  // elements each row combines (a mean's divisor)
  int sums = -1;    // scratch index: per-tile partials (sums / max / min / exp-sums)
  int maxima = -1;  // scratch index: per-tile maxima (logsumexp, softmax)
  bool atomic = false;  // a conv's pixel sums: one f32 per row, added atomically (tiles = 1, zeroed scratch)
  // softmax / log_softmax: where the epilogue stores exp(y - tile max) (log:
  // y - tile max) for the finish kernel to scale in place.
  std::optional<BufferRef> stage;
};

struct KernelPlan {
  KernelKind kind = KernelKind::Pointwise;
  ValueId root = -1;  // anchor / reduction / softmax / pool node; -1 for pointwise
  // RowFinish: every partial row reduction it completes (root is the first),
  // all of the same output shape; the region runs their consumers.
  std::vector<ValueId> finishes;
  // Anchor: the epilogue on the anchor output. Pointwise: its nodes.
  // Reduce/Softmax/Pool: consumers of the root, fused into its store.
  Region region;
  // RowFinish: elementwise consumers over a shape the finished rows
  // broadcast into (region.domain's leading dims, then dims of size 1 there:
  // `x + sum(h, keepdim)`), run by the block that finished those rows; the
  // region's nodes are recomputed at the wider coordinates. Anchor (wgmma,
  // row_broadcast=1): the consumers over the anchor's domain of its one
  // whole-row tail (`h - max(h)`), run on the accumulators once the tile's rows
  // are reduced (pass_fuse_row_broadcast.cpp).
  Region wide;
  // RowFinish (CUDA): `wide` repeats the finished values along its leading
  // dims instead: each is a column of it (`h - mean(h, 0)`); blocks take a
  // column range and a row range (emit_fallback.cpp finish_kernel_columns).
  bool wide_columns = false;
  // Anchor: the fused pool or row reductions. RowFinish: at most one
  // reduction of the finished rows to a single value (one block). Reduce:
  // further reductions of the same rows done in the same pass (a row pass),
  // each with its consumers.
  std::vector<FusedTail> tails;
  // RowFinish with a wide stage: reductions along the wide rows
  // (keepdim: back to the finished rows' shape) of values computed here, in
  // order, each followed by its elementwise consumers (post: over the wide
  // domain, with the row-shaped ones between; pass_fallback.cpp). A warp a row
  // reduces; a row's values are recomputed for each stage, never stored for it.
  // A stage's row-shaped values (its reduction, its consumers over the rows)
  // that are outputs or read by another kernel are in its post.stores too
  // (pass_buffers), stored once a row at row coordinates (row_stage_row_stores;
  // row_stage_wide_stores: the others, at wide coordinates).
  std::vector<FusedTail> row_stages;
  // Reduce (row pass): leaf expressions over the reduced operand's shape that
  // are graph outputs, stored as the pass computes them (no kernel of their
  // own, no second read of what they are computed from).
  Region streamed;
  TileConfig tile;               // Anchor only: the SIMT tile
  Mainloop mainloop = Mainloop::Simt;  // Anchor only
  std::string mma_kind;          // Wgmma, Mma: bf16 | f16 | tf32 | f32x3
  WgmmaConfig wgmma;             // Wgmma only
  // Wgmma only: the epilogue's results go to shared-memory slots that TMA
  // bulk stores write out while the epilogue and the next tile's mainloop go
  // on (fj::tile_pointwise_tma: 128-byte column chunks, one store per chunk
  // and output, in tma_stores' order), instead of global stores. The outputs
  // share one element size.
  std::vector<ValueId> tma_stores;
  int tma_store_elem_bytes = 0;
  // Columns per chunk: 128 bytes, swizzled; or fewer (a tile 168 wide: 112
  // bytes of 16-bit, 96 of 32-bit elements), unswizzled rows in the slot.
  int tma_store_chunk_cols = 0;
  // A wgmma conv's NCHW outputs, each computed in registers, staged in its own
  // type and stored in runs of a channel's pixels (conv_wgmma_store.cuh); empty: none.
  std::vector<ValueId> conv_runs;
  MmaConfig mma;                 // Mma only
  // Mma conv2d with few channels per group: tiles are patches of output
  // pixels whose input halo each block copies to shared memory
  // (templates/conv_patch.cuh) instead of the im2col gather.
  bool conv_patch = false;
  // Halo patches whose next tile's halo each thread loads into registers during the MMAs (halo_prefetch).
  bool halo_prefetch = false;
  // Halo patches whose pixel reduction (the one spatial tail) finishes in this kernel: clusters of this many blocks
  // take one image's pixel tiles (pass_spatial_cluster.cpp, conv_spatial_cluster.cuh); 0: none.
  int spatial_cluster = 0;
  // 1-D pools along N whose windows cross tile edges (pass_fuse_pool1d.cpp, epilogue_pool1d.cuh): column tiles
  // overlap by this many columns (the widest window's span), recomputed by both neighbours; -1: tiles do not overlap.
  int pool1d_overlap = -1;
  // Halo patches in several channel blocks filled by cp.async into two buffers (halo_pipeline; conv_patch_pipelined).
  bool halo_pipeline = false;
  // wgmma conv2d whose producer warpgroup writes A from NCHW x (ConvNchwOperands, conv_nchw=1): no x staging.
  bool conv_nchw = false;
  // Wgmma f32x3: scratch of the operands' TF32 residuals (x - x truncated to
  // TF32), which the operand staging kernel (emit_operand_staging.cpp) writes first.
  int residual_a = -1, residual_b = -1;
  // Wgmma with an fp32 B [K, N] (matmul): scratch of B transposed to [N, K]
  // (tf32 wgmma reads K-major B only), written by the same staging kernel;
  // residual_b is then B^T's.
  // Wgmma conv2d: w as [Cout][KH][KW][Cin] (K-major B, k = tap * Cin + ci).
  int b_transposed = -1;
  // Wgmma conv2d: scratch of x in NHWC, read by 4-D TMA boxes; residual_a
  // is then its residual (same layout). Mma conv2d_weight_grad with
  // wgrad_nhwc: x in NHWC, B's rows (pixels) copied 16 bytes of channels at a time.
  int a_staged = -1;
  // Wgmma conv2d_weight_grad whose grad rows (OW elements) are not a multiple of 16 bytes: scratch of grad with
  // its rows padded to grad_pitch elements (written by the staging kernel), A's TMA boxes read from it.
  int grad_padded = -1;
  int64_t grad_pitch = 0;
  bool grad_flat = false;  // the tf32 swap-AB dW reads grad's planes flattened (wgrad_flat: no padded copy)
  // Mma conv2d_weight_grad: B [pixels][(kh, kw, ci)] from x in NHWC (a_staged)
  // instead of x's im2col rows gathered from NCHW.
  bool wgrad_nhwc = false;
  // mma.sync: B staged [BK][BN] (k rows): matmul's B [K, N], a dW from x in NHWC.
  bool mma_b_kn_major(OpKind anchor_op) const { return anchor_op == OpKind::Matmul || wgrad_nhwc; }
  int split_k_partials = -1;     // split_k > 1 (mma.sync, wgmma): scratch of the splits' accumulators
  int split_k_counters = -1;     //   and of the per-tile arrival counters (zeroed)
  // RowFinish reducing its rows to one value (tails): blocks that each fold a fixed share of the rows; with more
  // than one, each stores its fold (scratch across_folds) and the last to finish (scratch across_counter, zeroed;
  // fj::last_block_of_grid) combines the folds in block order and runs the reduction's consumers.
  int across_blocks = 1;
  int across_folds = -1, across_counter = -1;
  int tile_m() const { return mainloop == Mainloop::Wgmma ? wgmma.bm : mainloop == Mainloop::Mma ? mma.bm : tile.bm; }
  int tile_n() const { return mainloop == Mainloop::Wgmma ? wgmma.bn : mainloop == Mainloop::Mma ? mma.bn : tile.bn; }
  // Blocks that share one output tile along blockIdx.z (mma.sync, SIMT split-K; wgmma splits into units instead).
  int block_split_k() const { return mainloop == Mainloop::Mma ? mma.split_k : mainloop == Mainloop::Simt ? tile.split_k : 1; }
  std::vector<std::string> notes;
  std::string name;  // kernel name, set by the emitter
};

// A row stage's stores made at wide coordinates: its post region's, less the
// row-shaped ones (its reduction, its consumers over the rows), which are
// stored at row coordinates once a row.
std::vector<ValueId> row_stage_wide_stores(const Graph& g, const FusedTail& stage);
// The region that stores row stage `i`'s row-shaped values once a row (no
// stores: none), over `rows`: the finished rows' region and every row-shaped
// consumer of stages 0..i, computed from the finished values and the stages'
// reductions (the tree's sources).
Region row_stage_row_stores(const Graph& g, const KernelPlan& kp, size_t i);

// The anchor's column tiles over its N columns: tile_n wide and apart, or, where 1-D pools overlap them
// (KernelPlan::pool1d_overlap), tile_n - overlap columns apart (a matmul's B [K, N] rows copied 16 bytes at a
// time off wgmma: rounded down to 8 columns, so each tile's first column stays aligned), as many as cover every
// pool's windows (pass_fuse_pool1d.cpp).
int64_t anchor_column_step(const Graph& g, const KernelPlan& kp, int tile_n);
int64_t anchor_column_tiles(const Graph& g, const KernelPlan& kp, int64_t n, int tile_n);


struct Plan {
  std::vector<KernelPlan> kernels;  // launch order
  // Where kernels read a value from memory (inputs: their input buffer;
  // others: their first output buffer, else a scratch buffer) ...
  std::map<ValueId, BufferRef> buffer;
  // ... and every buffer the kernel computing it writes (all outputs naming it).
  std::map<ValueId, std::vector<BufferRef>> store_to;
  std::vector<ScratchSpec> scratch;
  // Scratch buffers of graph values held in their 16-bit type (scratch_dtype=graph); the others hold f32.
  std::map<int, DType> scratch_dtype;
  std::map<ValueId, PartialBuffers> partials;  // partial row reductions (by reduction node)
  std::vector<std::string> notes;  // graph-level notes
};

// Shared by the passes: the graph, its users, and where each node went.
//
// Pointwise nodes (elementwise ops, expand, transpose, and reshapes that only
// add or drop dims of size 1 — `mapped_reshape`) compute each element from
// their operands at mapped coordinates (broadcast, swapped, or the same with
// size-1 dims moved), so regions and leaf expressions can hold them. Other
// reshapes are views: the operand's buffer read with the reshape's shape (the
// same elements in row-major order); they have no kernel (Plan::buffer
// aliases the operand's).
struct PlanContext {
  const Graph& g;
  Heuristics heur;
  std::string arch = "sm_90a";  // the target (CodegenOptions::arch)
  std::vector<std::vector<ValueId>> users;
  std::vector<bool> leaf_expr;  // inputs, constants, pointwise nodes of those only, views of inputs
  std::vector<int> kernel_of;   // index into Plan::kernels, -1: not placed (or leaf_expr)
  std::vector<bool> mapped_reshape;  // reshapes computed pointwise (see above)
  // The kernel after which a value not placed in a kernel is in memory: a
  // leaf expression a kernel writes out, a view of a value in memory; -1.
  std::vector<int> written_by;

  PlanContext(const Graph& graph, Heuristics h, std::string target_arch = "sm_90a");
  bool placed(ValueId v) const { return kernel_of[static_cast<size_t>(v)] >= 0; }
  bool is_output(ValueId v) const;
  const Node& node(ValueId v) const { return g.node(v); }
  bool pointwise(ValueId v) const;
  bool is_view(ValueId v) const { return g.node(v).op == OpKind::Reshape && !mapped_reshape[static_cast<size_t>(v)]; }
  // The value whose buffer view v reads (through views of views); v itself if it is not a view.
  ValueId view_root(ValueId v) const;
  // Whether view v, a graph output, is written by the kernel that stores its root (pass_buffers: the root's
  // stores go to v's output buffer too, the same elements in row-major order) rather than copied there: every
  // root a kernel computes (not an input or a constant, which only a copy can put in the output).
  bool stored_through_view(ValueId v) const;
  // The kernel that puts v in memory (placed: its kernel), or -1.
  int memory_kernel(ValueId v) const;
  // Whether `user` needs its operands in memory (not pointwise: a row,
  // pool or norm kernel reads them, or a view of them).
  bool reads_memory(ValueId user) const { return !pointwise(user); }
  // Whether the kernel of `user` (a reduction, pool, softmax, norm or gather) can
  // compute its operand v, a leaf expression, at each element it reads instead
  // of reading a buffer (KernelEmitter::operand_at, KernelFunction::load_operand).
  bool recomputes_operand(ValueId user, ValueId v) const;
};

// A reshape that only adds or drops dims of size 1 (the other dims in the
// same order): each element keeps its coordinates along those dims.
bool squeeze_reshape(const Shape& from, const Shape& to);
// The coordinate map of operand `j` of pointwise node `v`, given v's: map[d]
// is the domain dim of v's dim d (-1 for dims of size 1, whose coordinate is
// 0). Broadcasting aligns right; transpose swaps; a mapped reshape pairs the
// dims of size > 1 in order.
std::vector<int> operand_map(const PlanContext& ctx, ValueId v, size_t j, const std::vector<int>& map);
// The map of a tensor of `shape` broadcast (right-aligned) into a domain of
// rank `domain_rank`, -1 for its size-1 dims.
std::vector<int> broadcast_map(const Shape& shape, int domain_rank);
// How kernel `kernel` evaluates leaf expression `v`: the ops (not inputs or
// constants) it recomputes, `v` and the pointwise leaf nodes under it, and
// the leaf expressions an earlier kernel wrote out that it loads instead where
// a transpose (or a reshape) reads them at other coordinates; graph order.
struct LeafEvaluation {
  std::vector<ValueId> ops, loaded;
};
LeafEvaluation recomputed_nodes(const PlanContext& ctx, ValueId v, int kernel);

std::string plan_text(const Graph& g, const Plan& plan);

// Elements of `wide` per element of `rows` when `rows` broadcasts into `wide`
// along trailing dims only (same rank, equal leading dims, then dims of size
// 1 in `rows`): each row's elements are one contiguous run of `wide`. 0 when
// it does not, or the shapes are equal.
int64_t row_broadcast_len(const Shape& rows, const Shape& wide);
// Rows of `wide` when `cols` broadcasts into it along leading dims only (its
// elements are `wide`'s last dim: [N] or [1, .., 1, N] into [.., N], N > 1):
// each element of `cols` is a column of `wide`. 0 when it does not.
int64_t column_broadcast_rows(const Shape& cols, const Shape& wide);
// A row-finish kernel's wide stage: each block takes about this many of its
// elements at a time (whole rows: at least one).
constexpr int64_t kRowFinishWideElementsPerBlock = 4096;

}  // namespace fusejit::cg
