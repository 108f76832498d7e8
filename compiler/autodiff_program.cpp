// build_backward: the gradient program of a forward graph as fusejit stages.
//   1. the epilogue stage (no anchor): recomputes the epilogue from the saved
//      anchor output Z, sweeps it in reverse (autodiff_rules.cpp) and writes
//      dZ, the gradients of the epilogue's own inputs, the anchor bias's
//      gradient and the transposed operands the GEMMs below need;
//   2. one GEMM stage per anchor operand: dX and dW of linear, dA and dB of
//      matmul, dX and dW of conv2d, dX and dG of conv2d_weight_grad (autodiff_conv.cpp), each adding the
//      epilogue's contribution to that operand (a residual use of x) in its
//      own epilogue.
#include <algorithm>
#include <set>

#include "compiler/autodiff.h"
#include "ir/passes.h"

namespace fusejit {

std::string_view buffer_role_name(BufferRole r) {
  switch (r) {
    case BufferRole::ForwardInput: return "input";
    case BufferRole::Saved: return "saved";
    case BufferRole::OutputGrad: return "output grad";
    case BufferRole::Temporary: return "temporary";
    case BufferRole::InputGrad: return "input grad";
  }
  return "?";
}

const BackwardBuffer* BackwardProgram::buffer(const std::string& name) const {
  for (const auto& b : buffers)
    if (b.name == name) return &b;
  return nullptr;
}

namespace ad {
namespace {

// Keeps the nodes the outputs reach (stage graphs are written generously).
Graph pruned(const Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (const Output& o : g.outputs) live[static_cast<size_t>(o.value)] = true;
  for (size_t i = g.nodes.size(); i-- > 0;)
    if (live[i])
      for (ValueId o : g.nodes[i].operands) live[static_cast<size_t>(o)] = true;
  Graph out;
  out.name = g.name;
  out.precision = g.precision;
  std::vector<ValueId> remap(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    Node n = g.nodes[i];
    for (ValueId& o : n.operands) o = remap[static_cast<size_t>(o)];
    remap[i] = out.add(std::move(n));
  }
  for (Output o : g.outputs) {
    o.value = remap[static_cast<size_t>(o.value)];
    out.outputs.push_back(o);
  }
  return out;
}

class Builder {
 public:
  Builder(const Graph& fwd, const BackwardOptions& opt) : fwd_(fwd), opt_(opt) {
    for (ValueId i : fwd.inputs()) names_.insert(fwd.node(i).name);
    for (const Output& o : fwd.outputs) names_.insert(o.name);
  }

  Expected<BackwardProgram> run();

