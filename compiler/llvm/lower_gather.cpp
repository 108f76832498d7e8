// The gather kernels lowered to LLVM: flip, im2col, insert_zeros, the backward
// of max / avg pooling and their adjoints, one output element at a time (templates/gather.cuh's rules),
// the fused consumers applied before the store.
#include <algorithm>
#include <cmath>

#include "compiler/llvm/lower.h"

namespace fusejit::cg::cpu {
namespace {

using llvm::Value;

constexpr int64_t kElementsPerTask = 16384;

struct Window {
  int64_t h = 1, w = 1, oh = 1, ow = 1, kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

Window window_of(const Node& r, const Shape& in, const Shape& out) {
  Window q;
  const auto& k = r.attr_ints("kernel_size");
  const auto& st = r.attr_ints("stride");
  const auto& pd = r.attr_ints("padding");
  q.h = in[2], q.w = in[3], q.oh = out[2], q.ow = out[3];
  q.kh = k[0], q.kw = k[1], q.sh = st[0], q.sw = st[1], q.ph = pd[0], q.pw = pd[1];
  if (r.attrs.count("dilation")) q.dh = r.attr_ints("dilation")[0], q.dw = r.attr_ints("dilation")[1];
  return q;
}

class GatherLowering {
 public:
  GatherLowering(KernelFunction& kf) : kf_(kf), b_(kf.b()) {}

  Value* in_range(Value* v, int64_t hi) {
    return b_.CreateAnd(b_.CreateICmpSGE(v, kf_.i64(0)), b_.CreateICmpSLT(v, kf_.i64(hi)));
  }

  // f(o, t) for each window o along one axis holding input position `pos` at its tap t.
  void window_taps_holding(Value* pos, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out,
                           const std::function<void(Value*, Value*)>& f, const std::string& name) {
    kf_.loop(0, k, 1, [&](Value* t) {
      Value* start = b_.CreateSub(b_.CreateAdd(pos, kf_.i64(p)), b_.CreateMul(t, kf_.i64(d)));
      Value* ok = b_.CreateICmpSGE(start, kf_.i64(0));
      Value* safe = b_.CreateSelect(ok, start, kf_.i64(0));
      ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateURem(safe, kf_.i64(s)), kf_.i64(0)));
      Value* o = b_.CreateUDiv(safe, kf_.i64(s));
      ok = b_.CreateAnd(ok, b_.CreateICmpSLT(o, kf_.i64(out)));
      kf_.if_then(ok, [&] { f(o, t); });
    }, name);
  }
  void windows_holding(Value* pos, int64_t k, int64_t s, int64_t p, int64_t d, int64_t out,
                       const std::function<void(Value*)>& f, const std::string& name) {
    window_taps_holding(pos, k, s, p, d, out, [&](Value* o, Value*) { f(o); }, name);
  }

  // The first maximum (the last NaN), as PyTorch picks it, of x's window at (h0, w0) in the plane at
  // plane_base: stored in `arg` (its offset in the plane; -1: no element), `m` its value.
  void window_argmax(ValueId x, Value* plane_base, Value* h0, Value* w0, const Window& q, Value* m, Value* arg) {
    b_.CreateStore(kf_.f32(-INFINITY), m);
    b_.CreateStore(kf_.i64(-1), arg);
    kf_.loop(0, q.kh, 1, [&](Value* i) {
      Value* ih = b_.CreateAdd(h0, b_.CreateMul(i, kf_.i64(q.dh)));
      kf_.if_then(in_range(ih, q.h), [&] {
        kf_.loop(0, q.kw, 1, [&](Value* j) {
          Value* iw = b_.CreateAdd(w0, b_.CreateMul(j, kf_.i64(q.dw)));
          kf_.if_then(in_range(iw, q.w), [&] {
            Value* pos = b_.CreateAdd(b_.CreateMul(ih, kf_.i64(q.w)), iw);
            Value* xv = kf_.load_operand(x, b_.CreateAdd(plane_base, pos));
            Value* mv = b_.CreateLoad(kf_.f32_type(), m);
            Value* take = b_.CreateOr(b_.CreateICmpSLT(b_.CreateLoad(b_.getInt64Ty(), arg), kf_.i64(0)),
                                      b_.CreateOr(b_.CreateFCmpOGT(xv, mv), b_.CreateFCmpUNO(xv, xv)));
            b_.CreateStore(b_.CreateSelect(take, xv, mv), m);
            b_.CreateStore(b_.CreateSelect(take, pos, b_.CreateLoad(b_.getInt64Ty(), arg)), arg);
          });
        }, "j");
      });
    }, "i");
  }

