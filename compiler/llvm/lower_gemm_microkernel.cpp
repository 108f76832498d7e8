// The register-blocked GEMM micro-kernel: MR x NR accumulators as
// <lanes x float> SSA values (phis of the k loop), one broadcast of A and
// NR/lanes vector loads of B per k step, llvm.fma on vectors.
#include <llvm/IR/Intrinsics.h>

#include "compiler/llvm/lower_anchor.h"

namespace fusejit::cg::cpu {

using llvm::Value;

void emit_micro_kernel(KernelFunction& kf, const MicroTile& t, Value* a_panel, Value* b_panel, Value* kc,
                       Value* c_tile, int64_t ldc, Value* first) {
  llvm::IRBuilder<>& b = kf.b();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Type* f32 = b.getFloatTy();
  auto* vec = llvm::FixedVectorType::get(f32, static_cast<unsigned>(t.lanes));
  llvm::Type* vec_ptr = vec->getPointerTo();
  const int nv = t.nr / t.lanes;
  const size_t count = static_cast<size_t>(t.mr * nv);
  const llvm::Align vec_align(64);
  llvm::Function* fma = llvm::Intrinsic::getDeclaration(&kf.lc().module, llvm::Intrinsic::fma, {vec});

  // The k loop (kc >= 1): one block, accumulators as phis.
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx, "mk.k", kf.fn());
  auto* done = llvm::BasicBlock::Create(ctx, "mk.done", kf.fn());
  b.CreateBr(body);
  b.SetInsertPoint(body);
  llvm::PHINode* k = b.CreatePHI(b.getInt64Ty(), 2, "mk.k");
  k->addIncoming(kf.i64(0), pre);
  // Pointer induction variables (the panels advance by MR and NR floats a k step), so that the
  // unrolled body addresses its loads at constant offsets without the backend's strength reduction.
  llvm::PHINode* b_row = b.CreatePHI(b_panel->getType(), 2, "b.row");
  b_row->addIncoming(b_panel, pre);
  llvm::PHINode* a_col = b.CreatePHI(a_panel->getType(), 2, "a.col");
  a_col->addIncoming(a_panel, pre);
  std::vector<llvm::PHINode*> acc(count);
  Value* zero = llvm::ConstantAggregateZero::get(vec);
  for (size_t i = 0; i < count; ++i) {
    acc[i] = b.CreatePHI(vec, 2, "acc" + std::to_string(i / nv) + "_" + std::to_string(i % nv));
    acc[i]->addIncoming(zero, pre);
  }
  std::vector<Value*> bv(static_cast<size_t>(nv));
  for (int v = 0; v < nv; ++v) {
    Value* at = b.CreateBitCast(b.CreateConstInBoundsGEP1_64(f32, b_row, static_cast<uint64_t>(v * t.lanes)), vec_ptr);
    bv[static_cast<size_t>(v)] = b.CreateAlignedLoad(vec, at, vec_align, "b" + std::to_string(v));
  }
  std::vector<Value*> next(count);
  for (int i = 0; i < t.mr; ++i) {
    Value* a = b.CreateAlignedLoad(f32, b.CreateConstInBoundsGEP1_64(f32, a_col, static_cast<uint64_t>(i)),
                                   llvm::Align(4), "a" + std::to_string(i));
    Value* splat = b.CreateVectorSplat(static_cast<unsigned>(t.lanes), a, "a" + std::to_string(i) + ".splat");
    for (int v = 0; v < nv; ++v) {
      const size_t at = static_cast<size_t>(i * nv + v);
      next[at] = b.CreateCall(fma, {splat, bv[static_cast<size_t>(v)], acc[at]});
    }
  }
  Value* k_next = b.CreateAdd(k, kf.i64(1), "mk.k.next", true, true);
  k->addIncoming(k_next, body);
  b_row->addIncoming(b.CreateConstInBoundsGEP1_64(f32, b_row, static_cast<uint64_t>(t.nr), "b.next"), body);
  a_col->addIncoming(b.CreateConstInBoundsGEP1_64(f32, a_col, static_cast<uint64_t>(t.mr), "a.next"), body);
  for (size_t i = 0; i < count; ++i) acc[i]->addIncoming(next[i], body);
  b.CreateCondBr(b.CreateICmpSLT(k_next, kc), body, done);
  b.SetInsertPoint(done);

  // Write the tile out: stored on the first k panel, added after.
  auto write = [&](bool add) {
    for (int i = 0; i < t.mr; ++i)
      for (int v = 0; v < nv; ++v) {
        Value* at = b.CreateBitCast(
            b.CreateConstInBoundsGEP1_64(f32, c_tile, static_cast<uint64_t>(i * ldc + v * t.lanes)), vec_ptr);
        Value* val = next[static_cast<size_t>(i * nv + v)];
        if (add) val = b.CreateFAdd(b.CreateAlignedLoad(vec, at, vec_align), val);
        b.CreateAlignedStore(val, at, vec_align);
      }
  };
  kf.if_then(first, [&] { write(false); }, [&] { write(true); });
}

}  // namespace fusejit::cg::cpu
