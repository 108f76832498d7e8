// The kernels over materialized tensors, lowered to LLVM: pointwise groups,
// reductions (and global average pool), softmax / log_softmax, group /
// instance / layer norm, 2-D / 1-D pooling. Each runs its region (the fused
// elementwise consumers and their stores) at every output coordinate, as the
// CUDA emitters do.
#include <algorithm>
#include <cmath>

#include "compiler/emitters.h"
#include "compiler/llvm/lower.h"

namespace fusejit::cg::cpu {
namespace {

using llvm::Value;

// Elements a task should cover at least: below this, threading costs more than it saves.
constexpr int64_t kElementsPerTask = 16384;

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = static_cast<int>(s.size()) - 2; d >= 0; --d)
    st[static_cast<size_t>(d)] = st[static_cast<size_t>(d) + 1] * s[static_cast<size_t>(d) + 1];
  return st;
}

int64_t grain_for(int64_t per_item) { return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, per_item)); }

// sum_j coords[j] * strides[dims[j]]
Value* strided(KernelFunction& kf, const std::vector<Value*>& coords, const std::vector<int>& dims,
               const std::vector<int64_t>& strides) {
  llvm::IRBuilder<>& b = kf.b();
  Value* off = kf.i64(0);
  for (size_t j = 0; j < dims.size(); ++j)
    off = b.CreateAdd(off, b.CreateMul(coords[j], kf.i64(strides[static_cast<size_t>(dims[j])])), "", true, true);
  return off;
}

Expected<CpuLaunch> lower_pointwise(LowerContext& lc, const KernelPlan& kp) {
  KernelFunction kf(lc, kp.name);
  const Shape& domain = kp.region.domain;
  const EpilogueTree tree = build_epilogue_tree(lc.pc, lc.plan, kp.region, -1, -1, true);
  const int64_t inner = domain.empty() ? 1 : domain.back();
  const Shape outer_shape = domain.empty() ? Shape{} : Shape(domain.begin(), domain.end() - 1);
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* row) {
    std::vector<Value*> idx = decompose(kf, row, outer_shape);
    kf.parallel_loop(kf.i64(0), kf.i64(inner), [&](Value* j) {
      std::vector<Value*> at = idx;
      if (!domain.empty()) at.push_back(j);
      emit_tree(kf, tree, at, nullptr);
    }, "j");
  }, "row");
  return kf.finish(numel(outer_shape), grain_for(inner), "elementwise over " + shape_str(domain));
}

