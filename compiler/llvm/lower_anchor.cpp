// The anchor kernel on the CPU: linear, matmul and conv2d as one GEMM view
// C[r, c] = sum_k A[r, k] B[k, c] per problem (batch entry / image x group),
// c contiguous in the output. Work items are MC x NC output tiles; each packs
// KC-deep panels of A (MR rows) and B (NR columns) on its stack, runs the
// register-blocked micro-kernel (lower_gemm_microkernel.cpp) into a tile
// buffer, and applies the region's epilogue tree to every valid element and
// the fused tails (row reductions, a pool: lower_anchor_tails.cpp) to each
// tile row; tails constrain the column blocks (choose_blocking).
#include <algorithm>
#include <optional>

#include "compiler/llvm/lower_anchor.h"

namespace fusejit::cg::cpu {
namespace {

using llvm::Value;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The GEMM each anchor kind becomes (see the file comment).
struct GemmView {
  int64_t rows = 0, cols = 0, depth = 0;  // R, C, K of one problem
  int64_t problems = 1;                   // matmul: batch; conv2d: images x groups
};

GemmView gemm_view(const AnchorGeometry& geo) {
  if (geo.op == OpKind::Conv2d) return {geo.n, geo.oh * geo.ow, geo.k, geo.batch_n * geo.groups};
  return {geo.m, geo.n, geo.k, geo.batch};
}

struct Blocking {
  MicroTile micro;
  int64_t kc = 256, mc = 0, nc = 0;  // kc: the k panel depth (K split evenly)
  int64_t ldc = 0;                    // floats per tile row: nc rounded up to whole micro-panels
  int64_t row_tiles = 0, col_tiles = 0;
  bool row_buffer = false;  // fused tails: one more row of ldc floats
  // The A panels of every k block stay packed while a worker's tiles share
  // their rows (col tiles run fastest; conv2d: every image of a group).
  bool keep_a = false;
  int64_t k_blocks = 1;
  int64_t a_pack_floats() const { return mc * kc * (keep_a ? k_blocks : 1); }
  int64_t stack_bytes() const { return 4 * (a_pack_floats() + kc * micro.nr + mc * ldc + (row_buffer ? ldc : 0)); }
};

constexpr int64_t kMinTiles = 16;                  // work items wanted for 2..16 threads
constexpr int64_t kStackLimit = int64_t{1} << 20;  // worker threads have 8 MiB stacks

// Default micro-tiles with 32 vector registers (AVX-512): 12 x 2 vectors for
// GEMMs, 8 x 3 vectors for convs (measured on the 2-core EPYC, bench/specs_cpu:
// conv b 15.0 -> 13.6 ms, conv c 8.4 -> 7.2 ms; the linears are 5-8% faster at 12 x 2).
// Fused tails constrain the column blocks: `col_unit` -1 (a tile spans every
// column), or NC a multiple of col_unit (whole partial tiles, whole pool
// window bands); the last micro-panel may then reach past NC (into ldc).
// conv2d: `taps` = KH * KW; KC is then a multiple of it (whole input channels
// per k block: Im2colPacker's per-tap masks stay fixed over a block).
Expected<Blocking> choose_blocking(const LowerContext& lc, const GemmView& v, bool conv, int64_t col_unit,
                                   int64_t taps) {
  const CpuHeuristics& h = lc.heur;
  Blocking bl;
  MicroTile& mt = bl.micro;
  mt.lanes = lc.lanes;
  const bool wide = conv && lc.vector_regs >= 32 && h.mr <= 0 && h.nr <= 0;
  mt.nr = h.nr > 0 ? h.nr : (wide ? 3 : 2) * lc.lanes;
  if (mt.nr % lc.lanes)
    return Error("cpu codegen: cpu_tile NR=" + std::to_string(mt.nr) + " is not a multiple of the " +
                 std::to_string(lc.lanes) + " f32 lanes of the target's vectors");
  const int nv = mt.nr / lc.lanes;
  // Accumulators + B vectors + a broadcast within the register file.
  mt.mr = h.mr > 0 ? h.mr : wide ? 8 : std::clamp((lc.vector_regs - nv - 2) / nv, 1, 12);
  const int64_t k_blocks = ceil_div(v.depth, h.kc > 0 ? h.kc : 256);
  bl.kc = std::max<int64_t>(1, ceil_div(v.depth, k_blocks));
  if (conv) bl.kc = round_up(bl.kc, taps);  // depth = (Cin / groups) * taps: K splits into whole channels
  bl.mc = std::min(h.mc > 0 ? round_up(h.mc, mt.mr) : mt.mr * std::max(1, 144 / mt.mr), round_up(v.rows, mt.mr));
  bl.nc = std::min(h.nc > 0 ? round_up(h.nc, mt.nr) : round_up(256, mt.nr), round_up(v.cols, mt.nr));
  const bool whole = col_unit < 0;
  const int64_t col_step = col_unit > 0 ? col_unit : mt.nr;  // NC is a multiple of this
  if (whole) bl.nc = round_up(v.cols, mt.nr);
  if (col_unit > 0) bl.nc = round_up(bl.nc, col_step);
  bl.row_buffer = col_unit != 0;
  auto tiles = [&] { return v.problems * ceil_div(v.rows, bl.mc) * ceil_div(v.cols, bl.nc); };
  while (tiles() < kMinTiles && h.mc <= 0 && h.nc <= 0) {
    if (!whole && bl.nc > col_step && (bl.nc >= bl.mc || bl.mc <= mt.mr))
      bl.nc = round_up(bl.nc / 2, col_step);
    else if (bl.mc > mt.mr)
      bl.mc = round_up(bl.mc / 2, mt.mr);
    else
      break;
  }
  bl.ldc = round_up(bl.nc, mt.nr);
  while (bl.stack_bytes() > kStackLimit && bl.mc > mt.mr && h.mc <= 0) bl.mc = round_up(bl.mc / 2, mt.mr);
  // Even tiles: the same count, sizes balanced.
  bl.row_tiles = ceil_div(v.rows, bl.mc);
  bl.col_tiles = ceil_div(v.cols, bl.nc);
  bl.mc = round_up(ceil_div(v.rows, bl.row_tiles), mt.mr);
  bl.nc = round_up(ceil_div(v.cols, bl.col_tiles), col_step);
  bl.ldc = round_up(bl.nc, mt.nr);
  bl.k_blocks = ceil_div(v.depth, bl.kc);
  bl.keep_a = bl.col_tiles > 1 || v.problems > 1;  // worth it where tiles share A's rows
  if (bl.keep_a && bl.stack_bytes() > kStackLimit) bl.keep_a = false;
  if (bl.stack_bytes() > kStackLimit)
    return Error("cpu codegen: blocking MC=" + std::to_string(bl.mc) + " NC=" + std::to_string(bl.nc) +
                 " KC=" + std::to_string(bl.kc) + " needs " + std::to_string(bl.stack_bytes()) +
                 " bytes of stack per call (at most 1 MiB)");
  return bl;
}

// Emits one anchor kernel (see the file comment); members are the IR values
// of the tile being computed.
class AnchorLowering {
 public:
  AnchorLowering(KernelFunction& kf, const KernelPlan& kp, const AnchorGeometry& geo, const GemmView& view,
                 const Blocking& bl)
      : kf_(kf),
        b_(kf.b()),
        kp_(kp),
        geo_(geo),
        view_(view),
        bl_(bl),
        anchor_(kf.lc().pc.g.node(kp.root)),
        tails_(kf, kp, bl.ldc, kp.tile_n()),
        pool_(kf, kp, geo, bl.ldc) {
    const ValueId x = anchor_.operands[0], w = anchor_.operands[1];
    const auto& buffers = kf.lc().plan.buffer;
    // A is the operand with rows r and contiguous k: conv2d's weight, else x.
    a_ref_ = buffers.at(geo.op == OpKind::Conv2d ? w : x);
    b_ref_ = buffers.at(geo.op == OpKind::Conv2d ? x : w);
    tree_ = build_epilogue_tree(kf.lc().pc, kf.lc().plan, kp.region, kp.root, -1, true);
  }

