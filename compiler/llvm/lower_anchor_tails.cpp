// The tails fused into the CPU anchor kernel: row reductions along N
// (pass_fuse_reduction.cpp) and pools (pass_fuse_pool.cpp; pool1d along N:
// cpu_codegen.cpp). Per row of a finished tile, the value a tail reads is
// computed from the accumulators into a row buffer on the stack, then reduced
// there (reductions: vector max / min with NaN propagating, sums left to the
// loop vectorizer with reassociation; pools: each window, unrolled). The
// anchor's full output is not written unless the plan stores it elsewhere.
#include <cmath>

#include "compiler/llvm/lower_anchor.h"

namespace fusejit::cg::cpu {

using llvm::Value;

bool is_identity_tree(const EpilogueTree& pre) {
  // Source, then the anchor itself without a bias: the accumulator as it is.
  return pre.nodes.size() == 2 && pre.result == 1 && pre.nodes[1].args.size() == 1;
}

RowTails::RowTails(KernelFunction& kf, const KernelPlan& kp, int64_t ldc, int64_t unit)
    : kf_(kf), unit_(unit) {
  const PlanContext& pc = kf.lc().pc;
  for (const FusedTail& t : kp.tails) {
    if (op_category(pc.g.node(t.op).op) != OpCategory::Reduction) continue;
    Tail tail{&t, &pc.g.node(t.op), {}, {}, false};
    tail.pre = build_epilogue_tree(pc, kf.lc().plan, kp.region, kp.root, tail.node->operands[0], false);
    tail.identity = is_identity_tree(tail.pre);
    if (!t.partial) tail.post = build_epilogue_tree(pc, kf.lc().plan, t.post, t.op, -1, true);
    tails_.push_back(std::move(tail));
  }
  if (!tails_.empty()) row_buf_ = kf.stack_array(kf.f32_type(), ldc, "tail.row");
}

Value* RowTails::extreme(bool is_max, Value* buf, Value* lo, Value* hi) {
  llvm::IRBuilder<>& b = kf_.b();
  const int lanes = kf_.lc().lanes;
  auto* vec = llvm::FixedVectorType::get(kf_.f32_type(), static_cast<unsigned>(lanes));
  Value* init = kf_.f32(is_max ? -INFINITY : INFINITY);
  auto combine = [&](Value* a, Value* x) {  // lane-wise on vectors: NaN stays in its lane
    Value* better = is_max ? b.CreateFCmpOGT(a, x) : b.CreateFCmpOLT(a, x);
    return b.CreateSelect(b.CreateOr(better, b.CreateFCmpUNO(a, a)), a, x);
  };
  Value* main_end = b.CreateAdd(lo, b.CreateAnd(b.CreateSub(hi, lo), kf_.i64(~int64_t{lanes - 1})), "main.end");
  Value* accv = kf_.local(b.CreateVectorSplat(static_cast<unsigned>(lanes), init), "ext.v");
  kf_.loop(lo, main_end, lanes, [&](Value* k) {
    Value* at = b.CreateBitCast(b.CreateInBoundsGEP(kf_.f32_type(), buf, k), vec->getPointerTo());
    b.CreateStore(combine(b.CreateLoad(vec, accv), b.CreateAlignedLoad(vec, at, llvm::Align(4))), accv);
  }, "ext.v");
  Value* v = b.CreateLoad(vec, accv);
  Value* acc = b.CreateExtractElement(v, uint64_t{0});
  for (int l = 1; l < lanes; ++l) acc = combine(acc, b.CreateExtractElement(v, static_cast<uint64_t>(l)));
  Value* accs = kf_.local(acc, "ext");
  kf_.loop(main_end, hi, 1, [&](Value* k) {
    Value* x = b.CreateLoad(kf_.f32_type(), b.CreateInBoundsGEP(kf_.f32_type(), buf, k));
    b.CreateStore(combine(b.CreateLoad(kf_.f32_type(), accs), x), accs);
  }, "ext.tail");
  return b.CreateLoad(kf_.f32_type(), accs);
}

std::pair<Value*, Value*> RowTails::reduce(OpKind op, Value* buf, Value* lo, Value* hi) {
  llvm::IRBuilder<>& b = kf_.b();
  llvm::Type* f32 = kf_.f32_type();
  if (op == OpKind::Max || op == OpKind::Min) return {extreme(op == OpKind::Max, buf, lo, hi), nullptr};
  Value* m = op == OpKind::LogSumExp ? extreme(true, buf, lo, hi) : nullptr;
  Value* sum = kf_.local(kf_.f32(0), "sum");
  kf_.loop(lo, hi, 1, [&](Value* k) {
    Value* x = b.CreateLoad(f32, b.CreateInBoundsGEP(f32, buf, k));
    if (m) x = kf_.call_math("expf", {b.CreateFSub(x, m)});
    b.CreateStore(sum_add(b, b.CreateLoad(f32, sum), x), sum);
  }, "sum");
  return {b.CreateLoad(f32, sum), m};
}

void RowTails::emit_row(Value* acc, Value* c0, Value* cols, const std::vector<Value*>& lead, Value* row) {
  llvm::IRBuilder<>& b = kf_.b();
  llvm::Type* f32 = kf_.f32_type();
  const Plan& plan = kf_.lc().plan;
  for (const Tail& t : tails_) {
    Value* buf = acc;
    if (!t.identity) {
      buf = row_buf_;
      kf_.parallel_loop(kf_.i64(0), cols, [&](Value* j) {
        std::vector<Value*> idx = lead;
        idx.push_back(b.CreateAdd(c0, j, "", true, true));
        Value* a = b.CreateAlignedLoad(f32, b.CreateInBoundsGEP(f32, acc, j), llvm::Align(4), "acc");
        b.CreateStore(emit_tree(kf_, t.pre, idx, a), b.CreateInBoundsGEP(f32, row_buf_, j));
      }, "pre.c");
    }
    const OpKind op = t.node->op;
    if (!t.plan->partial) {  // the tile spans N
      auto [v, m] = reduce(op, buf, kf_.i64(0), cols);
      if (op == OpKind::Mean) v = b.CreateFDiv(v, b.CreateSIToFP(cols, f32));
      if (op == OpKind::LogSumExp) {
        Value* lse = b.CreateFAdd(m, kf_.call_math("logf", {v}));
        v = b.CreateSelect(b.CreateFCmpOEQ(b.CreateFSub(m, m), kf_.f32(0)), lse, m);  // inf / NaN: the maximum
      }
      std::vector<Value*> idx = lead;
      if (t.node->attr_bool("keepdim")) idx.push_back(kf_.i64(0));
      emit_tree(kf_, t.post, idx, v);
      continue;
    }
    // One partial per `unit` columns: partial tile (c0 + s) / unit.
    const PartialBuffers& pb = plan.partials.at(t.plan->op);
    Value* parts = b.CreateUDiv(b.CreateAdd(cols, kf_.i64(unit_ - 1)), kf_.i64(unit_), "parts");
    Value* first_tile = b.CreateUDiv(c0, kf_.i64(unit_));
    kf_.loop(kf_.i64(0), parts, 1, [&](Value* s) {
      Value* lo = b.CreateMul(s, kf_.i64(unit_), "", true, true);
      Value* end = b.CreateAdd(lo, kf_.i64(unit_), "", true, true);
      Value* hi = b.CreateSelect(b.CreateICmpSLT(end, cols), end, cols);
      auto [v, m] = reduce(op, buf, lo, hi);
      Value* at = b.CreateAdd(b.CreateMul(b.CreateAdd(first_tile, s), kf_.i64(pb.rows)), row, "", true, true);
      kf_.store_f32({BufferKind::Scratch, pb.sums}, at, v);
      if (m) kf_.store_f32({BufferKind::Scratch, pb.maxima}, at, m);
    }, "part");
  }
}

// ---- pools ----------------------------------------------------------------------

PoolTail::PoolTail(KernelFunction& kf, const KernelPlan& kp, const AnchorGeometry& geo, int64_t ldc) : kf_(kf) {
  const PlanContext& pc = kf.lc().pc;
  for (const FusedTail& t : kp.tails)
    if (op_category(pc.g.node(t.op).op) == OpCategory::Pool) tail_ = &t;
  if (!tail_) return;
  const Node& p = pc.g.node(tail_->op);
  is_max_ = p.op == OpKind::MaxPool2d || p.op == OpKind::MaxPool1d;
  two_d_ = p.op == OpKind::MaxPool2d || p.op == OpKind::AvgPool2d;
  if (two_d_) {
    kh_ = p.attr_ints("kernel_size")[0];
    kw_ = p.attr_ints("kernel_size")[1];
    ow_ = geo.ow;
    pw_ = p.type.shape[3];
  } else {
    kw_ = p.attr_int("kernel_size");
  }
  pre_ = build_epilogue_tree(pc, kf.lc().plan, kp.region, kp.root, p.operands[0], false);
  identity_ = is_identity_tree(pre_);
  post_ = build_epilogue_tree(pc, kf.lc().plan, tail_->post, tail_->op, -1, true);
  row_buf_ = kf.stack_array(kf.f32_type(), ldc, "pool.row");
}

void PoolTail::emit_row(Value* acc, Value* c0, Value* cols, const std::vector<Value*>& lead) {
  llvm::IRBuilder<>& b = kf_.b();
  llvm::Type* f32 = kf_.f32_type();
  Value* buf = acc;
  if (!identity_) {  // the pooled value at every pixel of the row
    buf = row_buf_;
    kf_.parallel_loop(kf_.i64(0), cols, [&](Value* j) {
      Value* col = b.CreateAdd(c0, j, "", true, true);
      std::vector<Value*> idx = lead;
      if (two_d_) {
        idx.push_back(b.CreateUDiv(col, kf_.i64(ow_), "oh"));
        idx.push_back(b.CreateURem(col, kf_.i64(ow_), "ow"));
      } else {
        idx.push_back(col);
      }
      Value* a = b.CreateAlignedLoad(f32, b.CreateInBoundsGEP(f32, acc, j), llvm::Align(4), "acc");
      b.CreateStore(emit_tree(kf_, pre_, idx, a), b.CreateInBoundsGEP(f32, row_buf_, j));
    }, "pool.pre");
  }
  // One window at `at` of the buffer, in the pool kernel's order (rows, then columns).
  auto window = [&](Value* at) {
    Value* v = is_max_ ? kf_.f32(-INFINITY) : kf_.f32(0);
    for (int64_t dh = 0; dh < kh_; ++dh)
      for (int64_t dw = 0; dw < kw_; ++dw) {
        Value* x = b.CreateLoad(f32, b.CreateInBoundsGEP(f32, buf, b.CreateAdd(at, kf_.i64(dh * ow_ + dw))));
        v = is_max_ ? max_nan(b, v, x) : b.CreateFAdd(v, x);
      }
    return is_max_ ? v : b.CreateFDiv(v, kf_.f32(static_cast<double>(kh_ * kw_)));
  };
  if (!two_d_) {  // windows of kw columns along the row
    Value* first = b.CreateUDiv(c0, kf_.i64(kw_), "w0");
    kf_.parallel_loop(kf_.i64(0), b.CreateUDiv(cols, kf_.i64(kw_)), [&](Value* w) {
      std::vector<Value*> idx = lead;
      idx.push_back(b.CreateAdd(first, w, "", true, true));
      emit_tree(kf_, post_, idx, window(b.CreateMul(w, kf_.i64(kw_), "", true, true)));
    }, "pool.w");
    return;
  }
  const int64_t band = kh_ * ow_;
  Value* bands = b.CreateUDiv(cols, kf_.i64(band), "bands");
  Value* ph0 = b.CreateUDiv(c0, kf_.i64(band), "ph0");
  kf_.loop(kf_.i64(0), bands, 1, [&](Value* r) {
    Value* base = b.CreateMul(r, kf_.i64(band), "", true, true);
    Value* ph = b.CreateAdd(ph0, r, "ph", true, true);
    kf_.parallel_loop(kf_.i64(0), kf_.i64(pw_), [&](Value* pw) {
      Value* at = b.CreateAdd(base, b.CreateMul(pw, kf_.i64(kw_), "", true, true), "", true, true);
      std::vector<Value*> idx = lead;
      idx.push_back(ph);
      idx.push_back(pw);
      emit_tree(kf_, post_, idx, window(at));
    }, "pool.pw");
  }, "pool.band");
}

}  // namespace fusejit::cg::cpu
