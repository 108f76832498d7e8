// conv2d's implicit-im2col B panels for the CPU anchor (lower_anchor.cpp):
// B(k, c) = x[image, group's ci, oh*SH - PH + kh*DH, ow*SW - PW + kw*DW]
// (zero outside the image), k = (ci, kh, kw), c = (oh, ow).
#include <llvm/IR/Intrinsics.h>

#include "compiler/llvm/lower_anchor.h"

namespace fusejit::cg::cpu {
namespace {

// conv2d taps (KH * KW) whose runs and masks a panel keeps in tables, at most.
constexpr int64_t kMaxTableTaps = 64;
constexpr int64_t kPrefetchChannels = 2;  // channels ahead that the copy prefetches
constexpr int64_t kCacheLineBytes = 64;

}  // namespace

using llvm::Value;

llvm::FixedVectorType* raw_vector(KernelFunction& kf, DType dt, int lanes) {
  llvm::IRBuilder<>& b = kf.b();
  llvm::Type* et = dt == DType::F32 ? kf.f32_type() : dt == DType::F16 ? b.getHalfTy() : b.getInt16Ty();
  return llvm::FixedVectorType::get(et, static_cast<unsigned>(lanes));
}

Value* widen_to_f32(KernelFunction& kf, DType dt, Value* v, int lanes) {
  llvm::IRBuilder<>& b = kf.b();
  const auto n = static_cast<unsigned>(lanes);
  auto* f32v = llvm::FixedVectorType::get(kf.f32_type(), n);
  if (dt == DType::F16) return b.CreateFPExt(v, f32v);
  if (dt == DType::BF16)  // the upper half of an f32
    return b.CreateBitCast(b.CreateShl(b.CreateZExt(v, llvm::FixedVectorType::get(b.getInt32Ty(), n)), 16), f32v);
  return v;
}

Im2colPacker::Im2colPacker(KernelFunction& kf, const AnchorGeometry& geo, BufferRef input, const MicroTile& micro,
                           int64_t cols)
    : kf_(kf), b_(kf.b()), geo_(geo), input_(input), micro_(micro), cols_(cols) {
  const int64_t taps = std::min(geo.kh * geo.kw, kMaxTableTaps);
  run_srcs_ = kf.stack_array(b_.getInt64Ty(), 2 * taps, "run.srcs");
  run_masks_ = kf.stack_array(b_.getInt16Ty(), 2 * taps * (micro.nr / micro.lanes), "run.masks");
}

Value* Im2colPacker::add(Value* a, Value* b) { return b_.CreateAdd(a, b, "", true, true); }
Value* Im2colPacker::mul(Value* a, int64_t v) { return v == 1 ? a : b_.CreateMul(a, c(v), "", true, true); }

Im2colPacker::Tap Im2colPacker::tap_of(Value* kg) {
  const int64_t taps = geo_.kh * geo_.kw;
  Value* ci = b_.CreateUDiv(kg, c(taps), "ci");
  Value* tap = b_.CreateURem(kg, c(taps));
  Value* kh = b_.CreateUDiv(tap, c(geo_.kw), "kh");
  Value* kw = b_.CreateURem(tap, c(geo_.kw), "kw");
  return {add(channel0_, mul(ci, geo_.h * geo_.w)), b_.CreateSub(mul(kh, geo_.dh), c(geo_.ph)),
          b_.CreateSub(mul(kw, geo_.dw), c(geo_.pw))};
}

void Im2colPacker::store(Value* offset, Value* v) {
  b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(kf_.f32_type(), panel_, offset), llvm::Align(4));
}

// Element by element, any geometry; columns past C repeat column C-1.
void Im2colPacker::pack_any(Value* pc, Value* kc, Value* col0) {
  const int nr = micro_.nr;
  kf_.loop(c(0), kc, 1, [&](Value* k) {
    const Tap t = tap_of(add(pc, k));
    Value* row = mul(k, nr);
    kf_.loop(0, nr, 1, [&](Value* j) {
      Value* col = b_.CreateSelect(b_.CreateICmpSLT(add(col0, j), c(cols_)), add(col0, j), c(cols_ - 1));
      Value* ih = b_.CreateAdd(mul(b_.CreateUDiv(col, c(geo_.ow)), geo_.sh), t.ih0);
      Value* iw = b_.CreateAdd(mul(b_.CreateURem(col, c(geo_.ow)), geo_.sw), t.iw0);
      Value* inside = b_.CreateAnd(b_.CreateICmpULT(ih, c(geo_.h)), b_.CreateICmpULT(iw, c(geo_.w)), "inside");
      Value* at = b_.CreateSelect(inside, b_.CreateAdd(t.channel, b_.CreateAdd(mul(ih, geo_.w), iw)), c(0));
      store(add(row, j), b_.CreateSelect(inside, kf_.load_f32(input_, at), kf_.f32(0.0)));
    }, "pb.j");
  }, "pb.k");
}