  void emit() {
    llvm::Type* f32 = kf_.f32_type();
    const MicroTile& mt = bl_.micro;
    a_pack_ = kf_.stack_array(f32, bl_.a_pack_floats(), "a.pack");
    // Which rows of A the packed panels hold (-1: none yet).
    Value* packed_a = bl_.keep_a ? kf_.local(c(-1), "packed.a") : nullptr;
    b_pack_ = kf_.stack_array(f32, bl_.kc * mt.nr, "b.pack");  // one panel
    c_tile_ = kf_.stack_array(f32, bl_.mc * bl_.ldc, "c.tile");
    if (geo_.op == OpKind::Conv2d) im2col_.emplace(kf_, geo_, b_ref_, mt, view_.cols);
    kf_.loop(kf_.begin(), kf_.end(), 1, [&](Value* t) {
      Value* per_problem = c(bl_.row_tiles * bl_.col_tiles);
      Value* p = problem_ = b_.CreateUDiv(t, per_problem, "problem");
      Value* in_problem = b_.CreateURem(t, per_problem);
      r0_ = b_.CreateMul(b_.CreateUDiv(in_problem, c(bl_.col_tiles)), c(bl_.mc), "r0");
      c0_ = b_.CreateMul(b_.CreateURem(in_problem, c(bl_.col_tiles)), c(bl_.nc), "c0");
      rows_ = min(c(bl_.mc), b_.CreateSub(c(view_.rows), r0_), "rows");
      cols_ = min(c(bl_.nc), b_.CreateSub(c(view_.cols), c0_), "cols");
      setup_problem(p);
      Value* a_panels = b_.CreateUDiv(b_.CreateAdd(rows_, c(mt.mr - 1)), c(mt.mr), "a.panels");
      Value* b_panels = b_.CreateUDiv(b_.CreateAdd(cols_, c(mt.nr - 1)), c(mt.nr), "b.panels");
      auto a_block = [&](Value* pc) {  // this k block's A panels
        return bl_.keep_a ? gep(a_pack_, mul(b_.CreateUDiv(pc, c(bl_.kc)), bl_.mc * bl_.kc)) : a_pack_;
      };
      if (bl_.keep_a) {
        Value* key = add(a_off_, mul(r0_, view_.depth));  // A's element offset of the tile's first row
        kf_.if_then(b_.CreateICmpNE(key, b_.CreateLoad(b_.getInt64Ty(), packed_a)), [&] {
          kf_.loop(c(0), c(view_.depth), bl_.kc, [&](Value* pc) {
            pack_a(pc, min(c(bl_.kc), b_.CreateSub(c(view_.depth), pc), "kc"), a_panels, a_block(pc));
          }, "pa.pc");
          b_.CreateStore(key, packed_a);
        });
      }
      kf_.loop(c(0), c(view_.depth), bl_.kc, [&](Value* pc) {
        Value* kc = min(c(bl_.kc), b_.CreateSub(c(view_.depth), pc), "kc");
        Value* a_pack = a_block(pc);
        if (!bl_.keep_a) pack_a(pc, kc, a_panels, a_pack);
        Value* first = b_.CreateICmpEQ(pc, c(0), "first");
        kf_.loop(c(0), b_panels, 1, [&](Value* jp) {
          pack_b(pc, kc, jp);  // into L1, right before the micro-kernels that read it
          Value* b_panel = b_pack_;
          kf_.loop(c(0), a_panels, 1, [&](Value* ip) {
            Value* a_panel = gep(a_pack, b_.CreateMul(ip, c(bl_.kc * mt.mr)));
            Value* tile = gep(c_tile_, b_.CreateAdd(b_.CreateMul(ip, c(mt.mr * bl_.ldc)), b_.CreateMul(jp, c(mt.nr))));
            emit_micro_kernel(kf_, mt, a_panel, b_panel, kc, tile, bl_.ldc, first);
          }, "ip");
        }, "jp");
      }, "pc");
      epilogue();
    }, "tile");
  }

