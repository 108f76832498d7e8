// Shared lowering parts: the entry-point skeleton, typed buffer access with
// f16/bf16 conversion, loops, elementwise op semantics, epilogue trees.
#include <limits>

#include <llvm/IR/Intrinsics.h>

#include "compiler/emit_common.h"
#include "compiler/llvm/lower.h"

namespace fusejit::cg::cpu {

using llvm::Value;

KernelFunction::KernelFunction(LowerContext& lc, const std::string& name)
    : lc_(lc), b_(lc.llvm), entry_b_(lc.llvm) {
  llvm::Type* i8pp = b_.getInt8PtrTy()->getPointerTo();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {i8pp, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, lc.module);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  fn_->addFnAttr(llvm::Attribute::NoFree);
  args_ = fn_->getArg(0);
  args_->setName("args");
  begin_ = fn_->getArg(1);
  begin_->setName("begin");
  end_ = fn_->getArg(2);
  end_->setName("end");
  entry_ = llvm::BasicBlock::Create(lc.llvm, "entry", fn_);
  body_ = llvm::BasicBlock::Create(lc.llvm, "body", fn_);
  entry_b_.SetInsertPoint(entry_);
  b_.SetInsertPoint(body_);
}

DType KernelFunction::buffer_dtype(BufferRef ref) const {
  const Graph& g = lc_.pc.g;
  switch (ref.kind) {
    case BufferKind::Input: return g.node(g.inputs()[static_cast<size_t>(ref.index)]).type.dtype;
    case BufferKind::Output: return g.node(g.outputs[static_cast<size_t>(ref.index)].value).type.dtype;
    case BufferKind::Scratch: {
      const auto it = lc_.plan.scratch_dtype.find(ref.index);
      return it == lc_.plan.scratch_dtype.end() ? DType::F32 : it->second;
    }
  }
  return DType::F32;
}

static llvm::Type* element_type(llvm::IRBuilder<>& b, DType dt) {
  switch (dt) {
    case DType::F32: return b.getFloatTy();
    case DType::F16: return b.getHalfTy();
    case DType::BF16: return b.getInt16Ty();
  }
  return b.getFloatTy();
}

Value* KernelFunction::buffer(BufferRef ref) {
  for (size_t i = 0; i < arg_refs_.size(); ++i)
    if (arg_refs_[i] == ref) return arg_ptrs_[i];
  const int64_t slot = static_cast<int64_t>(arg_refs_.size());
  const char* kind = ref.kind == BufferKind::Input ? "in" : ref.kind == BufferKind::Output ? "out" : "scratch";
  const std::string name = std::string(kind) + std::to_string(ref.index);
  Value* at = entry_b_.CreateConstInBoundsGEP1_64(entry_b_.getInt8PtrTy(), args_, static_cast<uint64_t>(slot));
  Value* raw = entry_b_.CreateLoad(entry_b_.getInt8PtrTy(), at, name + ".raw");
  Value* typed = entry_b_.CreatePointerCast(raw, element_type(entry_b_, buffer_dtype(ref))->getPointerTo(), name);
  arg_refs_.push_back(ref);
  arg_ptrs_.push_back(typed);
  return typed;
}

Value* KernelFunction::load_f32(DType dt, Value* base, Value* offset) {
  llvm::Type* et = element_type(b_, dt);
  Value* v = b_.CreateLoad(et, b_.CreateInBoundsGEP(et, base, offset));
  switch (dt) {
    case DType::F32: return v;
    case DType::F16: return b_.CreateFPExt(v, b_.getFloatTy());
    case DType::BF16:  // the upper half of an f32
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, b_.getInt32Ty()), 16), b_.getFloatTy());
  }
  return v;
}