 private:
  const Graph& fwd_;
  const BackwardOptions& opt_;
  BackwardProgram p_;
  std::set<std::string> names_;
  std::map<std::string, TensorType> types_;  // buffer name -> type, as first written
  std::string conv_dz_w_;  // conv2d's dW with ConvWgrad::Implicit: the dZ buffer it reads

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 2; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }
  bool running_statistic(ValueId input) const {
    for (const Node& n : fwd_.nodes)
      if (n.op == OpKind::BatchNorm && (n.operands[1] == input || n.operands[2] == input)) return true;
    return false;
  }
  bool wants(ValueId input) const {
    const std::string& name = fwd_.node(input).name;
    return std::find(opt_.no_grad.begin(), opt_.no_grad.end(), name) == opt_.no_grad.end();
  }
  void add_buffer(const std::string& name, const TensorType& type, BufferRole role, const std::string& what) {
    if (p_.buffer(name)) return;
    p_.buffers.push_back(BackwardBuffer{name, type, role, what});
  }
  // Prepares a stage graph, records its outputs as buffers and appends it.
  Status add_stage(Graph g, const std::string& what, const std::map<std::string, std::pair<BufferRole, std::string>>& roles);
  Status anchor_stages(ValueId anchor, const std::string& dz, const std::string& dz_t, const std::string& a_t,
                       const std::string& b_t, const std::map<ValueId, std::string>& parts);
};

Status Builder::add_stage(Graph g, const std::string& what,
                          const std::map<std::string, std::pair<BufferRole, std::string>>& roles) {
  if (g.outputs.empty()) return {};
  g = pruned(g);
  if (Status s = prepare_graph(g); !s)
    return Error("backward: the " + what + " stage does not build: " + s.error().message);
  for (const Output& o : g.outputs) {
    auto role = roles.at(o.name);
    TensorType t = g.node(o.value).type;
    add_buffer(o.name, t, role.first, role.second);
  }
  p_.stages.push_back(BackwardStage{what, std::move(g)});
  return {};
}

Expected<BackwardProgram> Builder::run() {
  p_.forward = fwd_;
  const std::optional<ValueId> anchor = fwd_.anchor();
  for (ValueId i : fwd_.inputs()) add_buffer(fwd_.node(i).name, fwd_.node(i).type, BufferRole::ForwardInput, "");

  // The anchor's output, saved by the forward unless it is an output already.
  std::string z_buf;
  if (anchor) {
    for (const Output& o : fwd_.outputs)
      if (o.value == *anchor) z_buf = o.name;
    if (z_buf.empty()) {
      z_buf = fresh("saved_" + (fwd_.node(*anchor).name.empty() ? std::string("anchor") : fwd_.node(*anchor).name));
      p_.forward.outputs.push_back(Output{z_buf, *anchor, {}});
      if (Status s = prepare_graph(p_.forward); !s) return s.error();
      p_.notes.push_back("the forward saves " + fwd_.describe(*anchor) + " as '" + z_buf +
                         "'; the epilogue stage recomputes the epilogue from it");
    }
    add_buffer(z_buf, fwd_.node(*anchor).type, BufferRole::Saved, "the anchor's output Z");
  }

  // The epilogue stage: reverse sweep from the output gradients to Z.
  Graph eg;
  eg.name = (fwd_.name.empty() ? std::string("chain") : fwd_.name) + "_backward_epilogue";
  eg.precision = fwd_.precision;
  StageWriter w(eg);
  std::map<ValueId, ValueId> primal_of, grad_of;
  std::function<ValueId(ValueId)> primal = [&](ValueId v) -> ValueId {
    if (auto it = primal_of.find(v); it != primal_of.end()) return it->second;
    const Node& n = fwd_.node(v);
    ValueId r;
    if (anchor && v == *anchor) r = w.input(z_buf, n.type);
    else if (n.op == OpKind::Input) r = w.input(n.name, n.type);
    else if (n.op == OpKind::Constant) r = w.constant(n.constant_value());
    else {
      std::vector<ValueId> ops;
      for (ValueId o : n.operands) ops.push_back(primal(o));
      r = n.op == OpKind::BatchNorm ? batch_norm_elementwise(n, w, ops) : w.copy(n, ops, n.type.shape);
    }
    return primal_of[v] = r;
  };
  auto accumulate = [&](ValueId v, ValueId contribution) {
    if (fwd_.node(v).op == OpKind::Constant) return;
    contribution = w.sum_to(contribution, fwd_.node(v).type.shape);
    auto it = grad_of.find(v);
    grad_of[v] = it == grad_of.end() ? contribution : w.add(it->second, contribution);
  };
  std::map<std::string, std::pair<BufferRole, std::string>> roles;
  for (const Output& o : fwd_.outputs) {
    const std::string name = fresh("grad_" + o.name);
    add_buffer(name, fwd_.node(o.value).type, BufferRole::OutputGrad, "the gradient of output '" + o.name + "'");
    accumulate(o.value, w.input(name, fwd_.node(o.value).type));
  }
  // Only nodes between a wanted input (or the anchor) and an output take their
  // derivative: an op without one (im2col) off every wanted path is no error.
  std::vector<bool> reaches(fwd_.nodes.size(), false);
  for (ValueId v = 0; v < static_cast<ValueId>(fwd_.nodes.size()); ++v) {
    const Node& n = fwd_.node(v);
    if (n.op == OpKind::Input) reaches[v] = wants(v);
    else if (anchor && v == *anchor) reaches[v] = true;
    else
      for (ValueId o : n.operands) reaches[v] = reaches[v] || reaches[o];
  }
  SweepContext cx{fwd_, w, primal, accumulate};
  for (ValueId v = static_cast<ValueId>(fwd_.nodes.size()) - 1; v >= 0; --v) {
    const OpKind op = fwd_.node(v).op;
    if (op == OpKind::Input || op == OpKind::Constant || (anchor && v == *anchor) || !reaches[v]) continue;
    auto it = grad_of.find(v);
    if (it == grad_of.end()) continue;
    if (Status s = apply_vjp(cx, v, it->second); !s) return s.error();
  }

  // A gradient that is a stage input already is that buffer (no copy).
  auto buffer_of = [&](ValueId stage_value) -> std::string {
    const Node& n = eg.node(stage_value);
    return n.op == OpKind::Input ? n.name : "";
  };
  std::map<ValueId, std::string> emitted;
  EmitFn emit = [&](ValueId value, const std::string& base, BufferRole role, const std::string& what) {
    if (std::string b = buffer_of(value); !b.empty()) return b;
    if (auto it = emitted.find(value); it != emitted.end()) return it->second;
    const std::string name = fresh(base);
    w.output(name, value);
    roles[name] = {role, what};
    return emitted[value] = name;
  };

  std::map<ValueId, std::string> parts;  // anchor operand -> its epilogue contribution's buffer
  std::set<ValueId> anchor_operands;
  ValueId linear_bias = -1;  // linear's or conv2d's bias: its gradient is a reduction of dZ, in this stage
  if (anchor) {
    for (ValueId o : fwd_.node(*anchor).operands) anchor_operands.insert(o);
    if (fwd_.node(*anchor).op != OpKind::Matmul && fwd_.node(*anchor).operands.size() == 3)
      linear_bias = fwd_.node(*anchor).operands[2];
  }
  for (ValueId i : fwd_.inputs()) {
    const std::string& name = fwd_.node(i).name;
    if (!wants(i) || i == linear_bias) continue;
    auto it = grad_of.find(i);
    if (anchor_operands.count(i)) {
      if (it != grad_of.end())
        parts[i] = emit(it->second, "tmp_" + name + "_epilogue", BufferRole::Temporary,
                        "the epilogue's part of the gradient of '" + name + "'");
      continue;
    }
    if (it == grad_of.end()) {
      p_.notes.push_back("'" + name + "' has " +
                         (running_statistic(i) ? "no gradient (a batch_norm's running statistic, not differentiated, "
                                                 "as in PyTorch)"
                                               : "a zero gradient (nothing differentiable depends on it)"));
      continue;
    }
    p_.input_grads[name] = emit(it->second, "grad_" + name, BufferRole::InputGrad, "the gradient of '" + name + "'");
  }

  // A GEMM operand in the anchor's dtype: a gradient of another dtype (f32
  // where an f32 parameter meets a 16-bit epilogue) is cast in this stage.
  const DType gemm_dtype = anchor_dtype(fwd_.precision);
  auto gemm_operand = [&](ValueId v, const std::string& what) {
    Graph probe = eg;  // the stage so far, typed as prepare_graph will type it
    if (!normalize_attrs(probe) || !infer_types(probe)) return v;  // prepare_graph reports it
    const DType dt = probe.node(v).type.dtype;
    if (dt == gemm_dtype) return v;
    p_.notes.push_back(what + " is " + std::string(dtype_name(dt)) + ": the epilogue stage casts it to " +
                       std::string(dtype_name(gemm_dtype)) + " for the " +
                       std::string(precision_name(fwd_.precision)) + " GEMMs");
    return w.unary(OpKind::Cast, v, {{"dtype", std::string(dtype_name(gemm_dtype))}});
  };

  std::string dz, dz_t, a_t, b_t;
  if (anchor) {
    const Node& an = fwd_.node(*anchor);
    auto it = grad_of.find(*anchor);
    if (it == grad_of.end()) return Error("backward: no output depends differentiably on " + fwd_.describe(*anchor));
    const ValueId dzv_own = it->second;
    const Shape& zs = an.type.shape;
    const ValueId x = an.operands[0], wt = an.operands[1];
    const bool want_x = wants(x), want_w = wants(wt);
    if (an.op != OpKind::Matmul && an.operands.size() == 3 && wants(an.operands[2])) {
      const ValueId bias = an.operands[2];  // linear: over the leading dims; conv2d: over N, H, W
      ValueId gb = an.op == OpKind::Linear ? w.sum_to(dzv_own, fwd_.node(bias).type.shape)
                                           : w.reduce(OpKind::Sum, dzv_own, {0, 2, 3}, /*keepdim=*/false);
      if (auto pb = grad_of.find(bias); pb != grad_of.end()) gb = w.add(gb, pb->second);
      p_.input_grads[fwd_.node(bias).name] =
          emit(gb, "grad_" + fwd_.node(bias).name, BufferRole::InputGrad, "the gradient of the anchor's bias");
    }
    const ValueId dzv = want_x || want_w ? gemm_operand(dzv_own, "dZ") : dzv_own;
    if (an.op == OpKind::Linear) {
      const int64_t n_out = zs.back(), m = numel(zs) / n_out;
      if (want_x) dz = emit(dzv, "tmp_dz", BufferRole::Temporary, "dZ, the gradient of " + fwd_.describe(*anchor));
      if (want_w)
        dz_t = emit(w.transpose(w.reshape(dzv, {m, n_out}), 0, 1), "tmp_dz_t", BufferRole::Temporary, "dZ transposed");
    } else if (an.op == OpKind::Conv2d) {
      Expected<ConvOperands> c =
          conv_backward_operands(fwd_, *anchor, dzv, want_x, want_w, opt_.conv_wgrad, w, primal, emit);
      if (!c) return c.error();
      dz = c->dz, dz_t = c->dz_t, a_t = c->cols, b_t = c->w_flipped, conv_dz_w_ = c->dz_w;
    } else if (an.op == OpKind::Conv2dWeightGrad) {
      const ValueId g = want_x ? gemm_operand(primal(wt), "'" + fwd_.node(wt).name + "'") : -1;
      Expected<ConvOperands> c = wgrad_backward_operands(fwd_, *anchor, dzv, g, want_x, want_w, w, emit);
      if (!c) return c.error();
      dz = c->dz, b_t = c->w_flipped, conv_dz_w_ = c->dz_w;
    } else {  // matmul: a [..., M, K] @ b [..., K, N]
      const Shape& as = fwd_.node(x).type.shape;
      const Shape& bs = fwd_.node(wt).type.shape;
      if (want_x || want_w) dz = emit(dzv, "tmp_dz", BufferRole::Temporary, "dZ, the gradient of " + fwd_.describe(*anchor));
      if (want_x && bs.size() > 2)
        b_t = emit(w.transpose(gemm_operand(primal(wt), "'" + fwd_.node(wt).name + "'"), -2, -1),
                   "tmp_" + fwd_.node(wt).name + "_t", BufferRole::Temporary,
                   "'" + fwd_.node(wt).name + "' with its last two dims swapped");
      if (want_w) {
        const ValueId xv = gemm_operand(primal(x), "'" + fwd_.node(x).name + "'");
        ValueId at = bs.size() == 2 ? w.transpose(w.reshape(xv, {numel(as) / as.back(), as.back()}), 0, 1)
                                    : w.transpose(xv, -2, -1);
        a_t = emit(at, "tmp_" + fwd_.node(x).name + "_t", BufferRole::Temporary,
                   "'" + fwd_.node(x).name + "' transposed for dB");
      }
    }
  }
  if (Status s = add_stage(eg, "epilogue backward (recomputed from Z)", roles); !s) return s.error();
  if (anchor)
    if (Status s = anchor_stages(*anchor, dz, dz_t, a_t, b_t, parts); !s) return s.error();
  return std::move(p_);
}

Status Builder::anchor_stages(ValueId anchor, const std::string& dz, const std::string& dz_t, const std::string& a_t,
                              const std::string& b_t, const std::map<ValueId, std::string>& parts) {
  const Node& an = fwd_.node(anchor);
  const Shape& zs = an.type.shape;
  const ValueId x = an.operands[0], wt = an.operands[1];
  const Shape& xs = fwd_.node(x).type.shape;
  const Shape& ws = fwd_.node(wt).type.shape;
  const DType want = anchor_dtype(fwd_.precision);
  for (const std::string& b : {dz, dz_t, a_t, b_t, conv_dz_w_})
    if (!b.empty() && p_.buffer(b)->type.dtype != want)
      return Error("backward: " + std::string(b) + " is " + std::string(dtype_name(p_.buffer(b)->type.dtype)) +
                   " but the " + std::string(precision_name(fwd_.precision)) + " GEMMs of " + fwd_.describe(anchor) +
                   " need " + std::string(dtype_name(want)) + " (the epilogue stage did not cast it; please report)");
  auto dtype_of = [&](const std::string& b) { return p_.buffer(b)->type.dtype; };

  // One GEMM stage: `gemm` builds the product in the writer; the epilogue's
  // part of the gradient (if any) is added; the result goes to grad_<operand>.
  auto stage = [&](ValueId operand, const std::string& what, auto&& gemm) -> Status {
    Graph g;
    g.name = (fwd_.name.empty() ? std::string("chain") : fwd_.name) + "_backward_d" + fwd_.node(operand).name;
    g.precision = fwd_.precision;
    StageWriter w(g);
    ValueId r = gemm(w);
    const Shape& target = fwd_.node(operand).type.shape;
    if (auto it = parts.find(operand); it != parts.end())
      r = w.add(r, w.input(it->second, TensorType{dtype_of(it->second), w.shape(r)}));
    const std::string name = fresh("grad_" + fwd_.node(operand).name);
    w.output(name, r);
    p_.input_grads[fwd_.node(operand).name] = name;
    if (Status s = add_stage(std::move(g), what + " of " + fwd_.describe(anchor),
                             {{name, {BufferRole::InputGrad, "the gradient of '" + fwd_.node(operand).name + "'"}}});
        !s)
      return s;
    for (auto& b : p_.buffers)  // the stage may write a view ([M, K] of an [B, S, K] x): the buffer has x's shape
      if (b.name == name) b.type.shape = target;
    return Status{};
  };

  const bool wgrad = an.op == OpKind::Conv2dWeightGrad;  // U = d(loss)/d(dW); its dX is conv2d's with dZ := G, W := U
  const char* dx_what = wgrad ? "dX = conv2d(G, U transposed and flipped)" : "dX = conv2d(dZ, W transposed and flipped)";
  if ((an.op == OpKind::Conv2d || wgrad) && !dz.empty() && !b_t.empty())
    if (Status s = stage(x, dx_what, [&](StageWriter& w) {
          return conv_dgrad(an, w, w.input(dz, p_.buffer(dz)->type), w.input(b_t, p_.buffer(b_t)->type), xs);
        }); !s)
      return s;
  // The second operand's stage from x and the stage-1 buffer conv_dz_w_: conv2d's dW = conv2d_weight_grad(X, dZ),
  // conv2d_weight_grad's dG = conv2d(X, U).
  if ((an.op == OpKind::Conv2d || wgrad) && !conv_dz_w_.empty())
    if (Status s = stage(wt, wgrad ? "dG = conv2d(X, U)" : "dW = conv2d_weight_grad(X, dZ)", [&](StageWriter& w) {
          return (wgrad ? conv_forward : conv_wgrad_implicit)(an, w, w.input(fwd_.node(x).name, fwd_.node(x).type),
                                                              w.input(conv_dz_w_, p_.buffer(conv_dz_w_)->type), ws);
        }); !s)
      return s;
  if (an.op == OpKind::Conv2d && !dz_t.empty() && !a_t.empty())
    if (Status s = stage(wt, "dW = dZ^T im2col(X)^T", [&](StageWriter& w) {
          return conv_wgrad(an, w, dz_t, p_.buffer(dz_t)->type, a_t, p_.buffer(a_t)->type);
        }); !s)
      return s;
  if (an.op == OpKind::Conv2d || wgrad) return {};
  if (an.op == OpKind::Linear) {
    const int64_t n_out = zs.back(), k = ws[1], m = numel(zs) / n_out;
    if (!dz.empty())
      if (Status s = stage(x, "dX = dZ W", [&](StageWriter& w) {
            return w.matmul(w.input(dz, {dtype_of(dz), {m, n_out}}), w.input(fwd_.node(wt).name, fwd_.node(wt).type));
          }); !s)
        return s;
    if (!dz_t.empty())
      if (Status s = stage(wt, "dW = dZ^T X", [&](StageWriter& w) {
            return w.matmul(w.input(dz_t, {dtype_of(dz_t), {n_out, m}}),
                            w.input(fwd_.node(x).name, {fwd_.node(x).type.dtype, {m, k}}));
          }); !s)
        return s;
    // a [..., K] x viewed [M, K] gives [M, K]: the buffer is x-shaped
    return {};
  }
  // matmul
  if (wants(x) && !dz.empty())
    if (Status s = stage(x, "dA = dZ B^T", [&](StageWriter& w) {
          const ValueId dzv = w.input(dz, {dtype_of(dz), zs});
          if (ws.size() == 2) return w.linear(dzv, w.input(fwd_.node(wt).name, fwd_.node(wt).type));
          Shape bt = ws;
          std::swap(bt[bt.size() - 1], bt[bt.size() - 2]);
          return w.sum_to(w.matmul(dzv, w.input(b_t, {dtype_of(b_t), bt})), xs);
        }); !s)
      return s;
  if (!a_t.empty())
    if (Status s = stage(wt, "dB = A^T dZ", [&](StageWriter& w) {
          if (ws.size() == 2) {
            const int64_t k = xs.back(), m = numel(xs) / k;
            return w.matmul(w.input(a_t, {dtype_of(a_t), {k, m}}), w.input(dz, {dtype_of(dz), {m, zs.back()}}));
          }
          Shape at = xs;
          std::swap(at[at.size() - 1], at[at.size() - 2]);
          return w.sum_to(w.matmul(w.input(a_t, {dtype_of(a_t), at}), w.input(dz, {dtype_of(dz), zs})), ws);
        }); !s)
      return s;
  return {};
}

}  // namespace
}  // namespace ad

Expected<BackwardProgram> build_backward(const Graph& forward, const BackwardOptions& options) {
  for (const std::string& name : options.no_grad) {
    bool found = false;
    for (ValueId i : forward.inputs()) found = found || forward.node(i).name == name;
    if (!found) return Error("backward: no_grad names '" + name + "', which is not an input of the graph");
  }
  ad::Builder b(forward, options);
  return b.run();
}

}  // namespace fusejit