 private:
  KernelFunction& kf_;
  llvm::IRBuilder<>& b_;
  const KernelPlan& kp_;
  const AnchorGeometry& geo_;
  const GemmView& view_;
  const Blocking& bl_;
  const Node& anchor_;
  BufferRef a_ref_, b_ref_;
  EpilogueTree tree_;
  RowTails tails_;
  PoolTail pool_;
  Value *a_pack_ = nullptr, *b_pack_ = nullptr, *c_tile_ = nullptr;
  std::optional<Im2colPacker> im2col_;  // conv2d
  // The current tile and problem.
  Value *r0_ = nullptr, *c0_ = nullptr, *rows_ = nullptr, *cols_ = nullptr, *problem_ = nullptr;
  Value* a_off_ = nullptr;  // element offset of A(0, 0) in its buffer
  Value* b_off_ = nullptr;  // matmul: of B(0, 0); conv2d: of the group's first input channel
  std::vector<Value*> batch_idx_;  // matmul: the output's batch coordinates
  Value *image_ = nullptr, *group_ = nullptr;  // conv2d

  Value* c(int64_t v) { return kf_.i64(v); }
  Value* min(Value* a, Value* b, const std::string& name = "") {
    return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b, name);
  }
  Value* gep(Value* base, Value* offset) { return b_.CreateInBoundsGEP(kf_.f32_type(), base, offset); }
  Value* add(Value* a, Value* b) { return b_.CreateAdd(a, b, "", true, true); }
  Value* mul(Value* a, int64_t v) { return v == 1 ? a : b_.CreateMul(a, c(v), "", true, true); }
  void store_pack(Value* base, Value* offset, Value* v) { b_.CreateAlignedStore(v, gep(base, offset), llvm::Align(4)); }

