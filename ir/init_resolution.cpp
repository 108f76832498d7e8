// Resolves InitKind::Auto by each input's role, like the seeds' PyTorch models.
#include "ir/passes.h"

namespace fusejit {

void resolve_inits(Graph& g) {
  std::optional<ValueId> anchor = g.anchor();
  int64_t fan_in = 0;
  std::vector<InitKind> role(g.nodes.size(), InitKind::Normal);
  if (anchor) {
    const Node& a = g.node(*anchor);
    const Shape& w = g.node(a.operands[1]).type.shape;
    if (a.op == OpKind::Linear) fan_in = w.size() == 2 ? w[1] : 0;
    if (a.op == OpKind::Conv2d) fan_in = w.size() == 4 ? w[1] * w[2] * w[3] : 0;
    for (size_t k = 0; k < a.operands.size(); ++k) {
      InitKind r = a.op == OpKind::Conv2dWeightGrad ? (k == 0 ? InitKind::Uniform01 : InitKind::Normal)  // x, grad
                   : k == 0 || a.op == OpKind::Matmul ? InitKind::Uniform01
                   : k == 1                         ? InitKind::TorchWeight
                                                    : InitKind::TorchBias;
      role[static_cast<size_t>(a.operands[k])] = r;
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.op != OpKind::Input) continue;
    if (n.init == InitKind::Auto) n.init = role[i];
    n.init_fan_in = 0;
    if (n.init == InitKind::TorchWeight) {
      int64_t own = 1;  // a weight's own fan_in: every dim but the first
      for (size_t d = 1; d < n.type.shape.size(); ++d) own *= n.type.shape[d];
      n.init_fan_in = role[i] == InitKind::TorchWeight && fan_in > 0 ? fan_in : own;
    } else if (n.init == InitKind::TorchBias) {
      n.init_fan_in = fan_in > 0 ? fan_in : n.type.numel();
    }
  }
}

}  // namespace fusejit