void Im2colPacker::pack(Value* channel0, Value* pc, Value* kc, Value* col0, Value* panel) {
  channel0_ = channel0;
  panel_ = panel;
  const int nr = micro_.nr;
  if (geo_.sw != 1 || geo_.dw != 1 || geo_.ow < nr) return pack_any(pc, kc, col0);
  // Stride 1 along w and a full panel of at most two output rows (OW >= NR):
  // each tap reads a contiguous run of input row `oh` for the panel's first
  // `split` columns and of row oh + 1 for the rest, masked at the borders.
  oh_ = b_.CreateUDiv(col0, c(geo_.ow), "oh");
  ow0_ = b_.CreateURem(col0, c(geo_.ow), "ow0");
  split_ = b_.CreateSub(c(geo_.ow), ow0_, "split");  // columns on row oh
  Value* full = b_.CreateICmpSLE(add(col0, c(nr)), c(cols_), "full.panel");
  kf_.if_then(full, [&] {
    const int64_t taps = geo_.kh * geo_.kw;
    if (taps > kMaxTableTaps) {
      kf_.loop(c(0), kc, 1, [&](Value* k) {
        const Tap t = tap_of(add(pc, k));
        copy_row(run_of(t.channel, t.ih0, t.iw0), c(0), k);
      }, "pb.rows.k");
    } else {
      pack_channels(pc, kc);
    }
  }, [&] { pack_any(pc, kc, col0); });
}

// The panel's input runs for one tap: row oh's from lane 0's input column for
// the first `split` columns, row oh + 1's for the rest, each masked at the
// borders (masks per group of lanes).
Im2colPacker::Run Im2colPacker::run_of(Value* channel, Value* ih0, Value* iw0) {
  const int lanes = micro_.lanes, groups = micro_.nr / lanes;
  auto splat = [&](Value* v) { return b_.CreateVectorSplat(static_cast<unsigned>(lanes), v); };
  Run r;
  Value* ih = b_.CreateAdd(mul(oh_, geo_.sh), ih0, "ih");
  Value* ih2 = b_.CreateAdd(ih, c(geo_.sh), "ih2");
  Value* row_ok = b_.CreateICmpULT(ih, c(geo_.h), "row.ok");
  Value* row2_ok = b_.CreateICmpULT(ih2, c(geo_.h), "row2.ok");
  Value* iw = b_.CreateAdd(ow0_, iw0, "iw");  // lane 0's input column
  r.src = b_.CreateAdd(channel, b_.CreateAdd(b_.CreateMul(ih, c(geo_.w)), iw));
  // Row oh + 1 starts at ow = 0, i.e. input column iw0, at panel column `split`.
  r.src2 = b_.CreateSub(b_.CreateAdd(channel, b_.CreateAdd(b_.CreateMul(ih2, c(geo_.w)), iw0)), split_);
  for (int g = 0; g < groups; ++g) {
    std::vector<llvm::Constant*> js;
    for (int l = 0; l < lanes; ++l) js.push_back(b_.getInt64(static_cast<uint64_t>(g * lanes + l)));
    Value* j = llvm::ConstantVector::get(js);
    Value* first = b_.CreateICmpSLT(j, splat(split_), "first.row");
    Value* in1 = b_.CreateICmpULT(b_.CreateAdd(splat(iw), j), splat(c(geo_.w)));
    Value* in2 = b_.CreateICmpULT(b_.CreateSub(b_.CreateAdd(splat(iw0), j), splat(split_)), splat(c(geo_.w)));
    r.mask1.push_back(b_.CreateAnd(b_.CreateAnd(first, in1), splat(row_ok)));
    r.mask2.push_back(b_.CreateAnd(b_.CreateAnd(b_.CreateNot(first), in2), splat(row2_ok)));
  }
  return r;
}