  // Offset of the batch entry `batch_idx_` in an operand whose batch dims are
  // `shape` (right-aligned to the output's, size-1 dims broadcast).
  Value* batch_offset(const Shape& operand) {
    const int nb = static_cast<int>(operand.size()) - 2, out_nb = static_cast<int>(batch_idx_.size());
    int64_t stride = operand[operand.size() - 1] * operand[operand.size() - 2];
    Value* off = c(0);
    for (int d = nb - 1; d >= 0; --d) {
      const int64_t extent = operand[static_cast<size_t>(d)];
      if (extent != 1) off = add(off, mul(batch_idx_[static_cast<size_t>(out_nb - nb + d)], stride));
      stride *= extent;
    }
    return off;
  }

  void setup_problem(Value* p) {
    const Graph& g = kf_.lc().pc.g;
    if (geo_.op == OpKind::Linear) {
      a_off_ = c(0);
      b_off_ = c(0);
    } else if (geo_.op == OpKind::Matmul) {
      batch_idx_ = decompose(kf_, p, Shape(geo_.out.begin(), geo_.out.end() - 2));
      a_off_ = batch_offset(g.node(anchor_.operands[0]).type.shape);
      b_off_ = batch_offset(g.node(anchor_.operands[1]).type.shape);
    } else {
      image_ = b_.CreateUDiv(p, c(geo_.groups), "image");
      group_ = b_.CreateURem(p, c(geo_.groups), "group");
      a_off_ = mul(group_, view_.rows * view_.depth);
      const int64_t cin_per_group = geo_.cin / geo_.groups;
      b_off_ = mul(add(mul(image_, geo_.cin), mul(group_, cin_per_group)), geo_.h * geo_.w);
    }
  }

  // A panels: Apack[ip][k][i] = A(r0 + ip*MR + i, pc + k); rows past R repeat
  // row R-1 (finite values in accumulators the epilogue never reads).
  void pack_a(Value* pc, Value* kc, Value* a_panels, Value* a_pack) {
    const int mr = bl_.micro.mr;
    kf_.loop(c(0), a_panels, 1, [&](Value* ip) {
      std::vector<Value*> rows;
      for (int i = 0; i < mr; ++i) {
        Value* r = min(add(r0_, add(mul(ip, mr), c(i))), c(view_.rows - 1));
        rows.push_back(add(a_off_, add(mul(r, view_.depth), pc)));
      }
      pack_transposed(a_ref_, rows, gep(a_pack, mul(ip, bl_.kc * mr)), kc);
    }, "pa.panel");
  }