  // The adjoints at output coordinates `at` (insert_zeros_backward, im2col_backward,
  // max_pool2d_double_backward); `per_element`: the loads an element takes.
  Value* adjoint(const Graph& g, const Node& r, const std::vector<Value*>& at, const Shape& os, int64_t& per_element);

 private:
  KernelFunction& kf_;
  llvm::IRBuilder<>& b_;
};

Value* GatherLowering::adjoint(const Graph& g, const Node& r, const std::vector<Value*>& at, const Shape& os,
                               int64_t& per_element) {
  const ValueId grad = r.operands[r.op == OpKind::MaxPool2dDoubleBackward ? 1 : 0];
  const Shape& gs = g.node(grad).type.shape;
  Value* plane = b_.CreateAdd(b_.CreateMul(at[0], kf_.i64(os[1])), at[1]);
  Value* acc = kf_.local(kf_.f32(0), "acc");
  b_.CreateStore(kf_.f32(0), acc);
  if (r.op == OpKind::InsertZerosBackward) {  // grad[.., i * stride - crop, j * stride - crop], 0 outside
    const auto& st = r.attr_ints("stride");
    const auto& crop = r.attr_ints("crop");
    Value* gr = b_.CreateSub(b_.CreateMul(at[2], kf_.i64(st[0])), kf_.i64(crop[0]));
    Value* gc = b_.CreateSub(b_.CreateMul(at[3], kf_.i64(st[1])), kf_.i64(crop[1]));
    kf_.if_then(b_.CreateAnd(in_range(gr, gs[2]), in_range(gc, gs[3])), [&] {
      Value* off = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(plane, kf_.i64(gs[2])), gr), kf_.i64(gs[3])), gc);
      b_.CreateStore(kf_.load_operand(grad, off), acc);
    });
    return b_.CreateLoad(kf_.f32_type(), acc);
  }
  if (r.op == OpKind::MaxPool2dDoubleBackward) {  // grad (x's shape) at the window's first maximum of x
    const Window q = window_of(r, gs, os);
    per_element = q.kh * q.kw;
    Value* m = kf_.local(kf_.f32(-INFINITY), "max");
    Value* arg = kf_.local(kf_.i64(-1), "arg");
    Value* base = b_.CreateMul(plane, kf_.i64(q.h * q.w));
    window_argmax(r.operands[0], base, b_.CreateSub(b_.CreateMul(at[2], kf_.i64(q.sh)), kf_.i64(q.ph)),
                  b_.CreateSub(b_.CreateMul(at[3], kf_.i64(q.sw)), kf_.i64(q.pw)), q, m, arg);
    Value* a = b_.CreateLoad(b_.getInt64Ty(), arg);
    kf_.if_then(b_.CreateICmpSGE(a, kf_.i64(0)), [&] { b_.CreateStore(kf_.load_operand(grad, b_.CreateAdd(base, a)), acc); });
    return b_.CreateLoad(kf_.f32_type(), acc);
  }
  // col2im: x[n, c, h, w] sums the column entries (row (c, i, j), column (n, ho, wo)) whose tap reads it
  const auto& k = r.attr_ints("kernel_size");
  const auto& st = r.attr_ints("stride");
  const auto& pd = r.attr_ints("padding");
  const auto& dl = r.attr_ints("dilation");
  const int64_t ow = (os[3] + 2 * pd[1] - dl[1] * (k[1] - 1) - 1) / st[1] + 1, oh = gs[1] / os[0] / ow;
  per_element = k[0] * k[1];
  window_taps_holding(at[2], k[0], st[0], pd[0], dl[0], oh, [&](Value* ho, Value* i) {
    window_taps_holding(at[3], k[1], st[1], pd[1], dl[1], ow, [&](Value* wo, Value* j) {
      Value* row = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(at[1], kf_.i64(k[0])), i), kf_.i64(k[1])), j);
      Value* col = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(at[0], kf_.i64(oh)), ho), kf_.i64(ow)), wo);
      Value* gv = kf_.load_operand(grad, b_.CreateAdd(b_.CreateMul(row, kf_.i64(gs[1])), col));
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(kf_.f32_type(), acc), gv), acc);
    }, "tw");
  }, "th");
  return b_.CreateLoad(kf_.f32_type(), acc);
}

}  // namespace