Expected<CpuLaunch> lower_reduce(LowerContext& lc, const KernelPlan& kp) {
  const Graph& g = lc.pc.g;
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const ReduceGeometry geo = reduce_geometry(g, kp.root);
  // The reduced dims are the innermost ones: each row is one contiguous run.
  bool trailing = true;
  for (size_t j = 0; j < geo.reduced.size(); ++j)
    trailing = trailing && geo.reduced[j] == static_cast<int>(xs.size() - geo.reduced.size() + j);
  const auto strides = strides_of(xs);

  KernelFunction kf(lc, kp.name);
  llvm::IRBuilder<>& b = kf.b();
  const EpilogueTree post = build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, -1, true);
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* o) {
    Value* base = strided(kf, decompose(kf, o, geo.kept_shape), geo.kept, strides);
    auto element = [&](Value* i) {
      Value* off = trailing ? i : strided(kf, decompose(kf, i, geo.reduced_shape), geo.reduced, strides);
      return kf.load_operand(x, b.CreateAdd(base, off, "", true, true));
    };
    // Max / min, and logsumexp's first pass: NaN wins.
    auto extreme = [&](bool is_max) {
      Value* acc = kf.local(kf.f32(is_max ? -INFINITY : INFINITY), is_max ? "max" : "min");
      kf.loop(0, geo.len, 1, [&](Value* i) {
        Value* cur = b.CreateLoad(kf.f32_type(), acc);
        b.CreateStore(is_max ? max_nan(b, cur, element(i)) : min_nan(b, cur, element(i)), acc);
      }, "k");
      return b.CreateLoad(kf.f32_type(), acc);
    };
    Value* v = nullptr;
    if (r.op == OpKind::Max || r.op == OpKind::Min) {
      v = extreme(r.op == OpKind::Max);
    } else if (r.op == OpKind::LogSumExp) {
      Value* m = extreme(true);
      Value* sum = kf.local(kf.f32(0), "sum");
      kf.loop(0, geo.len, 1, [&](Value* i) {
        Value* e = kf.call_math("expf", {b.CreateFSub(element(i), m)});
        b.CreateStore(sum_add(b, b.CreateLoad(kf.f32_type(), sum), e), sum);
      }, "k");
      Value* lse = b.CreateFAdd(m, kf.call_math("logf", {b.CreateLoad(kf.f32_type(), sum)}));
      // An infinite or NaN maximum is the result (torch: logsumexp([inf, 1]) = inf).
      Value* finite = b.CreateFCmpOEQ(b.CreateFSub(m, m), kf.f32(0));
      v = b.CreateSelect(finite, lse, m);
    } else {
      Value* sum = kf.local(kf.f32(0), "sum");
      kf.loop(0, geo.len, 1, [&](Value* i) {
        b.CreateStore(sum_add(b, b.CreateLoad(kf.f32_type(), sum), element(i)), sum);
      }, "k");
      v = b.CreateLoad(kf.f32_type(), sum);
      if (geo.mean) v = b.CreateFDiv(v, kf.f32(static_cast<double>(geo.len)));
    }
    emit_tree(kf, post, decompose(kf, o, r.type.shape), v);
  }, "row");
  return kf.finish(geo.rows, grain_for(geo.len),
                   std::string(op_name(r.op)) + " of " + std::to_string(geo.len) + " elements into " +
                       std::to_string(geo.rows) + " outputs");
}

Expected<CpuLaunch> lower_softmax(LowerContext& lc, const KernelPlan& kp) {
  const Graph& g = lc.pc.g;
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const int64_t dim = r.attr_int("dim");
  const int64_t len = xs[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < xs.size(); ++d) inner *= xs[d];
  const int64_t rows = numel(xs) / len;
  const bool log = r.op == OpKind::LogSoftmax;

  KernelFunction kf(lc, kp.name);
  llvm::IRBuilder<>& b = kf.b();
  const EpilogueTree post = build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, -1, true);
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* o) {
    Value* base = b.CreateAdd(b.CreateMul(b.CreateUDiv(o, kf.i64(inner)), kf.i64(len * inner)),
                              b.CreateURem(o, kf.i64(inner)));
    auto offset = [&](Value* i) { return b.CreateAdd(base, b.CreateMul(i, kf.i64(inner)), "", true, true); };
    Value* mx = kf.local(kf.f32(-INFINITY), "max");
    kf.loop(0, len, 1, [&](Value* i) {
      b.CreateStore(max_nan(b, b.CreateLoad(kf.f32_type(), mx), kf.load_operand(x, offset(i))), mx);
    }, "k");
    Value* m = b.CreateLoad(kf.f32_type(), mx);
    Value* sum = kf.local(kf.f32(0), "sum");
    kf.loop(0, len, 1, [&](Value* i) {
      Value* e = kf.call_math("expf", {b.CreateFSub(kf.load_operand(x, offset(i)), m)});
      b.CreateStore(sum_add(b, b.CreateLoad(kf.f32_type(), sum), e), sum);
    }, "k");
    Value* s = b.CreateLoad(kf.f32_type(), sum);
    Value* scale = log ? kf.call_math("logf", {s}) : b.CreateFDiv(kf.f32(1), s);
    kf.parallel_loop(kf.i64(0), kf.i64(len), [&](Value* i) {
      Value* off = offset(i);
      Value* shifted = b.CreateFSub(kf.load_operand(x, off), m);
      Value* v = log ? b.CreateFSub(shifted, scale) : b.CreateFMul(kf.call_math("expf", {shifted}), scale);
      emit_tree(kf, post, decompose(kf, off, xs), v);
    }, "k");
  }, "row");
  return kf.finish(rows, grain_for(3 * len), std::string(op_name(r.op)) + " over rows of " + std::to_string(len));
}