void KernelFunction::store_f32(DType dt, Value* base, Value* offset, Value* v) {
  llvm::Type* et = element_type(b_, dt);
  Value* at = b_.CreateInBoundsGEP(et, base, offset);
  switch (dt) {
    case DType::F32: b_.CreateStore(v, at); return;
    case DType::F16: b_.CreateStore(b_.CreateFPTrunc(v, b_.getHalfTy()), at); return;
    case DType::BF16: {  // round to nearest even; NaN stays a quiet NaN
      Value* bits = b_.CreateBitCast(v, b_.getInt32Ty());
      Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
      Value* rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7FFF))), 16);
      Value* nan = b_.CreateFCmpUNO(v, v);
      Value* out = b_.CreateSelect(nan, b_.getInt32(0x7FC0), rounded);
      b_.CreateStore(b_.CreateTrunc(out, b_.getInt16Ty()), at);
      return;
    }
  }
}

Value* KernelFunction::load_f32(BufferRef ref, Value* offset) { return load_f32(buffer_dtype(ref), buffer(ref), offset); }

Value* KernelFunction::load_operand(ValueId v, Value* offset) {
  if (auto it = lc_.plan.buffer.find(v); it != lc_.plan.buffer.end()) return load_f32(it->second, offset);
  const Shape& shape = lc_.pc.g.node(v).type.shape;
  auto tree = operand_trees_.find(v);
  if (tree == operand_trees_.end()) {
    Region at_element;
    at_element.domain = shape;
    tree = operand_trees_.emplace(v, build_epilogue_tree(lc_.pc, lc_.plan, at_element, -1, v, false)).first;
  }
  return emit_tree(*this, tree->second, decompose(*this, offset, shape), nullptr);
}

void KernelFunction::store_f32(BufferRef ref, Value* offset, Value* v) {
  store_f32(buffer_dtype(ref), buffer(ref), offset, v);
}

void KernelFunction::loop(Value* lo, Value* hi, int64_t step, const std::function<void(Value*)>& body,
                          const std::string& name) {
  llvm::LLVMContext& c = lc_.llvm;
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(c, name + ".head", fn_);
  auto* inner = llvm::BasicBlock::Create(c, name + ".body", fn_);
  auto* exit = llvm::BasicBlock::Create(c, name + ".exit", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  i->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, hi), inner, exit);
  b_.SetInsertPoint(inner);
  body(i);
  Value* next = b_.CreateAdd(i, i64(step), name + ".next", /*HasNUW=*/true, /*HasNSW=*/true);
  i->addIncoming(next, b_.GetInsertBlock());
  last_latch_ = b_.CreateBr(head);
  b_.SetInsertPoint(exit);
}

void KernelFunction::keep_rolled() {
  llvm::LLVMContext& c = lc_.llvm;
  llvm::Metadata* disable[] = {llvm::MDString::get(c, "llvm.loop.unroll.disable")};
  llvm::MDNode* id = llvm::MDNode::getDistinct(c, {nullptr, llvm::MDNode::get(c, disable)});
  id->replaceOperandWith(0, id);
  last_latch_->setMetadata(llvm::LLVMContext::MD_loop, id);
}

void KernelFunction::parallel_loop(Value* lo, Value* hi, const std::function<void(Value*)>& body,
                                   const std::string& name) {
  llvm::LLVMContext& c = lc_.llvm;
  const size_t first_block = fn_->size();  // blocks are appended: the loop's are the ones after this
  loop(lo, hi, 1, body, name);
  llvm::MDNode* group = llvm::MDNode::getDistinct(c, {});
  size_t at = 0;
  for (llvm::BasicBlock& bb : *fn_) {
    if (at++ < first_block) continue;
    for (llvm::Instruction& inst : bb) {
      if (!inst.mayReadOrWriteMemory()) continue;
      llvm::MDNode* old = inst.getMetadata(llvm::LLVMContext::MD_access_group);
      inst.setMetadata(llvm::LLVMContext::MD_access_group, old ? llvm::MDNode::get(c, {old, group}) : group);
    }
  }
  llvm::Metadata* parallel[] = {llvm::MDString::get(c, "llvm.loop.parallel_accesses"), group};
  llvm::Metadata* vectorize[] = {llvm::MDString::get(c, "llvm.loop.vectorize.enable"),
                                 llvm::ConstantAsMetadata::get(llvm::ConstantInt::getTrue(c))};
  llvm::MDNode* id = llvm::MDNode::getDistinct(
      c, {nullptr, llvm::MDNode::get(c, parallel), llvm::MDNode::get(c, vectorize)});
  id->replaceOperandWith(0, id);
  last_latch_->setMetadata(llvm::LLVMContext::MD_loop, id);
}

