// compiler/llvm/lower_anchor.h — internal to lower_anchor*.cpp: the GEMM
// micro-kernel that lower_anchor_kernel calls once per (MR x NR) micro-tile.
#pragma once

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

}  // namespace fusejit::cg::cpu
