// The fusion plan as text (Program::plan_text): what runs in which kernel,
// what is stored where, and why something did not fuse.
#include <algorithm>
#include <set>
#include <sstream>

#include "compiler/emitters.h"
#include "compiler/plan.h"

namespace fusejit::cg {
namespace {

std::string values(const Graph& g, const std::vector<ValueId>& vs) {
  std::string s;
  for (ValueId v : vs) s += (s.empty() ? "" : ", ") + std::string(op_name(g.node(v).op)) + " %" + std::to_string(v);
  return s.empty() ? "(none)" : s;
}

std::string buffer_str(const Graph& g, BufferRef b) {
  switch (b.kind) {
    case BufferKind::Input: return "input " + std::to_string(b.index);
    case BufferKind::Output:
      return "output " + std::to_string(b.index) + " '" + g.outputs[static_cast<size_t>(b.index)].name + "'";
    case BufferKind::Scratch: return "scratch " + std::to_string(b.index);
  }
  return "?";
}

// What a layout node in a region does (its operand read at other coordinates).
std::string layout_line(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  const ValueId x = n.operands[0];
  const std::string xs = "%" + std::to_string(x) + " " + shape_str(g.node(x).type.shape);
  if (n.op == OpKind::Transpose) {
    const auto& d = n.attr_ints("dims");
    return "transpose %" + std::to_string(v) + " reads " + xs + " with dims " + std::to_string(d[0]) + " and " +
           std::to_string(d[1]) + " swapped";
  }
  if (n.op == OpKind::Expand) return "expand %" + std::to_string(v) + " broadcasts " + xs + " to " + shape_str(n.type.shape);
  return "reshape %" + std::to_string(v) + " reads " + xs + " as " + shape_str(n.type.shape) + " (size-1 dims moved)";
}

void region_lines(std::ostringstream& s, const Graph& g, const Plan& plan, const Region& r, const std::string& what) {
  s << "  " << what << " at " << shape_str(r.domain) << ": " << values(g, r.nodes) << "\n";
  for (ValueId v : r.nodes)
    if (op_category(g.node(v).op) == OpCategory::Layout) s << "    " << layout_line(g, v) << "\n";
  for (ValueId v : r.stores) {
    s << "    stores %" << v << " ->";
    for (const BufferRef& b : plan.store_to.at(v)) s << " " << buffer_str(g, b);
    if (std::find(r.transposed.begin(), r.transposed.end(), v) != r.transposed.end())
      s << " (transpose of %" << g.node(v).operands[0] << ": at swapped coordinates)";
    s << "\n";
  }
}

std::string label(const Graph& g, ValueId v) { return std::string(op_name(g.node(v).op)) + " %" + std::to_string(v); }

}  // namespace

std::string plan_text(const Graph& g, const Plan& plan) {
  std::ostringstream s;
  s << "fusion plan for '" << g.name << "' (precision " << precision_name(g.precision) << "): "
    << plan.kernels.size() << " kernel(s), " << plan.scratch.size() << " scratch buffer(s)\n";
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const KernelPlan& kp = plan.kernels[k];
    s << "kernel " << k << " " << kp.name << " [" << kernel_kind_name(kp.kind) << "]";
    if (kp.finishes.size() > 1)
      s << " " << values(g, kp.finishes) << " " << g.node(kp.root).type.str();
    else if (kp.root >= 0)
      s << " " << label(g, kp.root) << " " << g.node(kp.root).type.str();
    if (kp.kind == KernelKind::Anchor && kp.mainloop == Mainloop::Wgmma)
      s << ", wgmma " << kp.mma_kind << " tile " << kp.wgmma.str();
    else if (kp.kind == KernelKind::Anchor && kp.mainloop == Mainloop::Mma && kp.conv_patch)
      s << ", mma " << kp.mma_kind << " tile " << kp.mma.bm << "x" << kp.mma.bn << " from halo patches, "
        << kp.mma.threads() << " threads"
        << (kp.mma.warp_n > 0 ? " (warps " + std::to_string(kp.mma.wm()) + "x" + std::to_string(kp.mma.wn()) + ")" : "");
    else if (kp.kind == KernelKind::Anchor && kp.mainloop == Mainloop::Mma)
      s << ", mma " << kp.mma_kind << " tile " << kp.mma.str();
    else if (kp.kind == KernelKind::Anchor)
      s << ", tile " << kp.tile.str();
    if (kp.kind == KernelKind::RowFinish) {
      const bool atomic = plan.partials.at(kp.finishes.empty() ? kp.root : kp.finishes[0]).atomic;
      s << (atomic ? ", reads (and zeroes) the atomic sums in scratch" : ", reads per-tile partials from scratch");
      for (ValueId r : kp.finishes) {
        const PartialBuffers& pb = plan.partials.at(r);
        s << (r == kp.finishes[0] ? " " : ", ") << pb.sums;
        if (pb.maxima >= 0) s << ", " << pb.maxima;
      }
    } else if (kp.root >= 0 && kp.kind != KernelKind::Anchor) {
      const ValueId in = g.node(kp.root).operands[0];
      auto it = plan.buffer.find(in);
      const auto& streamed = kp.streamed.stores;
      if (it == plan.buffer.end() || std::find(streamed.begin(), streamed.end(), in) != streamed.end())
        s << ", computes %" << in << " from the inputs";
      else
        s << ", reads %" << in << " from " << buffer_str(g, it->second);
    }
    s << "\n";
    region_lines(s, g, plan, kp.region, kp.kind == KernelKind::Anchor ? "epilogue" : "elementwise");
    const bool anchor_wide = kp.kind == KernelKind::Anchor && !kp.wide.nodes.empty();  // after its tail (below)
    if (!kp.wide.nodes.empty() && !anchor_wide)
      region_lines(s, g, plan, kp.wide, kp.wide_columns ? "then, as columns," : "then, broadcast over the rows,");
    for (const FusedTail& t : kp.row_stages) {  // the row-shaped consumers named apart from the wide ones
      Region wide = t.post;
      std::vector<ValueId> per_row;
      for (ValueId v : t.post.nodes)
        if (g.node(v).type.shape != t.post.domain) per_row.push_back(v);
      wide.nodes.erase(std::remove_if(wide.nodes.begin(), wide.nodes.end(),
                                      [&](ValueId v) { return g.node(v).type.shape != t.post.domain; }),
                       wide.nodes.end());
      region_lines(s, g, plan, wide,
                   "then " + label(g, t.op) + " along the rows" +
                       (per_row.empty() ? std::string() : ", per row " + values(g, per_row)) + ", and");
    }
    if (!kp.streamed.stores.empty()) region_lines(s, g, plan, kp.streamed, "as it reads the rows,");
    for (const FusedTail& t : kp.tails) {
      if (t.partial)
        s << "  partials of " << label(g, t.op) << " -> scratch " << plan.partials.at(t.op).sums << "\n";
      else
        region_lines(s, g, plan, t.post, "fused " + label(g, t.op) + ", then");
    }
    if (anchor_wide) region_lines(s, g, plan, kp.wide, "then, broadcast over the rows,");
    for (const std::string& n : kp.notes) s << "  note: " << n << "\n";
  }
  for (size_t i = 0; i < plan.scratch.size(); ++i)
    s << "scratch " << i << ": " << plan.scratch[i].bytes << " bytes, " << plan.scratch[i].what << "\n";
  for (const std::string& n : plan.notes) s << "note: " << n << "\n";
  return s.str();
}