  // Packs k-contiguous rows as a panel: dst[k][j] = src[rows[j] + k] for
  // k < kc, in lanes x lanes blocks transposed in registers (shuffles), then
  // the k tail element by element.
  void pack_transposed(BufferRef ref, const std::vector<Value*>& rows, Value* dst, Value* kc) {
    const int lanes = bl_.micro.lanes, width = static_cast<int>(rows.size());
    auto* vec = llvm::FixedVectorType::get(kf_.f32_type(), static_cast<unsigned>(lanes));
    Value* kc_main = b_.CreateAnd(kc, c(~int64_t{lanes - 1}), "kc.main");
    kf_.loop(c(0), kc_main, lanes, [&](Value* k0) {
      for (int g0 = 0; g0 < width; g0 += lanes) {
        const int n = std::min(lanes, width - g0);
        std::vector<Value*> v;
        for (int j = 0; j < lanes; ++j)  // rows past the panel's width: any row
          v.push_back(load_vector(ref, add(rows[static_cast<size_t>(g0 + std::min(j, n - 1))], k0)));
        transpose(v);
        for (int k = 0; k < lanes; ++k) {
          Value* at = b_.CreateBitCast(gep(dst, add(mul(add(k0, c(k)), width), c(g0))), vec->getPointerTo());
          if (n == lanes) {
            b_.CreateAlignedStore(v[static_cast<size_t>(k)], at, llvm::Align(4));
          } else {
            std::vector<llvm::Constant*> mask;
            for (int l = 0; l < lanes; ++l) mask.push_back(b_.getInt1(l < n));
            b_.CreateMaskedStore(v[static_cast<size_t>(k)], at, llvm::Align(4), llvm::ConstantVector::get(mask));
          }
        }
      }
    }, "pt.k");
    kf_.loop(kc_main, kc, 1, [&](Value* k) {
      for (int j = 0; j < width; ++j)
        store_pack(dst, add(mul(k, width), c(j)), kf_.load_f32(ref, add(rows[static_cast<size_t>(j)], k)));
    }, "pt.tail");
  }

  // lanes consecutive elements of a buffer as f32.
  Value* load_vector(BufferRef ref, Value* offset) {
    const DType dt = kf_.buffer_dtype(ref);
    llvm::FixedVectorType* vt = raw_vector(kf_, dt, bl_.micro.lanes);
    Value* at = b_.CreateBitCast(b_.CreateInBoundsGEP(vt->getElementType(), kf_.buffer(ref), offset),
                                 vt->getPointerTo());
    return widen_to_f32(kf_, dt, b_.CreateAlignedLoad(vt, at, llvm::Align(dt == DType::F32 ? 4 : 2)), bl_.micro.lanes);
  }

  // Transposes lanes x lanes (rows v[i]): swaps the off-diagonal h x h blocks
  // of every 2h x 2h block, h = lanes/2 ... 1.
  void transpose(std::vector<Value*>& v) {
    const int lanes = static_cast<int>(v.size());
    for (int h = lanes / 2; h >= 1; h /= 2) {
      std::vector<int> lo, hi;  // lanes of (v[i], v[i+h]) concatenated
      for (int l = 0; l < lanes; ++l) {
        lo.push_back(l & h ? lanes + l - h : l);
        hi.push_back(l & h ? lanes + l : l + h);
      }
      for (int i = 0; i < lanes; ++i) {
        if (i & h) continue;
        Value* a = v[static_cast<size_t>(i)];
        Value* b = v[static_cast<size_t>(i + h)];
        v[static_cast<size_t>(i)] = b_.CreateShuffleVector(a, b, lo);
        v[static_cast<size_t>(i + h)] = b_.CreateShuffleVector(a, b, hi);
      }
    }
  }

