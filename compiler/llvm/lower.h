// compiler/llvm/lower.h — lowering a Plan to LLVM IR (the CPU backend's
// codegen; internal). One KernelFunction per KernelPlan, built with
// IRBuilder; epilogue trees evaluated per element with emit_tree.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "compiler/cpu_program.h"
#include "compiler/epilogue_tree.h"
#include "compiler/plan.h"

namespace fusejit::cg::cpu {

// The CPU scheduler's parameters (one plain struct, as for each GPU scheduler).
struct CpuHeuristics {
  int mr = 0, nr = 0;   // micro-tile rows x columns; 0: chosen from the vector width
  int kc = 256;         // k block (packed panel depth)
  int mc = 0, nc = 0;   // cache blocks; 0: chosen from mr, nr and the shape
};

struct LowerContext {
  llvm::LLVMContext& llvm;
  llvm::Module& module;
  const PlanContext& pc;
  const Plan& plan;
  int lanes = 16;        // f32 lanes of the target's widest vector register (AVX-512: 16)
  int vector_regs = 32;  // architectural vector registers (AVX-512: 32, AVX2: 16)
  CpuHeuristics heur;
};

// One generated entry point: void name(i8** args, i64 begin, i64 end).
// Buffer pointers are loaded once in the entry block; finish() closes it.
class KernelFunction {
 public:
  KernelFunction(LowerContext& lc, const std::string& name);

  LowerContext& lc() { return lc_; }
  llvm::IRBuilder<>& b() { return b_; }
  llvm::Function* fn() { return fn_; }
  llvm::Value* begin() { return begin_; }
  llvm::Value* end() { return end_; }

  // The buffer's base pointer (float*, half*, or i16* for bf16), made an argument.
  llvm::Value* buffer(BufferRef ref);
  llvm::Value* value_buffer(ValueId v) { return buffer(lc_.plan.buffer.at(v)); }
  DType buffer_dtype(BufferRef ref) const;
  // Element `offset` (i64) of the buffer, converted to / from f32.
  llvm::Value* load_f32(BufferRef ref, llvm::Value* offset);
  void store_f32(BufferRef ref, llvm::Value* offset, llvm::Value* v);
  // Operand v of the kernel's op at flat index `offset` (i64) of v's shape, as
  // f32: a load of its buffer, or, for a leaf expression the plan keeps out of
  // memory (PlanContext::recomputes_operand), computed there from the inputs.
  llvm::Value* load_operand(ValueId v, llvm::Value* offset);
  // Same for a raw element pointer of `dtype`.
  llvm::Value* load_f32(DType dtype, llvm::Value* base, llvm::Value* offset);
  void store_f32(DType dtype, llvm::Value* base, llvm::Value* offset, llvm::Value* v);

  // for (i = lo; i < hi; i += step) body(i), i64 induction; `name` labels the blocks.
  void loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::function<void(llvm::Value*)>& body,
            const std::string& name = "i");
  void loop(int64_t lo, int64_t hi, int64_t step, const std::function<void(llvm::Value*)>& body,
            const std::string& name = "i") {
    loop(i64(lo), i64(hi), step, body, name);
  }
  // The same loop for independent iterations (elementwise epilogues): every
  // memory access in its body joins an access group the loop declares
  // parallel, and vectorization is requested. Outputs must not overlap inputs.
  void parallel_loop(llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*)>& body,
                     const std::string& name = "i");
  // Keeps LLVM from unrolling the loop emitted last (small IR, quick O3).
  void keep_rolled();
  // if (cond) then(); with an optional else.
  void if_then(llvm::Value* cond, const std::function<void()>& then_body,
               const std::function<void()>& else_body = nullptr);
  // A stack buffer of `count` elements of `type`, allocated in the entry block.
  llvm::Value* stack_array(llvm::Type* type, int64_t count, const std::string& name, unsigned align = 64);
  // A mutable scalar on the stack (in the entry block), initialized to `init`.
  llvm::Value* local(llvm::Value* init, const std::string& name);

  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  llvm::Value* f32(double v);
  llvm::Type* f32_type() { return b_.getFloatTy(); }

  // Calls a libm-style float function (expf, tanhf, erff, ...), declared on first use.
  llvm::Value* call_math(const std::string& fn, std::vector<llvm::Value*> args);

  // Ends the function; returns the launch description (args in order).
  CpuLaunch finish(int64_t work_items, int64_t grain, std::string what);

 private:
  LowerContext& lc_;
  llvm::IRBuilder<> b_;
  llvm::IRBuilder<> entry_b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::BasicBlock* body_ = nullptr;
  llvm::Value* args_ = nullptr;
  llvm::Value* begin_ = nullptr;
  llvm::Value* end_ = nullptr;
  std::vector<BufferRef> arg_refs_;
  std::map<ValueId, EpilogueTree> operand_trees_;  // load_operand's, built once per operand
  std::vector<llvm::Value*> arg_ptrs_;
  llvm::BranchInst* last_latch_ = nullptr;  // the back edge of the last loop() emitted
};

// The f32 result of an elementwise op on f32 operands (PyTorch semantics,
// NaN propagating as in templates/fj_ops.cuh).
llvm::Value* emit_op(KernelFunction& kf, const Node& n, const std::vector<llvm::Value*>& args);

// Evaluates `tree` at domain coordinates `idx` (one i64 per domain dim):
// `source` is the f32 value of the tree's Source node (the raw accumulator for
// an anchor, the reduced/pooled value for a fallback kernel), or nullptr.
// Emits every Store node; returns the result node's value, or nullptr.
llvm::Value* emit_tree(KernelFunction& kf, const EpilogueTree& tree, const std::vector<llvm::Value*>& idx,
                       llvm::Value* source);
// The same for a tree with several sources (EpilogueTree::sources): the f32
// value of each, by node.
using TreeSources = std::vector<std::pair<ValueId, llvm::Value*>>;
llvm::Value* emit_tree(KernelFunction& kf, const EpilogueTree& tree, const std::vector<llvm::Value*>& idx,
                       const TreeSources& sources);

// Scalar combines shared by the reductions: NaN wins max / min; a + x with
// reassociation allowed (the loop vectorizer may keep several partial sums).
llvm::Value* max_nan(llvm::IRBuilder<>& b, llvm::Value* a, llvm::Value* x);
llvm::Value* min_nan(llvm::IRBuilder<>& b, llvm::Value* a, llvm::Value* x);
llvm::Value* sum_add(llvm::IRBuilder<>& b, llvm::Value* a, llvm::Value* x);

// Row-major coordinates (i64) of linear index `linear` in `shape`.
std::vector<llvm::Value*> decompose(KernelFunction& kf, llvm::Value* linear, const Shape& shape);

// lower_anchor.cpp: the anchor (linear, matmul, conv2d) as a packed, register-
// blocked GEMM with the kernel's region applied to each finished tile.
Expected<CpuLaunch> lower_anchor_kernel(LowerContext& lc, int index);

// lower_wgrad.cpp: conv2d_weight_grad, a dot product per (output channel,
// input channel, tap) with the kernel's region applied to each result.
Expected<CpuLaunch> lower_wgrad_kernel(LowerContext& lc, int index);

// lower_fallback.cpp: pointwise, reduction, softmax, pool and row-finish kernels.
Expected<CpuLaunch> lower_fallback_kernel(LowerContext& lc, int index);
// lower_gather.cpp: flip, im2col and the pools' backward.
Expected<CpuLaunch> lower_gather(LowerContext& lc, const KernelPlan& kp);

}  // namespace fusejit::cg::cpu