// Row k of the panel from a run `shift` elements further on: the two rows'
// loads merge under their disjoint masks (zero elsewhere).
void Im2colPacker::copy_row(const Run& r, Value* shift, Value* k) {
  const int lanes = micro_.lanes, groups = micro_.nr / lanes;
  const DType dt = kf_.buffer_dtype(input_);
  llvm::FixedVectorType* vt = raw_vector(kf_, dt, lanes);
  const llvm::Align align(dt == DType::F32 ? 4 : 2);
  Value* row = mul(k, micro_.nr);
  for (int g = 0; g < groups; ++g) {
    // Not inbounds: masked-off lanes may point outside the input.
    auto at = [&](Value* src) {
      return b_.CreateBitCast(b_.CreateGEP(vt->getElementType(), kf_.buffer(input_), add(add(src, shift), c(g * lanes))),
                              vt->getPointerTo());
    };
    const auto gi = static_cast<size_t>(g);
    Value* v = b_.CreateMaskedLoad(vt, at(r.src), align, r.mask1[gi], llvm::Constant::getNullValue(vt));
    v = widen_to_f32(kf_, dt, b_.CreateMaskedLoad(vt, at(r.src2), align, r.mask2[gi], v), lanes);
    Value* out = b_.CreateBitCast(b_.CreateInBoundsGEP(kf_.f32_type(), panel_, add(row, c(g * lanes))),
                                  v->getType()->getPointerTo());
    b_.CreateAlignedStore(v, out, llvm::Align(64));
  }
}

// KC holds whole channels (choose_blocking): each tap's runs and masks once
// per panel (into the tables), then every channel copies the taps' runs a
// plane further on. Rolled loops: small IR, quick O3.
void Im2colPacker::pack_channels(Value* pc, Value* kc) {
  const int lanes = micro_.lanes, groups = micro_.nr / lanes;
  const auto n = static_cast<unsigned>(lanes);
  const int64_t taps = geo_.kh * geo_.kw;
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i16 = b_.getInt16Ty();  // a mask of at most 16 lanes
  auto* mask_int = llvm::Type::getIntNTy(b_.getContext(), n);
  auto src_at = [&](Value* t, int h) { return b_.CreateInBoundsGEP(i64, run_srcs_, add(mul(t, 2), c(h))); };
  auto mask_at = [&](Value* t, int h, int g) {
    return b_.CreateInBoundsGEP(i16, run_masks_, add(mul(t, 2 * groups), c(h * groups + g)));
  };
  kf_.loop(c(0), c(taps), 1, [&](Value* t) {
    Value* kh = b_.CreateUDiv(t, c(geo_.kw));
    Value* kw = b_.CreateURem(t, c(geo_.kw));
    const Run r = run_of(channel0_, b_.CreateSub(mul(kh, geo_.dh), c(geo_.ph)), b_.CreateSub(mul(kw, geo_.dw), c(geo_.pw)));
    b_.CreateStore(r.src, src_at(t, 0));
    b_.CreateStore(r.src2, src_at(t, 1));
    for (int g = 0; g < groups; ++g)
      for (int h = 0; h < 2; ++h)
        b_.CreateStore(b_.CreateZExtOrTrunc(b_.CreateBitCast((h ? r.mask2 : r.mask1)[static_cast<size_t>(g)], mask_int), i16),
                       mask_at(t, h, g));
  }, "pb.taps");
  kf_.keep_rolled();
  const bool unpadded = geo_.ph == 0 && geo_.pw == 0;
  if (!unpadded) {
    copy_channels(pc, kc, [&](Value* t, Value* shift, Value* k) {
      Run r;
      r.src = b_.CreateLoad(i64, src_at(t, 0));
      r.src2 = b_.CreateLoad(i64, src_at(t, 1));
      for (int h = 0; h < 2; ++h)
        for (int g = 0; g < groups; ++g) {
          Value* m = b_.CreateZExtOrTrunc(b_.CreateLoad(i16, mask_at(t, h, g)), mask_int);
          (h ? r.mask2 : r.mask1).push_back(b_.CreateBitCast(m, llvm::FixedVectorType::get(b_.getInt1Ty(), n)));
        }
      copy_row(r, shift, k);
    });
    return;
  }
  // No padding (stride 1 along w): lanes before the split read row oh's run,
  // the rest row oh + 1's; both runs stay inside the input (a run reaching
  // past its row end reads the next row of the plane, a lane the blend
  // drops), and row oh + 1 exists whenever a full panel reaches it.
  std::vector<Value*> first;
  for (int g = 0; g < groups; ++g) {
    std::vector<llvm::Constant*> js;
    for (int l = 0; l < lanes; ++l) js.push_back(b_.getInt64(static_cast<uint64_t>(g * lanes + l)));
    first.push_back(b_.CreateICmpSLT(llvm::ConstantVector::get(js), b_.CreateVectorSplat(n, split_), "first.row"));
  }
  Value* one_row = b_.CreateICmpSGE(split_, c(micro_.nr), "one.row");
  kf_.if_then(one_row, [&] {
    copy_channels(pc, kc, [&](Value* t, Value* shift, Value* k) {
      copy_row_unpadded(b_.CreateLoad(i64, src_at(t, 0)), nullptr, first, shift, k);
    });
  }, [&] {
    copy_channels(pc, kc, [&](Value* t, Value* shift, Value* k) {
      copy_row_unpadded(b_.CreateLoad(i64, src_at(t, 0)), b_.CreateLoad(i64, src_at(t, 1)), first, shift, k);
    });
  });
}