void KernelFunction::if_then(Value* cond, const std::function<void()>& then_body,
                             const std::function<void()>& else_body) {
  llvm::LLVMContext& c = lc_.llvm;
  auto* then_bb = llvm::BasicBlock::Create(c, "then", fn_);
  auto* else_bb = else_body ? llvm::BasicBlock::Create(c, "else", fn_) : nullptr;
  auto* done = llvm::BasicBlock::Create(c, "endif", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : done);
  b_.SetInsertPoint(then_bb);
  then_body();
  b_.CreateBr(done);
  if (else_bb) {
    b_.SetInsertPoint(else_bb);
    else_body();
    b_.CreateBr(done);
  }
  b_.SetInsertPoint(done);
}

Value* KernelFunction::stack_array(llvm::Type* type, int64_t count, const std::string& name, unsigned align) {
  llvm::AllocaInst* a = entry_b_.CreateAlloca(type, entry_b_.getInt64(static_cast<uint64_t>(count)), name);
  a->setAlignment(llvm::Align(align));
  return a;
}

Value* KernelFunction::local(Value* init, const std::string& name) {
  llvm::AllocaInst* a = entry_b_.CreateAlloca(init->getType(), nullptr, name);
  b_.CreateStore(init, a);
  return a;
}

Value* KernelFunction::f32(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }

Value* KernelFunction::call_math(const std::string& name, std::vector<Value*> args) {
  std::vector<llvm::Type*> params(args.size(), b_.getFloatTy());
  auto* type = llvm::FunctionType::get(b_.getFloatTy(), params, false);
  llvm::FunctionCallee callee = lc_.module.getOrInsertFunction(name, type);
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addFnAttr(llvm::Attribute::WillReturn);
    f->setDoesNotAccessMemory();  // as with -fno-math-errno: lets the vectorizer use vector variants
  }
  return b_.CreateCall(callee, args);
}

CpuLaunch KernelFunction::finish(int64_t work_items, int64_t grain, std::string what) {
  entry_b_.CreateBr(body_);
  b_.CreateRetVoid();
  CpuLaunch launch;
  launch.function = fn_->getName().str();
  launch.work_items = work_items < 1 ? 1 : work_items;
  launch.grain = grain < 1 ? 1 : grain;
  launch.args = arg_refs_;
  launch.what = std::move(what);
  return launch;
}

// ---- elementwise ops -------------------------------------------------------------

