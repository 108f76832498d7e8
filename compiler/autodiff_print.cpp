// print_backward: the gradient program as text (fusejit emit --backward).
#include <sstream>

#include "fusejit/backward.h"

namespace fusejit {

std::string print_backward(const BackwardProgram& p) {
  std::ostringstream s;
  s << "backward of \"" << p.forward.name << "\" (" << precision_name(p.forward.precision) << "): "
    << p.stages.size() << " stage" << (p.stages.size() == 1 ? "" : "s") << "\n";
  s << "buffers:\n";
  for (const auto& b : p.buffers)
    s << "  " << b.name << " : " << b.type.str() << "  [" << buffer_role_name(b.role) << "]"
      << (b.what.empty() ? "" : "  " + b.what) << "\n";
  s << "input gradients:\n";
  for (const auto& [input, buffer] : p.input_grads) s << "  " << input << " <- " << buffer << "\n";
  for (const auto& n : p.notes) s << "note: " << n << "\n";
  s << "\nforward (with saved values):\n" << print_graph(p.forward);
  for (size_t i = 0; i < p.stages.size(); ++i)
    s << "\nstage " << i + 1 << ": " << p.stages[i].what << "\n" << print_graph(p.stages[i].graph);
  return s.str();
}

}  // namespace fusejit
