#include "tools/fusejit/backend.h"

#include <fstream>

#include "compiler/cpu_program.h"
#include "runtime/cuda_driver.h"

namespace fusejit::cli {

Backend parse_backend_arg(const std::string& value, std::string& error) {
  auto b = parse_backend(value);
  if (!b) {
    error = "--backend expects cuda, cpu or auto, got '" + value + "'";
    return Backend::Cuda;
  }
  return *b;
}

std::string resolve_backend(Backend& backend) {
  if (backend == Backend::Auto)  // as Engine::compile: Cpu only when it exists and no GPU does
    backend = !gpu_available() && cpu_backend_available() ? Backend::Cpu : Backend::Cuda;
  if (backend == Backend::Cuda && !gpu_available())
    return "no GPU: " + gpu_unavailable_reason() +
           (cpu_backend_available() ? " (--backend cpu runs on the host)"
                                    : " (and this build has no CPU backend: it needs LLVM 14)");
  if (backend == Backend::Cpu && !cpu_backend_available())
    return "the CPU backend is not in this build (configure with LLVM 14: apt-get install llvm-14-dev, "
           "-DFUSEJIT_ENABLE_LLVM=ON)";
  return "";
}

Status set_batch(Graph& g, int64_t n) {
  if (n < 1) return Error("--batch must be >= 1");
  auto anchor = g.anchor();
  if (!anchor) return Error("--batch: the graph has no anchor");
  const Node& a = g.node(*anchor);
  const Node& x = g.node(a.operands.at(0));
  if (x.type.rank() < 2) return Error("--batch: the anchor's input has no batch dimension");
  const int64_t old = x.type.shape[0];
  const int rank = x.type.rank();
  std::vector<ValueId> change{a.operands[0]};
  if (a.op == OpKind::Matmul && g.node(a.operands[1]).type.rank() > 2 &&
      g.node(a.operands[1]).type.shape[0] == old)
    change.push_back(a.operands[1]);
  if (a.op == OpKind::Conv2dWeightGrad) change.push_back(a.operands[1]);  // grad [N, Cout, Ho, Wo]
  for (ValueId id : g.inputs()) {
    bool anchor_operand = false;
    for (ValueId op : a.operands) anchor_operand |= op == id;
    const Shape& s = g.node(id).type.shape;
    if (!anchor_operand && static_cast<int>(s.size()) == rank && s[0] == old) change.push_back(id);
  }
  for (ValueId id : change) g.node(id).type.shape[0] = n;
  if (Status s = prepare_graph(g); !s) return Error("--batch " + std::to_string(n) + ": " + s.error().str());
  return {};
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

}  // namespace fusejit::cli