namespace {

double attr_or(const Node& n, const std::string& key, double fallback) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return fallback;
  if (auto d = std::get_if<double>(&it->second)) return *d;
  if (auto i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return fallback;
}

struct OpBuilder {
  KernelFunction& kf;
  llvm::IRBuilder<>& b;
  Value* c(double v) { return kf.f32(v); }
  Value* is_nan(Value* x) { return b.CreateFCmpUNO(x, x); }
  Value* unary(llvm::Intrinsic::ID id, Value* x) { return b.CreateUnaryIntrinsic(id, x); }
  // torch.clamp / clamp_keep_nan: NaN stays NaN (ordered compares are false).
  Value* clamp(Value* x, double lo, double hi) {
    Value* low = b.CreateSelect(b.CreateFCmpOLT(x, c(lo)), c(lo), x);
    return b.CreateSelect(b.CreateFCmpOGT(low, c(hi)), c(hi), low);
  }
  Value* softplus(Value* x, double beta, double threshold) {
    Value* bx = b.CreateFMul(x, c(beta));
    Value* soft = b.CreateFDiv(kf.call_math("log1pf", {kf.call_math("expf", {bx})}), c(beta));
    return b.CreateSelect(b.CreateFCmpOGT(bx, c(threshold)), x, soft);
  }
  Value* max_nan(Value* a, Value* x) {  // (a > x || isnan(a)) ? a : x
    return b.CreateSelect(b.CreateOr(b.CreateFCmpOGT(a, x), is_nan(a)), a, x);
  }
  Value* min_nan(Value* a, Value* x) { return b.CreateSelect(b.CreateOr(b.CreateFCmpOLT(a, x), is_nan(a)), a, x); }
  // cast: x rounded to `dt` (to nearest, ties to even, as store_f32 does) and back to f32.
  Value* round_to(DType dt, Value* x) {
    if (dt == DType::F16) return b.CreateFPExt(b.CreateFPTrunc(x, b.getHalfTy()), b.getFloatTy());
    if (dt != DType::BF16) return x;
    Value* bits = b.CreateBitCast(x, b.getInt32Ty());
    Value* lsb = b.CreateAnd(b.CreateLShr(bits, 16), 1);
    Value* rounded = b.CreateAnd(b.CreateAdd(bits, b.CreateAdd(lsb, b.getInt32(0x7FFF))), b.getInt32(0xFFFF0000u));
    return b.CreateSelect(is_nan(x), x, b.CreateBitCast(rounded, b.getFloatTy()));
  }
};

}  // namespace

