// compiler/llvm/lower_anchor.h — internal to lower_anchor*.cpp: the GEMM
// micro-kernel that lower_anchor_kernel calls once per (MR x NR) micro-tile,
// conv2d's im2col panel packing, and the fused tails (row reductions, pools)
// it applies to finished tiles.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "compiler/llvm/lower.h"

namespace fusejit::cg::cpu {

// C[MR x NR] (+)= Ap * Bp over `kc` steps, accumulators in registers:
//   a_panel: f32 [kc][MR] (one MR-column of A per k, packed),
//   b_panel: f32 [kc][NR] (NR a multiple of `lanes`, 64-byte aligned rows),
//   c_tile:  f32 rows of `ldc` floats (64-byte aligned), written when `first`
//            (i1) is true, else added to.
struct MicroTile {
  int mr = 12, nr = 32, lanes = 16;
};
void emit_micro_kernel(KernelFunction& kf, const MicroTile& t, llvm::Value* a_panel, llvm::Value* b_panel,
                       llvm::Value* kc, llvm::Value* c_tile, int64_t ldc, llvm::Value* first);

// The anchor's fused row reductions along N (the plan's tails), applied to
// each row of a finished tile (lower_anchor_tails.cpp). A whole tail (one
// tile spans N) reduces the row and runs its consumers; a partial one stores
// one partial per `unit` columns (the plan's tile width: nc is a multiple of
// it) for the row-finish kernel.
class RowTails {
 public:
  // `ldc`: floats a tile row holds (its row buffer); `unit`: columns per partial.
  RowTails(KernelFunction& kf, const KernelPlan& kp, int64_t ldc, int64_t unit);
  bool empty() const { return tails_.empty(); }
  // One tile row: `acc` its accumulators (f32, `cols` valid), `c0` the tile's
  // first column, `lead` the output coordinates fixed along the row, `row`
  // its index in the reductions' flattened outputs.
  void emit_row(llvm::Value* acc, llvm::Value* c0, llvm::Value* cols, const std::vector<llvm::Value*>& lead,
                llvm::Value* row);

 private:
  struct Tail {
    const FusedTail* plan;
    const Node* node;
    EpilogueTree pre;   // the value reduced, from the accumulator
    EpilogueTree post;  // whole tails: the consumers of the result
    bool identity;      // pre is the raw accumulator
  };
  KernelFunction& kf_;
  int64_t unit_;
  std::vector<Tail> tails_;
  llvm::Value* row_buf_ = nullptr;
  // Reduces buf[lo, hi): the sum / max / min, or for logsumexp the pair
  // (sum of exp(v - max), max).
  std::pair<llvm::Value*, llvm::Value*> reduce(OpKind op, llvm::Value* buf, llvm::Value* lo, llvm::Value* hi);
  llvm::Value* extreme(bool is_max, llvm::Value* buf, llvm::Value* lo, llvm::Value* hi);
};

// A max / avg pool fused into the anchor (kernel == stride, no padding):
// a conv's pool2d (pass_fuse_pool.cpp), applied to each channel row of a
// finished tile whose columns are whole bands of KH output rows (NC a
// multiple of KH x OW), or a linear / matmul's pool1d along N
// (pass_fuse_pool1d.cpp), to each row of a tile of whole windows (NC a
// multiple of K).
class PoolTail {
 public:
  // `ldc`: floats a tile row holds (its row buffer).
  PoolTail(KernelFunction& kf, const KernelPlan& kp, const AnchorGeometry& geo, int64_t ldc);
  bool empty() const { return tail_ == nullptr; }
  // One tile row: `acc` its accumulators (f32, `cols` valid, whole bands),
  // `c0` the tile's first column (a band start), `lead` the output
  // coordinates fixed along the row (conv: {image, channel}).
  void emit_row(llvm::Value* acc, llvm::Value* c0, llvm::Value* cols, const std::vector<llvm::Value*>& lead);