// group / instance / layer norm: per row the mean, the biased variance as the
// mean of squared deviations (two passes in fp32), then (x - mean) / sqrt(var
// + eps) * weight + bias and the region at every element, as fj::norm_rows.
// A 2-D or 1-D pool's window over planes of H x W (1-D: H = 1), in PyTorch's semantics.
struct PoolWindow {
  bool is_max = false, cip = false;
  int64_t H = 1, W = 1, KH = 1, KW = 1, SH = 1, SW = 1, PH = 0, PW = 0, DH = 1, DW = 1;

  PoolWindow(const Node& r, const Shape& xs) {
    const bool two_d = r.op == OpKind::MaxPool2d || r.op == OpKind::AvgPool2d;
    is_max = r.op == OpKind::MaxPool2d || r.op == OpKind::MaxPool1d;
    cip = !is_max && r.attr_bool("count_include_pad");
    W = xs.back();
    if (two_d) {
      const auto& k = r.attr_ints("kernel_size");
      const auto& st = r.attr_ints("stride");
      const auto& pd = r.attr_ints("padding");
      const std::vector<int64_t> dl = is_max ? r.attr_ints("dilation") : std::vector<int64_t>{1, 1};
      H = xs[xs.size() - 2];
      KH = k[0], KW = k[1], SH = st[0], SW = st[1], PH = pd[0], PW = pd[1], DH = dl[0], DW = dl[1];
    } else {
      KW = r.attr_int("kernel_size"), SW = r.attr_int("stride"), PW = r.attr_int("padding");
    }
  }

  // The pooled value of the window at (oh, ow); load(ih, iw) reads the plane.
  template <class LoadF>
  Value* emit(KernelFunction& kf, Value* oh, Value* ow, const LoadF& load) const {
    llvm::IRBuilder<>& b = kf.b();
    auto smax = [&](Value* a, Value* c) { return b.CreateSelect(b.CreateICmpSGT(a, c), a, c); };
    auto smin = [&](Value* a, Value* c) { return b.CreateSelect(b.CreateICmpSLT(a, c), a, c); };
    Value* h0 = b.CreateSub(b.CreateMul(oh, kf.i64(SH)), kf.i64(PH));
    Value* w0 = b.CreateSub(b.CreateMul(ow, kf.i64(SW)), kf.i64(PW));
    Value* acc = kf.local(kf.f32(is_max ? -INFINITY : 0.0), "acc");
    if (is_max) {
      kf.loop(0, KH, 1, [&](Value* kh) {
        Value* ih = b.CreateAdd(h0, b.CreateMul(kh, kf.i64(DH)));
        Value* h_ok = b.CreateAnd(b.CreateICmpSGE(ih, kf.i64(0)), b.CreateICmpSLT(ih, kf.i64(H)));
        kf.if_then(h_ok, [&] {
          kf.loop(0, KW, 1, [&](Value* kw) {
            Value* iw = b.CreateAdd(w0, b.CreateMul(kw, kf.i64(DW)));
            Value* w_ok = b.CreateAnd(b.CreateICmpSGE(iw, kf.i64(0)), b.CreateICmpSLT(iw, kf.i64(W)));
            kf.if_then(w_ok, [&] {
              b.CreateStore(max_nan(b, b.CreateLoad(kf.f32_type(), acc), load(ih, iw)), acc);
            });
          }, "kw");
        });
      }, "kh");
      return b.CreateLoad(kf.f32_type(), acc);
    }
    Value* h1 = smin(b.CreateAdd(h0, kf.i64(KH)), kf.i64(H + PH));
    Value* w1 = smin(b.CreateAdd(w0, kf.i64(KW)), kf.i64(W + PW));
    Value* padded = b.CreateMul(b.CreateSub(h1, h0), b.CreateSub(w1, w0));
    Value* hs = smax(h0, kf.i64(0));
    Value* ws = smax(w0, kf.i64(0));
    h1 = smin(h1, kf.i64(H));
    w1 = smin(w1, kf.i64(W));
    kf.loop(hs, h1, 1, [&](Value* ih) {
      kf.loop(ws, w1, 1, [&](Value* iw) {
        b.CreateStore(b.CreateFAdd(b.CreateLoad(kf.f32_type(), acc), load(ih, iw)), acc);
      }, "iw");
    }, "ih");
    Value* inside = b.CreateMul(b.CreateSub(h1, hs), b.CreateSub(w1, ws));
    Value* empty = b.CreateOr(b.CreateICmpSGE(hs, h1), b.CreateICmpSGE(ws, w1));
    Value* divisor = b.CreateSIToFP(cip ? padded : inside, kf.f32_type());
    return b.CreateSelect(empty, kf.f32(0), b.CreateFDiv(b.CreateLoad(kf.f32_type(), acc), divisor));
  }
};