Value* emit_op(KernelFunction& kf, const Node& n, const std::vector<Value*>& a) {
  llvm::IRBuilder<>& b = kf.b();
  OpBuilder o{kf, b};
  const double inf = std::numeric_limits<double>::infinity();
  Value* x = a.empty() ? nullptr : a[0];
  switch (n.op) {
    case OpKind::Relu: return b.CreateSelect(b.CreateFCmpOLT(x, o.c(0)), o.c(0), x);
    case OpKind::LeakyRelu:
      return b.CreateSelect(b.CreateFCmpOGT(x, o.c(0)), x, b.CreateFMul(x, o.c(attr_or(n, "negative_slope", 0.01))));
    case OpKind::Gelu: {
      auto it = n.attrs.find("approximate");
      const bool tanh_approx = it != n.attrs.end() && std::get_if<std::string>(&it->second) &&
                               std::get<std::string>(it->second) == "tanh";
      Value* half_x = b.CreateFMul(x, o.c(0.5));
      if (tanh_approx) {
        Value* cube = b.CreateFMul(b.CreateFMul(x, x), x);
        Value* inner = b.CreateFMul(o.c(0.79788456080286535588), b.CreateFAdd(x, b.CreateFMul(o.c(0.044715), cube)));
        return b.CreateFMul(half_x, b.CreateFAdd(o.c(1), kf.call_math("tanhf", {inner})));
      }
      Value* erf = kf.call_math("erff", {b.CreateFMul(x, o.c(0.70710678118654752440))});
      return b.CreateFMul(half_x, b.CreateFAdd(o.c(1), erf));
    }
    case OpKind::Sigmoid: return b.CreateFDiv(o.c(1), b.CreateFAdd(o.c(1), kf.call_math("expf", {b.CreateFNeg(x)})));
    case OpKind::Tanh: return kf.call_math("tanhf", {x});
    case OpKind::Silu: return b.CreateFDiv(x, b.CreateFAdd(o.c(1), kf.call_math("expf", {b.CreateFNeg(x)})));
    case OpKind::Mish: return b.CreateFMul(x, kf.call_math("tanhf", {o.softplus(x, 1.0, 20.0)}));
    case OpKind::Softplus: return o.softplus(x, attr_or(n, "beta", 1.0), attr_or(n, "threshold", 20.0));
    case OpKind::Hardswish: return b.CreateFDiv(b.CreateFMul(x, o.clamp(b.CreateFAdd(x, o.c(3)), 0, 6)), o.c(6));
    case OpKind::Hardsigmoid: return b.CreateFDiv(o.clamp(b.CreateFAdd(x, o.c(3)), 0, 6), o.c(6));
    case OpKind::Hardtanh: return o.clamp(x, attr_or(n, "min_val", -1.0), attr_or(n, "max_val", 1.0));
    case OpKind::Clamp: return o.clamp(x, attr_or(n, "min", -inf), attr_or(n, "max", inf));
    case OpKind::Elu:
      return b.CreateSelect(b.CreateFCmpOGT(x, o.c(0)), x,
                            b.CreateFMul(o.c(attr_or(n, "alpha", 1.0)), kf.call_math("expm1f", {x})));
    case OpKind::Exp: return kf.call_math("expf", {x});
    case OpKind::Log: return kf.call_math("logf", {x});
    case OpKind::Abs: return o.unary(llvm::Intrinsic::fabs, x);
    case OpKind::Neg: return b.CreateFNeg(x);
    case OpKind::Sqrt: return o.unary(llvm::Intrinsic::sqrt, x);
    case OpKind::Rsqrt: return b.CreateFDiv(o.c(1), o.unary(llvm::Intrinsic::sqrt, x));
    case OpKind::Square: return b.CreateFMul(x, x);
    case OpKind::Add: return b.CreateFAdd(a[0], a[1]);
    case OpKind::Sub: return b.CreateFSub(a[0], a[1]);
    case OpKind::Mul: return b.CreateFMul(a[0], a[1]);
    case OpKind::Div: return b.CreateFDiv(a[0], a[1]);
    case OpKind::Minimum: return o.min_nan(a[0], a[1]);
    case OpKind::Maximum: return o.max_nan(a[0], a[1]);
    case OpKind::Pow: return kf.call_math("powf", {a[0], a[1]});
    case OpKind::Erf: return kf.call_math("erff", {x});
    case OpKind::Cast: return o.round_to(n.type.dtype, x);
    // Comparisons: ordered (false with a NaN), then 1 or 0.
    case OpKind::Gt: return b.CreateSelect(b.CreateFCmpOGT(a[0], a[1]), o.c(1), o.c(0));
    case OpKind::Ge: return b.CreateSelect(b.CreateFCmpOGE(a[0], a[1]), o.c(1), o.c(0));
    case OpKind::Lt: return b.CreateSelect(b.CreateFCmpOLT(a[0], a[1]), o.c(1), o.c(0));
    case OpKind::Le: return b.CreateSelect(b.CreateFCmpOLE(a[0], a[1]), o.c(1), o.c(0));
    case OpKind::Eq: return b.CreateSelect(b.CreateFCmpOEQ(a[0], a[1]), o.c(1), o.c(0));
    default: return nullptr;
  }
}

// ---- epilogue trees and index arithmetic -------------------------------------------

std::vector<Value*> decompose(KernelFunction& kf, Value* linear, const Shape& shape) {
  llvm::IRBuilder<>& b = kf.b();
  std::vector<Value*> idx(shape.size(), nullptr);
  Value* rest = linear;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int64_t extent = shape[static_cast<size_t>(d)];
    if (extent == 1) {
      idx[static_cast<size_t>(d)] = kf.i64(0);
    } else if (d == 0) {
      idx[0] = rest;
    } else {
      idx[static_cast<size_t>(d)] = b.CreateURem(rest, kf.i64(extent));
      rest = b.CreateUDiv(rest, kf.i64(extent));
    }
  }
  return idx;
}