std::string kernel_base_name(const PlanContext& ctx, const KernelPlan& kp, int index) {
  const Graph& g = ctx.g;
  auto ops = [&](const std::vector<ValueId>& vs) {
    std::string s;
    for (ValueId v : vs) s += "_" + std::string(op_name(g.node(v).op));
    return s;
  };
  auto pool_label = [&](ValueId v) {
    const Node& n = g.node(v);
    std::string kind = (n.op == OpKind::MaxPool2d || n.op == OpKind::MaxPool1d) ? "maxpool" : "avgpool";
    if (n.op == OpKind::GlobalAvgPool) return std::string("globalavgpool");
    if (n.op == OpKind::MaxPool1d || n.op == OpKind::AvgPool1d)
      return kind + "1d" + std::to_string(n.attr_int("kernel_size"));
    const auto& k = n.attr_ints("kernel_size");
    return kind + (k[0] == k[1] ? std::to_string(k[0]) : std::to_string(k[0]) + "x" + std::to_string(k[1]));
  };
  std::string name = "fj";
  std::string tail;
  if (kp.kind == KernelKind::Anchor) {
    const Node& a = g.node(kp.root);
    name += "_" + std::string(op_name(a.op));
    if (kp.mainloop != Mainloop::Simt)  // the precision is a mainloop property
      name += "_" + std::string(mainloop_name(kp.mainloop)) + "_" + kp.mma_kind + (kp.conv_patch ? "_halo" : "") +
              (kp.wgrad_nhwc ? "_nhwc" : "") + (kp.conv_nchw ? "_nchw" : "");
    if (a.op == OpKind::Conv2d) {
      const Shape& w = g.node(a.operands[1]).type.shape;
      name += "_k" + (w[2] == w[3] ? std::to_string(w[2]) : std::to_string(w[2]) + "x" + std::to_string(w[3]));
    } else if (a.op == OpKind::Conv2dWeightGrad) {
      const auto& k = a.attr_ints("kernel_size");
      name += "_k" + (k[0] == k[1] ? std::to_string(k[0]) : std::to_string(k[0]) + "x" + std::to_string(k[1]));
    }
    tail = ops(kp.region.nodes);
    for (const FusedTail& t : kp.tails) {
      if (t.partial) continue;
      const Node& tn = g.node(t.op);
      tail += "_" + (op_category(tn.op) == OpCategory::Pool ? pool_label(t.op) : std::string(op_name(tn.op)));
      tail += ops(t.post.nodes);
    }
    if (!kp.wide.nodes.empty()) tail += "_broadcast" + ops(kp.wide.nodes);  // row_broadcast
  } else if (kp.kind == KernelKind::Pointwise) {
    name += kp.region.nodes.empty() ? "_write" : "_pointwise";
    tail = ops(kp.region.nodes);
    if (kp.region.nodes.empty() && !kp.region.stores.empty()) {  // leaf expressions (or a view) written out
      const ValueId v = kp.region.stores[0];
      tail = ops(ctx.leaf_expr[static_cast<size_t>(v)] ? recomputed_nodes(ctx, v, index).ops : std::vector<ValueId>{v});
      if (tail.empty()) tail = "_" + std::to_string(v);
    }
  } else {
    const Node& r = g.node(kp.root);
    if (kp.finishes.size() > 1)
      name += "_row_finish";  // several reductions finished together
    else
      name += "_" + (op_category(r.op) == OpCategory::Pool ? pool_label(kp.root) : std::string(op_name(r.op)));
    if (kp.kind == KernelKind::RowFinish && kp.finishes.size() <= 1) name += "_finish";
    tail = ops(kp.region.nodes) + ops(kp.wide.nodes);
    for (const FusedTail& t : kp.tails)
      tail += "_" + (op_category(g.node(t.op).op) == OpCategory::Pool ? pool_label(t.op) : std::string(op_name(g.node(t.op).op))) +
              ops(t.post.nodes);
    for (const FusedTail& t : kp.row_stages) tail += "_" + std::string(op_name(g.node(t.op).op)) + ops(t.post.nodes);
  }
  if (tail.size() > 48) tail = tail.substr(0, tail.rfind('_', 44)) + "_etc";
  return name + tail;
}

void name_kernels(const PlanContext& ctx, Plan& plan) {
  std::set<std::string> names;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    std::string name = kernel_base_name(ctx, plan.kernels[k], static_cast<int>(k));
    if (names.count(name)) name += "_" + std::to_string(k);
    names.insert(name);
    plan.kernels[k].name = name;
  }
}

}  // namespace fusejit::cg