  // B panels: Bpack[jp][k][j] = B(pc + k, c0 + jp*NR + j); columns past C
  // repeat column C-1.
  void pack_b(Value* pc, Value* kc, Value* jp) {
    const int nr = bl_.micro.nr;
    {
      Value* col0 = add(c0_, mul(jp, nr));
      Value* panel = c(0);
      if (geo_.op == OpKind::Linear) {  // B(k, c) = W[c, k]: rows of W transposed
        std::vector<Value*> rows;
        for (int j = 0; j < nr; ++j)
          rows.push_back(add(mul(min(add(col0, c(j)), c(view_.cols - 1)), view_.depth), pc));
        pack_transposed(b_ref_, rows, gep(b_pack_, panel), kc);
      } else if (geo_.op == OpKind::Matmul) {  // B row-major [K, N]: read along c
        auto rows = [&](bool clamp) {
          kf_.loop(c(0), kc, 1, [&](Value* k) {
            Value* src = add(b_off_, mul(add(pc, k), view_.cols));
            Value* dst = add(panel, mul(k, nr));
            kf_.loop(0, nr, 1, [&](Value* j) {
              Value* col = add(col0, j);
              if (clamp) col = min(col, c(view_.cols - 1));
              store_pack(b_pack_, add(dst, j), kf_.load_f32(b_ref_, add(src, col)));
            }, "pb.j");
          }, "pb.k");
        };
        Value* full = b_.CreateICmpSLE(add(col0, c(nr)), c(view_.cols), "full");
        kf_.if_then(full, [&] { rows(false); }, [&] { rows(true); });
      } else {
        im2col_->pack(b_off_, pc, kc, col0, gep(b_pack_, panel));
      }
    }
  }

  // The region's tree at every valid (r, c) of the tile (unless it stores
  // nothing: the fused reductions read the accumulators), then the tails.
  // Output coordinates fixed along tile row r.
  std::vector<Value*> row_lead(Value* r) {
    std::vector<Value*> lead;
    if (geo_.op == OpKind::Linear)
      lead = decompose(kf_, r, Shape(geo_.out.begin(), geo_.out.end() - 1));
    else if (geo_.op == OpKind::Matmul) {
      lead = batch_idx_;
      lead.push_back(r);
    } else
      lead = {image_, add(mul(group_, view_.rows), r)};
    return lead;
  }

  void epilogue() {
    const bool pointwise = !kp_.region.stores.empty() || (tails_.empty() && pool_.empty());
    kf_.loop(c(0), rows_, 1, [&](Value* i) {
      Value* r = add(r0_, i);
      const std::vector<Value*> lead = row_lead(r);
      Value* row = gep(c_tile_, mul(i, bl_.ldc));
      if (!tails_.empty()) tails_.emit_row(row, c0_, cols_, lead, add(mul(problem_, view_.rows), r));
      if (!pool_.empty()) pool_.emit_row(row, c0_, cols_, lead);
      if (pointwise) pointwise_row(row, lead, c(0), cols_);
    }, "ep.r");
  }

  // The region's tree on columns [j0, j1) of a tile row.
  void pointwise_row(Value* row, const std::vector<Value*>& lead, Value* j0, Value* j1) {
    kf_.parallel_loop(j0, j1, [&](Value* j) {
      Value* col = add(c0_, j);
      Value* acc = b_.CreateAlignedLoad(kf_.f32_type(), gep(row, j), llvm::Align(4), "acc");
      std::vector<Value*> idx = lead;
      if (geo_.op == OpKind::Conv2d) {
        idx.push_back(b_.CreateUDiv(col, c(geo_.ow), "oh"));
        idx.push_back(b_.CreateURem(col, c(geo_.ow), "ow"));
      } else {
        idx.push_back(col);
      }
      emit_tree(kf_, tree_, idx, acc);
    }, "ep.c");
  }
};

}  // namespace