Expected<CpuLaunch> lower_gather(LowerContext& lc, const KernelPlan& kp) {
  const Graph& g = lc.pc.g;
  const Node& r = g.node(kp.root);
  const Shape& os = r.type.shape;
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const int64_t inner = os.empty() ? 1 : os.back();
  const Shape outer_shape = os.empty() ? Shape{} : Shape(os.begin(), os.end() - 1);

  KernelFunction kf(lc, kp.name);
  llvm::IRBuilder<>& b = kf.b();
  GatherLowering gl(kf);
  const EpilogueTree post = build_epilogue_tree(lc.pc, lc.plan, kp.region, kp.root, -1, true);
  int64_t per_element = 1;
  kf.loop(kf.begin(), kf.end(), 1, [&](Value* row) {
    std::vector<Value*> idx = decompose(kf, row, outer_shape);
    kf.loop(kf.i64(0), kf.i64(inner), 1, [&](Value* last) {
      std::vector<Value*> at = idx;
      if (!os.empty()) at.push_back(last);
      Value* v = nullptr;
      if (r.op == OpKind::Flip) {
        const auto& dims = r.attr_ints("dims");
        Value* off = kf.i64(0);
        int64_t stride = 1;
        for (size_t d = os.size(); d-- > 0;) {
          Value* c = at[d];
          if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end())
            c = b.CreateSub(kf.i64(os[d] - 1), c);
          off = b.CreateAdd(off, b.CreateMul(c, kf.i64(stride)));
          stride *= os[d];
        }
        v = kf.load_operand(x, off);
      } else if (r.op == OpKind::InsertZeros) {
        const auto& st = r.attr_ints("stride");
        const std::vector<int64_t> crop = r.attrs.count("crop") ? r.attr_ints("crop") : std::vector<int64_t>{0, 0};
        Value* i = b.CreateAdd(at[2], kf.i64(crop[0]));  // the spread position: shifted by the crop
        Value* j = b.CreateAdd(at[3], kf.i64(crop[1]));
        Value* hit = b.CreateAnd(b.CreateICmpEQ(b.CreateURem(i, kf.i64(st[0])), kf.i64(0)),
                                 b.CreateICmpEQ(b.CreateURem(j, kf.i64(st[1])), kf.i64(0)));
        Value* si = b.CreateUDiv(i, kf.i64(st[0]));
        Value* sj = b.CreateUDiv(j, kf.i64(st[1]));
        hit = b.CreateAnd(hit, b.CreateAnd(b.CreateICmpSLT(si, kf.i64(xs[2])), b.CreateICmpSLT(sj, kf.i64(xs[3]))));
        Value* acc = kf.local(kf.f32(0), "spread");
        b.CreateStore(kf.f32(0), acc);
        kf.if_then(hit, [&] {
          Value* plane = b.CreateAdd(b.CreateMul(at[0], kf.i64(xs[1])), at[1]);
          Value* off = b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(plane, kf.i64(xs[2])), si), kf.i64(xs[3])), sj);
          b.CreateStore(kf.load_operand(x, off), acc);
        });
        v = b.CreateLoad(kf.f32_type(), acc);
      } else if (r.op == OpKind::Im2col) {
        const auto& k = r.attr_ints("kernel_size");
        const auto& st = r.attr_ints("stride");
        const auto& pd = r.attr_ints("padding");
        const auto& dl = r.attr_ints("dilation");
        const int64_t ow = (xs[3] + 2 * pd[1] - dl[1] * (k[1] - 1) - 1) / st[1] + 1, oh = os[1] / xs[0] / ow;
        Value* kw = b.CreateURem(at[0], kf.i64(k[1]));
        Value* kh = b.CreateURem(b.CreateUDiv(at[0], kf.i64(k[1])), kf.i64(k[0]));
        Value* c = b.CreateUDiv(at[0], kf.i64(k[0] * k[1]));
        Value* wo = b.CreateURem(at[1], kf.i64(ow));
        Value* ho = b.CreateURem(b.CreateUDiv(at[1], kf.i64(ow)), kf.i64(oh));
        Value* n = b.CreateUDiv(at[1], kf.i64(oh * ow));
        Value* ih = b.CreateAdd(b.CreateSub(b.CreateMul(ho, kf.i64(st[0])), kf.i64(pd[0])), b.CreateMul(kh, kf.i64(dl[0])));
        Value* iw = b.CreateAdd(b.CreateSub(b.CreateMul(wo, kf.i64(st[1])), kf.i64(pd[1])), b.CreateMul(kw, kf.i64(dl[1])));
        Value* acc = kf.local(kf.f32(0), "col");
        b.CreateStore(kf.f32(0), acc);
        kf.if_then(b.CreateAnd(gl.in_range(ih, xs[2]), gl.in_range(iw, xs[3])), [&] {
          Value* plane = b.CreateAdd(b.CreateMul(n, kf.i64(xs[1])), c);
          Value* off = b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(plane, kf.i64(xs[2])), ih), kf.i64(xs[3])), iw);
          b.CreateStore(kf.load_operand(x, off), acc);
        });
        v = b.CreateLoad(kf.f32_type(), acc);
      } else if (r.op == OpKind::InsertZerosBackward || r.op == OpKind::Im2colBackward ||
                 r.op == OpKind::MaxPool2dDoubleBackward) {
        v = gl.adjoint(g, r, at, os, per_element);
      } else {  // the pools' backward at input (plane, h, w)
        const bool is_max = r.op == OpKind::MaxPool2dBackward;
        const ValueId grad = r.operands[is_max ? 1 : 0];
        const Window q = window_of(r, os, g.node(grad).type.shape);
        per_element = q.kh * q.kw * (is_max ? q.kh * q.kw : 1);
        Value* h = at[2];
        Value* w = at[3];
        Value* plane = b.CreateAdd(b.CreateMul(at[0], kf.i64(os[1])), at[1]);
        Value* sum = kf.local(kf.f32(0), "sum");
        Value* m = kf.local(kf.f32(-INFINITY), "max");
        Value* arg = kf.local(kf.i64(-1), "arg");
        b.CreateStore(kf.f32(0), sum);
        gl.windows_holding(h, q.kh, q.sh, q.ph, q.dh, q.oh, [&](Value* oh) {
          gl.windows_holding(w, q.kw, q.sw, q.pw, q.dw, q.ow, [&](Value* ow) {
            Value* gv = kf.load_operand(grad, b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(plane, kf.i64(q.oh)), oh),
                                                                  kf.i64(q.ow)), ow));
            Value* h0 = b.CreateSub(b.CreateMul(oh, kf.i64(q.sh)), kf.i64(q.ph));
            Value* w0 = b.CreateSub(b.CreateMul(ow, kf.i64(q.sw)), kf.i64(q.pw));
            if (!is_max) {
              Value* h1 = b.CreateAdd(h0, kf.i64(q.kh));
              Value* w1 = b.CreateAdd(w0, kf.i64(q.kw));
              auto smin = [&](Value* a, int64_t c) { return b.CreateSelect(b.CreateICmpSLT(a, kf.i64(c)), a, kf.i64(c)); };
              auto smax0 = [&](Value* a) { return b.CreateSelect(b.CreateICmpSGT(a, kf.i64(0)), a, kf.i64(0)); };
              h1 = smin(h1, q.h + q.ph);
              w1 = smin(w1, q.w + q.pw);
              Value* divisor = r.attr_bool("count_include_pad")
                                   ? b.CreateMul(b.CreateSub(h1, h0), b.CreateSub(w1, w0))
                                   : b.CreateMul(b.CreateSub(smin(h1, q.h), smax0(h0)), b.CreateSub(smin(w1, q.w), smax0(w0)));
              b.CreateStore(b.CreateFAdd(b.CreateLoad(kf.f32_type(), sum),
                                         b.CreateFDiv(gv, b.CreateSIToFP(divisor, kf.f32_type()))), sum);
              return;
            }
            gl.window_argmax(x, b.CreateMul(plane, kf.i64(q.h * q.w)), h0, w0, q, m, arg);
            Value* mine = b.CreateICmpEQ(b.CreateLoad(b.getInt64Ty(), arg),
                                         b.CreateAdd(b.CreateMul(h, kf.i64(q.w)), w));
            b.CreateStore(b.CreateFAdd(b.CreateLoad(kf.f32_type(), sum), b.CreateSelect(mine, gv, kf.f32(0))), sum);
          }, "tw");
        }, "th");
        v = b.CreateLoad(kf.f32_type(), sum);
      }
      emit_tree(kf, post, at, v);
    }, "e");
  }, "row");
  return kf.finish(numel(outer_shape), std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, inner * per_element)),
                   std::string(op_name(r.op)) + " -> " + shape_str(os));
}

}  // namespace fusejit::cg::cpu