 private:
  KernelFunction& kf_;
  const FusedTail* tail_ = nullptr;
  EpilogueTree pre_, post_;
  bool identity_ = false, is_max_ = false, two_d_ = true;
  int64_t kh_ = 1, kw_ = 1, ow_ = 1, pw_ = 1;  // window, conv output width, pooled width (2-D)
  llvm::Value* row_buf_ = nullptr;
};

// <lanes x element> of a buffer's dtype, and such a vector widened to f32
// (lower_im2col.cpp).
llvm::FixedVectorType* raw_vector(KernelFunction& kf, DType dt, int lanes);
llvm::Value* widen_to_f32(KernelFunction& kf, DType dt, llvm::Value* v, int lanes);

// conv2d's implicit-im2col B panels (lower_im2col.cpp): B(k, c) = x[image,
// group's ci, oh*SH - PH + kh*DH, ow*SW - PW + kw*DW] (zero outside the
// image), k = (ci, kh, kw), c = (oh, ow) < `cols`. Stride-1 rows of a full
// panel are copied with border-masked vector loads: per-tap runs and masks go
// into small tables once per panel (KC must then hold whole channels: a
// multiple of KH * KW), then each channel copies them a plane further on,
// prefetching ahead; other panels go element by element. Without padding
// every lane of a run is inside its plane: plain loads, blended at the
// panel's row split (no per-tap masks).
class Im2colPacker {
 public:
  Im2colPacker(KernelFunction& kf, const AnchorGeometry& geo, BufferRef input, const MicroTile& micro, int64_t cols);
  // Rows [pc, pc + kc) of the NR-column panel at column col0 into `panel`
  // (f32 [kc][NR], 64-byte aligned); channel0: the element offset of the
  // image's and group's first input channel.
  void pack(llvm::Value* channel0, llvm::Value* pc, llvm::Value* kc, llvm::Value* col0, llvm::Value* panel);

 private:
  struct Tap {
    llvm::Value *channel, *ih0, *iw0;  // the channel's offset; the tap's input row/column at oh = ow = 0
  };
  struct Run {
    llvm::Value *src, *src2;  // lane 0's input offsets on rows oh and oh + 1
    std::vector<llvm::Value*> mask1, mask2;
  };
  Tap tap_of(llvm::Value* k);
  Run run_of(llvm::Value* channel, llvm::Value* ih0, llvm::Value* iw0);
  void copy_row(const Run& r, llvm::Value* shift, llvm::Value* k);
  void copy_row_unpadded(llvm::Value* src, llvm::Value* src2, const std::vector<llvm::Value*>& first,
                         llvm::Value* shift, llvm::Value* k);
  void pack_channels(llvm::Value* pc, llvm::Value* kc);
  void copy_channels(llvm::Value* pc, llvm::Value* kc, const std::function<void(llvm::Value* t, llvm::Value* shift,
                                                                                 llvm::Value* k)>& copy_tap);
  void pack_any(llvm::Value* pc, llvm::Value* kc, llvm::Value* col0);
  void store(llvm::Value* offset, llvm::Value* v);
  llvm::Value* c(int64_t v) { return kf_.i64(v); }
  llvm::Value* add(llvm::Value* a, llvm::Value* b);
  llvm::Value* mul(llvm::Value* a, int64_t v);

  KernelFunction& kf_;
  llvm::IRBuilder<>& b_;
  const AnchorGeometry& geo_;
  BufferRef input_;
  MicroTile micro_;
  int64_t cols_;
  llvm::Value *run_srcs_ = nullptr, *run_masks_ = nullptr;  // per tap: {src, src2}; {mask1, mask2} per group
  // The panel being packed.
  llvm::Value *channel0_ = nullptr, *panel_ = nullptr, *oh_ = nullptr, *ow0_ = nullptr, *split_ = nullptr;
};

// Whether `pre` (a tree from the anchor's source to a result) is the raw accumulator.
bool is_identity_tree(const EpilogueTree& pre);

}  // namespace fusejit::cg::cpu