Expected<CpuLaunch> lower_anchor_kernel(LowerContext& lc, int index) {
  const KernelPlan& kp = lc.plan.kernels.at(static_cast<size_t>(index));
  if (kp.kind != KernelKind::Anchor) return Error("cpu codegen: kernel " + std::to_string(index) + " is no anchor");
  const AnchorGeometry geo = analyze_anchor(lc.pc.g, kp.root);
  GemmView view = gemm_view(geo);
  int64_t col_unit = 0;  // see choose_blocking
  for (const FusedTail& t : kp.tails) {
    const Node& n = lc.pc.g.node(t.op);
    if (geo.op == OpKind::Conv2d && (n.op == OpKind::MaxPool2d || n.op == OpKind::AvgPool2d)) {
      // Whole bands of KH output rows (the windows' rows); the rows below the last band are never computed.
      col_unit = n.attr_ints("kernel_size")[0] * geo.ow;
      view.cols = n.type.shape[2] * col_unit;
    } else if (geo.op != OpKind::Conv2d && (n.op == OpKind::MaxPool1d || n.op == OpKind::AvgPool1d)) {
      col_unit = n.attr_int("kernel_size");  // whole windows; columns past the last one are never computed
      view.cols = n.type.shape.back() * col_unit;
    } else if (geo.op != OpKind::Conv2d && op_category(n.op) == OpCategory::Reduction) {
      col_unit = t.partial ? kp.tile_n() : -1;
    } else {
      return Error("cpu codegen: internal error: the CPU anchor cannot fuse " + lc.pc.g.describe(t.op));
    }
  }
  if (view.rows < 1 || view.cols < 1 || view.depth < 1)
    return Error("cpu codegen: empty GEMM " + std::to_string(view.rows) + "x" + std::to_string(view.cols) + "x" +
                 std::to_string(view.depth) + " for " + lc.pc.g.describe(kp.root));
  Expected<Blocking> bl = choose_blocking(lc, view, geo.op == OpKind::Conv2d, col_unit, geo.kh * geo.kw);
  if (!bl) return bl.error();
  KernelFunction kf(lc, kp.name.empty() ? "fj_cpu_anchor" : kp.name);
  // Full-width vectors in this function, also for the vectorized loops.
  const std::string width = std::to_string(32 * lc.lanes);
  kf.fn()->addFnAttr("min-legal-vector-width", width);
  kf.fn()->addFnAttr("prefer-vector-width", width);
  AnchorLowering(kf, kp, geo, view, *bl).emit();

  const MicroTile& mt = bl->micro;
  const int64_t tiles = view.problems * bl->row_tiles * bl->col_tiles;
  std::string what = std::string(op_name(geo.op)) + " ";
  if (geo.op == OpKind::Conv2d)
    what += std::to_string(view.problems) + " x (image, group) GEMMs " + std::to_string(view.rows) + "x" +
            std::to_string(view.cols) + "x" + std::to_string(view.depth) + " (implicit im2col)";
  else
    what += (view.problems > 1 ? std::to_string(view.problems) + " x " : "") + std::to_string(view.rows) + "x" +
            std::to_string(view.cols) + "x" + std::to_string(view.depth);
  what += " as " + std::to_string(mt.mr) + "x" + std::to_string(mt.nr) + " micro-tiles, KC " + std::to_string(bl->kc) +
          ", " + std::to_string(bl->mc) + "x" + std::to_string(bl->nc) + " tiles, " + std::to_string(tiles) + " tiles";
  if (bl->keep_a) what += " (A panels packed once per row block)";
  const bool pooled = !kp.tails.empty() && op_category(lc.pc.g.node(kp.tails[0].op).op) == OpCategory::Pool;
  if (col_unit < 0)
    what += ", row reductions on the tile";
  else if (pooled)
    what += ", pooled on the tile (windows in bands of " + std::to_string(col_unit) + " columns)";
  else if (col_unit > 0)
    what += ", row-reduction partials every " + std::to_string(col_unit) + " columns";
  return kf.finish(tiles, 1, what);
}

}  // namespace fusejit::cg::cpu