// Every channel of rows [pc, pc + kc): each tap's row through `copy_tap(t,
// shift, k)` (shift: the channel's plane offset), prefetching the rows of
// the channel kPrefetchChannels ahead (hardware prefetchers stop at page
// ends). Rolled loops: small IR, quick O3.
void Im2colPacker::copy_channels(Value* pc, Value* kc, const std::function<void(Value*, Value*, Value*)>& copy_tap) {
  const int64_t taps = geo_.kh * geo_.kw;
  llvm::Type* i64 = b_.getInt64Ty();
  auto src_at = [&](Value* t, int h) { return b_.CreateInBoundsGEP(i64, run_srcs_, add(mul(t, 2), c(h))); };
  Value* ci0 = b_.CreateUDiv(pc, c(taps), "ci0");
  const DType dt = kf_.buffer_dtype(input_);
  llvm::Type* elem = raw_vector(kf_, dt, micro_.lanes)->getElementType();
  const int64_t line = kCacheLineBytes / (dt == DType::F32 ? 4 : 2);  // elements per cache line
  llvm::Function* prefetch =
      llvm::Intrinsic::getDeclaration(&kf_.lc().module, llvm::Intrinsic::prefetch, {b_.getInt8PtrTy()});
  kf_.loop(c(0), b_.CreateUDiv(kc, c(taps)), 1, [&](Value* ci) {
    Value* shift = mul(add(ci0, ci), geo_.h * geo_.w);
    Value* ahead = add(shift, c(kPrefetchChannels * geo_.h * geo_.w));
    for (int64_t t = 0; t < taps; t += geo_.kw)  // the runs of taps (kh, 0)
      for (int h = 0; h < 2; ++h) {
        Value* src = b_.CreateLoad(i64, src_at(c(t), h));
        for (int64_t off = 0; off < micro_.nr; off += line) {
          Value* at = b_.CreateGEP(elem, kf_.buffer(input_), add(add(src, ahead), c(off)));
          b_.CreateCall(prefetch, {b_.CreateBitCast(at, b_.getInt8PtrTy()), b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
        }
      }
    kf_.loop(c(0), c(taps), 1, [&](Value* t) { copy_tap(t, shift, add(mul(ci, taps), t)); }, "pb.tap");
    kf_.keep_rolled();
  }, "pb.ci");
}

// Row k of the panel from plain loads of the runs at src (and src2, blended
// in after the split; null: the panel lies on one output row).
void Im2colPacker::copy_row_unpadded(Value* src, Value* src2, const std::vector<Value*>& first, Value* shift,
                                     Value* k) {
  const int lanes = micro_.lanes, groups = micro_.nr / lanes;
  const DType dt = kf_.buffer_dtype(input_);
  llvm::FixedVectorType* vt = raw_vector(kf_, dt, lanes);
  const llvm::Align align(dt == DType::F32 ? 4 : 2);
  Value* row = mul(k, micro_.nr);
  for (int g = 0; g < groups; ++g) {
    auto load = [&](Value* s) {
      Value* at = b_.CreateInBoundsGEP(vt->getElementType(), kf_.buffer(input_), add(add(s, shift), c(g * lanes)));
      return b_.CreateAlignedLoad(vt, b_.CreateBitCast(at, vt->getPointerTo()), align);
    };
    Value* v = load(src);
    if (src2) v = b_.CreateSelect(first[static_cast<size_t>(g)], v, load(src2));
    v = widen_to_f32(kf_, dt, v, lanes);
    Value* out = b_.CreateBitCast(b_.CreateInBoundsGEP(kf_.f32_type(), panel_, add(row, c(g * lanes))),
                                  v->getType()->getPointerTo());
    b_.CreateAlignedStore(v, out, llvm::Align(64));
  }
}

}  // namespace fusejit::cg::cpu