// Offset of a contiguous tensor of `shape` whose dim d sits at domain dim dims[d].
static Value* mapped_offset(KernelFunction& kf, const Shape& shape, const std::vector<int>& dims,
                            const std::vector<Value*>& idx) {
  llvm::IRBuilder<>& b = kf.b();
  Value* off = nullptr;
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int64_t extent = shape[static_cast<size_t>(d)];
    if (extent != 1) {
      Value* c = idx[static_cast<size_t>(dims[static_cast<size_t>(d)])];
      Value* term = stride == 1 ? c : b.CreateMul(c, kf.i64(stride), "", true, true);
      off = off ? b.CreateAdd(off, term, "", true, true) : term;
    }
    stride *= extent;
  }
  return off ? off : kf.i64(0);
}

Value* max_nan(llvm::IRBuilder<>& b, Value* a, Value* x) {
  return b.CreateSelect(b.CreateOr(b.CreateFCmpOGT(a, x), b.CreateFCmpUNO(a, a)), a, x);
}
Value* min_nan(llvm::IRBuilder<>& b, Value* a, Value* x) {
  return b.CreateSelect(b.CreateOr(b.CreateFCmpOLT(a, x), b.CreateFCmpUNO(a, a)), a, x);
}
Value* sum_add(llvm::IRBuilder<>& b, Value* a, Value* x) {
  Value* sum = b.CreateFAdd(a, x);
  if (auto* add = llvm::dyn_cast<llvm::Instruction>(sum)) {
    llvm::FastMathFlags f;
    f.setAllowReassoc();
    add->setFastMathFlags(f);
  }
  return sum;
}

// One source for every Source node (`many` null), or each by its node.
static Value* emit_tree_impl(KernelFunction& kf, const EpilogueTree& tree, const std::vector<Value*>& idx,
                             Value* source, const TreeSources* many) {
  const Graph& g = kf.lc().pc.g;
  const int rank = static_cast<int>(tree.domain.size());
  std::vector<Value*> vals(tree.nodes.size(), nullptr);
  std::vector<int> identity(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) identity[static_cast<size_t>(d)] = d;
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const EpiNode& n = tree.nodes[i];
    const Node& node = g.node(n.value);
    switch (n.kind) {
      case EpiNode::Kind::Source:
        vals[i] = source;
        if (many)
          for (const auto& [v, value] : *many)
            if (v == n.value) vals[i] = value;
        break;
      case EpiNode::Kind::Constant: vals[i] = kf.f32(node.constant_value()); break;
      case EpiNode::Kind::Load: {
        const std::vector<int> dims = n.dims.empty() ? broadcast_dims(node.type.shape, rank) : n.dims;
        vals[i] = kf.load_f32(n.buffer, mapped_offset(kf, node.type.shape, dims, idx));
        break;
      }
      case EpiNode::Kind::Compute: {
        std::vector<Value*> args;
        for (int a : n.args) args.push_back(vals[static_cast<size_t>(a)]);
        if (is_anchor(node.op)) {
          vals[i] = args.size() == 2 ? kf.b().CreateFAdd(args[0], args[1]) : args[0];
        } else {
          vals[i] = emit_op(kf, node, args);
        }
        break;
      }
      case EpiNode::Kind::Store:
        vals[i] = vals[static_cast<size_t>(n.args[0])];
        kf.store_f32(n.buffer, mapped_offset(kf, tree.domain, identity, idx), vals[i]);
        break;
    }
  }
  return tree.result >= 0 ? vals[static_cast<size_t>(tree.result)] : nullptr;
}

Value* emit_tree(KernelFunction& kf, const EpilogueTree& tree, const std::vector<Value*>& idx, Value* source) {
  return emit_tree_impl(kf, tree, idx, source, nullptr);
}

Value* emit_tree(KernelFunction& kf, const EpilogueTree& tree, const std::vector<Value*>& idx,
                 const TreeSources& sources) {
  return emit_tree_impl(kf, tree, idx, nullptr, &sources);
}

}  // namespace fusejit::cg::cpu