// group / instance / layer norm: the mean, the variance from squared
// deviations, then each element normalized; or, with a tail
// (pass_fuse_norm_tail.cpp), each pooled output of the row from the elements
// its window normalizes, or each run of the row reduced as it is normalized.
Expected<CpuLaunch> lower_norm(LowerContext& lc, const KernelPlan& kp) {
  const Graph& g = lc.pc.g;
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const NormGeometry geo = norm_geometry(g, kp.root);
  const float eps = static_cast<float>(r.attr_float("eps"));
  const FusedTail* tail = kp.tails.empty() ? nullptr : &kp.tails[0];
  const Node* tn = tail ? &g.node(tail->op) : nullptr;
  const bool pooled = tn && (tn->op == OpKind::MaxPool2d || tn->op == OpKind::AvgPool2d);

  KernelFunction kf(lc, kp.name);
  llvm::IRBuilder<>& b = kf.b();
  std::vector<BufferRef> affine;
  for (size_t k = 1; k < r.operands.size(); ++k) affine.push_back(lc.plan.buffer.at(r.operands[k]));
  Value* len_f = kf.f32(static_cast<double>(geo.len));
  // The normalized element at flat offset `off`, weight and bias applied.
  auto normalized = [&](Value* off, Value* mean, Value* rstd) {
    Value* v = b.CreateFMul(b.CreateFSub(kf.load_operand(x, off), mean), rstd);
    if (!affine.empty()) {
      Value* a = b.CreateUDiv(b.CreateURem(off, kf.i64(geo.affine_span)), kf.i64(geo.affine_div));
      v = b.CreateFMul(v, kf.load_f32(affine[0], a));
      if (affine.size() > 1) v = b.CreateFAdd(v, kf.load_f32(affine[1], a));
    }
    return v;
  };
  const EpilogueTree post = tail ? build_epilogue_tree(lc.pc, lc.plan, tail->post, tail->op, -1, true)
                                 : build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, -1, true);
  const EpilogueTree pre = tail ? build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, tn->operands[0], false)
                                : EpilogueTree{};
  // the tail's operand at flat offset `off` of x, from the normalized value
  auto before_tail = [&](Value* off, Value* n) {
    return tn->operands[0] == kp.root ? n : emit_tree(kf, pre, decompose(kf, off, xs), n);
  };
  const int64_t plane = xs.size() >= 2 ? xs[xs.size() - 2] * xs.back() : 1;
  const int64_t out_plane = pooled ? tn->type.shape[2] * tn->type.shape[3] : 1;
  const int64_t run = tail && !pooled ? reduce_geometry(g, tail->op).len : 1;  // a reduction tail's runs
  const int64_t out_len = pooled ? geo.len / plane * out_plane : tail ? geo.len / run : geo.len;
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* o) {
    Value* base = b.CreateMul(o, kf.i64(geo.len), "", true, true);
    auto offset = [&](Value* i) { return b.CreateAdd(base, i, "", true, true); };
    Value* sum = kf.local(kf.f32(0), "sum");
    kf.loop(0, geo.len, 1, [&](Value* i) {
      b.CreateStore(sum_add(b, b.CreateLoad(kf.f32_type(), sum), kf.load_operand(x, offset(i))), sum);
    }, "k");
    Value* mean = b.CreateFDiv(b.CreateLoad(kf.f32_type(), sum), len_f);
    Value* m2 = kf.local(kf.f32(0), "m2");
    kf.loop(0, geo.len, 1, [&](Value* i) {
      Value* d = b.CreateFSub(kf.load_operand(x, offset(i)), mean);
      b.CreateStore(sum_add(b, b.CreateLoad(kf.f32_type(), m2), b.CreateFMul(d, d)), m2);
    }, "k");
    Value* var = b.CreateFDiv(b.CreateLoad(kf.f32_type(), m2), len_f);
    Value* rstd = b.CreateFDiv(kf.f32(1), kf.call_math("sqrtf", {b.CreateFAdd(var, kf.f32(eps))}));
    if (!tail) {
      kf.parallel_loop(kf.i64(0), kf.i64(geo.len), [&](Value* i) {
        Value* off = offset(i);
        emit_tree(kf, post, decompose(kf, off, xs), normalized(off, mean, rstd));
      }, "k");
      return;
    }
    if (!pooled) {  // a reduction: run k of the row, in order
      const bool is_max = tn->op == OpKind::Max, is_min = tn->op == OpKind::Min;
      kf.parallel_loop(kf.i64(0), kf.i64(out_len), [&](Value* k) {
        Value* acc = kf.local(kf.f32(is_max ? -INFINITY : is_min ? INFINITY : 0.0), "acc");
        Value* first = b.CreateMul(k, kf.i64(run), "", true, true);
        kf.loop(kf.i64(0), kf.i64(run), 1, [&](Value* j) {
          Value* off = offset(b.CreateAdd(first, j, "", true, true));
          Value* v = before_tail(off, normalized(off, mean, rstd));
          Value* a = b.CreateLoad(kf.f32_type(), acc);
          b.CreateStore(is_max ? max_nan(b, a, v) : is_min ? min_nan(b, a, v) : sum_add(b, a, v), acc);
        }, "r");
        Value* v = b.CreateLoad(kf.f32_type(), acc);
        if (reduce_geometry(g, tail->op).mean) v = b.CreateFDiv(v, kf.f32(static_cast<double>(run)));
        Value* e = b.CreateAdd(b.CreateMul(o, kf.i64(out_len), "", true, true), k, "", true, true);
        emit_tree(kf, post, decompose(kf, e, tn->type.shape), v);
      }, "run");
      return;
    }
    const PoolWindow window(*tn, xs);
    kf.parallel_loop(kf.i64(0), kf.i64(out_len), [&](Value* q) {
      Value* e = b.CreateAdd(b.CreateMul(o, kf.i64(out_len), "", true, true), q, "", true, true);
      const std::vector<Value*> at = decompose(kf, e, tn->type.shape);
      Value* first = b.CreateMul(b.CreateUDiv(e, kf.i64(out_plane)), kf.i64(plane));
      Value* v = window.emit(kf, at[2], at[3], [&](Value* ih, Value* iw) {
        Value* off = b.CreateAdd(first, b.CreateAdd(b.CreateMul(ih, kf.i64(window.W)), iw));
        return before_tail(off, normalized(off, mean, rstd));
      });
      emit_tree(kf, post, at, v);
    }, "q");
  }, "row");
  return kf.finish(geo.rows, grain_for(3 * geo.len),
                   std::string(op_name(r.op)) + " over rows of " + std::to_string(geo.len) +
                       (tn ? ", then " + std::string(op_name(tn->op)) : ""));
}

