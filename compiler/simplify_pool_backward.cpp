// A sum over H and W of a pool's backward is the sum of its gradient.
//
// max_pool2d_backward(x, g) adds each window's g at one element of the
// window (its first maximum: every window holds at least one input element,
// padding being at most half the kernel), so its sum over both spatial dims
// is the sum of g over them; avg_pool2d_backward(g) spreads g / divisor over
// the window's elements, which sums back to g where the divisor counts them
// (count_include_pad off, or no padding). The backward of a pool followed by a
// bias-like parameter sums exactly this (the parameter's gradient), so the
// pool's gradient no longer goes to memory for it. Other dims reduce alike;
// keepdim is kept (g has the rank of the pool's input). ±inf and NaN in g
// propagate through either sum; x does not enter the sum.
#include <algorithm>

#include "compiler/simplify_passes.h"

namespace fusejit::simplify {
namespace {

// The gradient operand whose sum equals the spatial sum of pool backward `p`, or -1.
ValueId summed_gradient(const Node& p) {
  if (p.op == OpKind::MaxPool2dBackward) return p.operands[1];
  if (p.op != OpKind::AvgPool2dBackward) return -1;
  const auto& pad = p.attr_ints("padding");
  const bool counts_elements = !p.attr_bool("count_include_pad") || (pad[0] == 0 && pad[1] == 0);
  return counts_elements ? p.operands[0] : -1;
}

bool reduces_h_and_w(const Node& n) {
  const auto& dims = n.attr_ints("dims");
  return std::count(dims.begin(), dims.end(), 2) == 1 && std::count(dims.begin(), dims.end(), 3) == 1;
}

}  // namespace

bool fold_pool_backward_sums(const Graph& g, Graph& out, std::vector<std::string>* notes) {
  Rewriter rw(g, notes);
  out = rw.run([&](ValueId v, Node n) -> ValueId {
    if (n.op != OpKind::Sum || !reduces_h_and_w(n)) return rw.keep(std::move(n));
    const Node& pool = rw.node(n.operands[0]);
    const ValueId grad = summed_gradient(pool);
    if (grad < 0) return rw.keep(std::move(n));
    const ValueId w = rw.emit_op(OpKind::Sum, {grad}, n.type, n.loc, n.attrs, n.name);
    rw.note(rw.describe(v) + ": sum over H, W of " + std::string(op_name(pool.op)) + " -> the same sum of its gradient");
    return w;
  });
  return rw.changed();
}

}  // namespace fusejit::simplify