Expected<CpuLaunch> lower_pool(LowerContext& lc, const KernelPlan& kp) {
  const Graph& g = lc.pc.g;
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const Shape& os = r.type.shape;
  const bool two_d = kp.kind == KernelKind::Pool2d;
  const int64_t OH = two_d ? os[os.size() - 2] : 1, OW = os.back();
  const Shape outer_shape(os.begin(), os.end() - 1);

  KernelFunction kf(lc, kp.name);
  llvm::IRBuilder<>& b = kf.b();
  // The root pool and those of its pool pass (kp.tails: the same operand and output shape), each with its consumers.
  std::vector<PoolWindow> windows = {PoolWindow(r, xs)};
  std::vector<EpilogueTree> posts = {build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, -1, true)};
  int64_t taps = windows[0].KH * windows[0].KW;
  for (const FusedTail& t : kp.tails) {
    windows.emplace_back(g.node(t.op), xs);
    posts.push_back(build_epilogue_tree(lc.pc, lc.plan, t.post, t.op, -1, true));
    taps += windows.back().KH * windows.back().KW;
  }
  std::string what = std::string(op_name(r.op));
  for (const FusedTail& t : kp.tails) what += " + " + std::string(op_name(g.node(t.op).op));
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* row) {
    std::vector<Value*> idx = decompose(kf, row, outer_shape);
    Value* plane = two_d ? b.CreateUDiv(row, kf.i64(OH)) : row;
    Value* oh = two_d ? b.CreateURem(row, kf.i64(OH)) : kf.i64(0);
    Value* base = b.CreateMul(plane, kf.i64(windows[0].H * windows[0].W));
    kf.parallel_loop(kf.i64(0), kf.i64(OW), [&](Value* ow) {
      std::vector<Value*> at = idx;
      at.push_back(ow);
      for (size_t i = 0; i < windows.size(); ++i) {
        Value* v = windows[i].emit(kf, oh, ow, [&](Value* ih, Value* iw) {
          return kf.load_operand(x, b.CreateAdd(base, b.CreateAdd(b.CreateMul(ih, kf.i64(windows[0].W)), iw)));
        });
        emit_tree(kf, posts[i], at, v);
      }
    }, "ow");
  }, "row");
  return kf.finish(numel(outer_shape), grain_for(OW * taps), what + " " + shape_str(xs) + " -> " + shape_str(os));
}

// Combines the per-tile partials the anchor stored for each partial row
// reduction (tile order, as fj::combine_partials), then runs their consumers
// with every finished value in a register. One work item per output element.
Expected<CpuLaunch> lower_row_finish(LowerContext& lc, const KernelPlan& kp) {
  const Graph& g = lc.pc.g;
  const std::vector<ValueId> finishes = kp.finishes.empty() ? std::vector<ValueId>{kp.root} : kp.finishes;
  for (ValueId r : finishes)
    if (!lc.plan.partials.count(r)) return Error("cpu codegen: internal error: no partials for " + g.describe(r));
  const PartialBuffers& first = lc.plan.partials.at(finishes[0]);
  const AnchorGeometry geo = analyze_anchor(g, lc.plan.kernels[0].root);
  const Shape& domain = kp.region.domain;

  KernelFunction kf(lc, kp.name);
  llvm::IRBuilder<>& b = kf.b();
  const EpilogueTree post = build_epilogue_tree(lc.pc, lc.plan, kp.region, finishes, -1, true);
  // The wide stage recomputes the region at the wide coordinates.
  const int64_t wide_len = kp.wide.nodes.empty() ? 0 : row_broadcast_len(domain, kp.wide.domain);
  Region all = kp.wide;
  all.nodes = kp.region.nodes;
  all.nodes.insert(all.nodes.end(), kp.wide.nodes.begin(), kp.wide.nodes.end());
  // Row stages (KernelPlan::row_stages): each reduces its value along the row's
  // wide run in order (the region, the wide stage and the earlier stages'
  // consumers recomputed there); the last tree makes the last stores.
  std::vector<EpilogueTree> stage_trees, stage_stores;  // stage_stores: a stored reduction, at row coordinates
  std::vector<ValueId> sources = finishes;
  std::vector<ValueId> stored = kp.wide.stores;
  for (const FusedTail& st : kp.row_stages) {
    Region at = all;
    at.stores = stored;
    stage_trees.push_back(build_epilogue_tree(lc.pc, lc.plan, at, sources, g.node(st.op).operands[0], true));
    sources.push_back(st.op);
    stage_stores.push_back(build_epilogue_tree(lc.pc, lc.plan, row_stage_row_stores(g, kp, stage_stores.size()),
                                               sources, -1, true));
    all.nodes.insert(all.nodes.end(), st.post.nodes.begin(), st.post.nodes.end());
    stored = row_stage_wide_stores(g, st);
  }
  all.stores = stored;
  const EpilogueTree wide = build_epilogue_tree(lc.pc, lc.plan, all, sources, -1, true);
  llvm::Type* f32 = kf.f32_type();
  std::string what;
  // A reduction of every finished row to one value (the kernel's tail): one
  // work item finishes all rows in order and folds them.
  const FusedTail* across = kp.tails.empty() ? nullptr : &kp.tails[0];
  const OpKind across_op = across ? g.node(across->op).op : OpKind::Sum;
  EpilogueTree across_value, across_post;
  Value* acc = nullptr;
  if (across) {
    across_value = build_epilogue_tree(lc.pc, lc.plan, kp.region, finishes, g.node(across->op).operands[0], false);
    across_post = build_epilogue_tree(lc.pc, lc.plan, across->post, across->op, -1, true);
    acc = kf.local(kf.f32(across_op == OpKind::Max ? -INFINITY : across_op == OpKind::Min ? INFINITY : 0.0), "across");
  }
  Value* lo = across ? kf.i64(0) : kf.begin();
  Value* hi = across ? kf.i64(first.rows) : kf.end();
  kf.loop(lo, hi, 1, [&](Value* e) {
    TreeSources values;
    for (ValueId r : finishes) {
      const PartialBuffers& pb = lc.plan.partials.at(r);
      const OpKind op = g.node(r).op;
      const BufferRef sums{BufferKind::Scratch, pb.sums};
      auto at = [&](Value* t) { return b.CreateAdd(b.CreateMul(t, kf.i64(pb.rows)), e, "", true, true); };
      Value* v = nullptr;
      if (op == OpKind::LogSumExp) {
        const BufferRef maxima{BufferKind::Scratch, pb.maxima};
        Value* mx = kf.local(kf.f32(-INFINITY), "max");
        kf.loop(0, pb.tiles, 1, [&](Value* t) {
          b.CreateStore(max_nan(b, b.CreateLoad(f32, mx), kf.load_f32(maxima, at(t))), mx);
        }, "t");
        Value* m = b.CreateLoad(f32, mx);
        Value* sum = kf.local(kf.f32(0), "sum");
        kf.loop(0, pb.tiles, 1, [&](Value* t) {  // tiles whose values are all -inf add nothing
          Value* m_t = kf.load_f32(maxima, at(t));
          Value* part = b.CreateFMul(kf.load_f32(sums, at(t)), kf.call_math("expf", {b.CreateFSub(m_t, m)}));
          part = b.CreateSelect(b.CreateFCmpOEQ(m_t, kf.f32(-INFINITY)), kf.f32(0), part);
          b.CreateStore(b.CreateFAdd(b.CreateLoad(f32, sum), part), sum);
        }, "t");
        Value* lse = b.CreateFAdd(m, kf.call_math("logf", {b.CreateLoad(f32, sum)}));
        v = b.CreateSelect(b.CreateFCmpOEQ(b.CreateFSub(m, m), kf.f32(0)), lse, m);  // inf / NaN: the maximum
      } else {
        const bool is_max = op == OpKind::Max, is_min = op == OpKind::Min;
        Value* acc = kf.local(kf.f32(is_max ? -INFINITY : is_min ? INFINITY : 0.0), "acc");
        kf.loop(0, pb.tiles, 1, [&](Value* t) {
          Value* cur = b.CreateLoad(f32, acc);
          Value* part = kf.load_f32(sums, at(t));
          b.CreateStore(is_max ? max_nan(b, cur, part) : is_min ? min_nan(b, cur, part) : b.CreateFAdd(cur, part), acc);
        }, "t");
        v = b.CreateLoad(f32, acc);
        if (op == OpKind::Mean) v = b.CreateFDiv(v, kf.f32(static_cast<double>(geo.n * geo.groups)));
      }
      values.push_back({r, v});
    }
    emit_tree(kf, post, decompose(kf, e, domain), values);
    if (across) {
      Value* x = emit_tree(kf, across_value, decompose(kf, e, domain), values);
      Value* cur = b.CreateLoad(f32, acc);
      b.CreateStore(across_op == OpKind::Max   ? max_nan(b, cur, x)
                    : across_op == OpKind::Min ? min_nan(b, cur, x)
                                               : b.CreateFAdd(cur, x),
                    acc);
    }
    for (size_t i = 0; i < kp.row_stages.size(); ++i) {  // in order, one after the other along the row
      const OpKind op = g.node(kp.row_stages[i].op).op;
      Value* sum = kf.local(kf.f32(op == OpKind::Max ? -INFINITY : op == OpKind::Min ? INFINITY : 0.0), "stage");
      kf.loop(0, wide_len, 1, [&](Value* q) {
        Value* at = b.CreateAdd(b.CreateMul(e, kf.i64(wide_len), "", true, true), q, "", true, true);
        Value* x = emit_tree(kf, stage_trees[i], decompose(kf, at, kp.wide.domain), values);
        Value* cur = b.CreateLoad(f32, sum);
        b.CreateStore(op == OpKind::Max ? max_nan(b, cur, x) : op == OpKind::Min ? min_nan(b, cur, x) : b.CreateFAdd(cur, x),
                      sum);
      }, "q");
      Value* v = b.CreateLoad(f32, sum);
      if (op == OpKind::Mean) v = b.CreateFDiv(v, kf.f32(static_cast<double>(wide_len)));
      values.push_back({kp.row_stages[i].op, v});
      const auto& nodes = stage_stores[i].nodes;
      if (std::any_of(nodes.begin(), nodes.end(), [](const EpiNode& n) { return n.kind == EpiNode::Kind::Store; }))
        emit_tree(kf, stage_stores[i], decompose(kf, e, domain), values);
    }
    if (wide_len > 0)  // the wide stage (or the last row stage's consumers): this row's run of the broadcast shape
      kf.parallel_loop(kf.i64(0), kf.i64(wide_len), [&](Value* q) {
        Value* at = b.CreateAdd(b.CreateMul(e, kf.i64(wide_len), "", true, true), q, "", true, true);
        emit_tree(kf, wide, decompose(kf, at, kp.wide.domain), values);
      }, "q");
  }, "row");
  if (across) {
    Value* v = b.CreateLoad(f32, acc);
    if (across_op == OpKind::Mean) v = b.CreateFDiv(v, kf.f32(static_cast<double>(first.rows)));
    emit_tree(kf, across_post, std::vector<Value*>(g.node(across->op).type.shape.size(), kf.i64(0)),
              TreeSources{{across->op, v}});
  }
  for (ValueId r : finishes) what += (what.empty() ? "" : ", ") + std::string(op_name(g.node(r).op));
  if (wide_len > 0) what += " (then broadcast over " + shape_str(kp.wide.domain) + ")";
  for (const FusedTail& st : kp.row_stages) what += " (then " + std::string(op_name(g.node(st.op).op)) + " along the rows)";
  if (across) {
    what += " (then " + std::string(op_name(across_op)) + " over the rows)";
    return kf.finish(1, 1, what);
  }
  return kf.finish(first.rows, grain_for(first.tiles * static_cast<int64_t>(finishes.size()) + wide_len),
                   "finishes " + what + " from " + std::to_string(first.tiles) + " per-tile partials of " +
                       std::to_string(first.rows) + " rows");
}

}  // namespace

Expected<CpuLaunch> lower_fallback_kernel(LowerContext& lc, int index) {
  const KernelPlan& kp = lc.plan.kernels[static_cast<size_t>(index)];
  switch (kp.kind) {
    case KernelKind::Pointwise: return lower_pointwise(lc, kp);
    case KernelKind::Reduce: return lower_reduce(lc, kp);
    case KernelKind::Softmax: return lower_softmax(lc, kp);
    case KernelKind::Norm: return lower_norm(lc, kp);
    case KernelKind::Pool2d:
    case KernelKind::Pool1d: return lower_pool(lc, kp);
    case KernelKind::RowFinish: return lower_row_finish(lc, kp);
    case KernelKind::Gather: return lower_gather(lc, kp);
    case KernelKind::Anchor: break;
  }
  return Error("cpu codegen: internal error: anchor kernel passed to the fallback lowering");
}

}  // namespace fusejit::cg::cpu
