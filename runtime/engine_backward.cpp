// Engine::compile_backward and BackwardKernel: the gradient program's forward
// and stages as ordinary compiled kernels, run with caller-owned buffers.
#include "fusejit/backward.h"
#include "fusejit/engine.h"

namespace fusejit {

BackwardKernel::BackwardKernel(BackwardProgram program, std::shared_ptr<CompiledKernel> forward,
                               std::vector<std::shared_ptr<CompiledKernel>> stages)
    : program_(std::move(program)), forward_(std::move(forward)), stages_(std::move(stages)) {}

namespace {

// Binds buffers by the names of `g`, the graph the kernel was compiled from:
// not by k.args(), whose names are those of the first structurally equal graph
// the engine compiled (its cache key leaves names out), e.g. dX and dW of a
// square linear share one kernel.
Status run_kernel(const CompiledKernel& k, const Graph& g, const std::string& what,
                  const std::map<std::string, DevicePtr>& buffers, CUstream_st* stream) {
  std::vector<DevicePtr> in, out;
  auto bind = [&](const std::string& name, const TensorType& type, std::vector<DevicePtr>& to) -> Status {
    auto it = buffers.find(name);
    if (it == buffers.end() || it->second == 0)
      return Error("backward: " + what + " needs buffer '" + name + "' (" + type.str() + "), which was " +
                   (it == buffers.end() ? "not given" : "null"));
    to.push_back(it->second);
    return {};
  };
  for (ValueId i : g.inputs())
    if (Status s = bind(g.node(i).name, g.node(i).type, in); !s) return s;
  for (const Output& o : g.outputs)
    if (Status s = bind(o.name, g.node(o.value).type, out); !s) return s;
  if (in.size() + out.size() != k.args().size()) return Error("backward: " + what + ": argument count mismatch");
  if (Status s = k.launch(in, out, stream); !s) return Error("backward: " + what + ": " + s.error().message);
  return {};
}

}  // namespace

Status BackwardKernel::run_forward(const std::map<std::string, DevicePtr>& buffers, CUstream_st* stream) const {
  return run_kernel(*forward_, program_.forward, "the forward", buffers, stream);
}

Status BackwardKernel::run_backward(const std::map<std::string, DevicePtr>& buffers, CUstream_st* stream) const {
  for (size_t i = 0; i < stages_.size(); ++i)
    if (Status s = run_kernel(*stages_[i], program_.stages[i].graph,
                              "stage " + std::to_string(i + 1) + " (" + program_.stages[i].what + ")", buffers, stream);
        !s)
      return s;
  return {};
}

Expected<std::shared_ptr<BackwardKernel>> Engine::compile_backward(const Graph& graph, const BackwardOptions& backward,
                                                                   const CompileOptions& opts) {
  Graph prepared = graph;
  if (Status s = prepare_graph(prepared); !s) return s.error();
  auto program = build_backward(prepared, backward);
  if (!program) return program.error();
  auto forward = compile(program->forward, opts);
  if (!forward) return forward.error();
  std::vector<std::shared_ptr<CompiledKernel>> stages;
  for (const BackwardStage& st : program->stages) {
    auto k = compile(st.graph, opts);
    if (!k) return Error("backward: the " + st.what + " stage: " + k.error().message, k.error().loc);
    stages.push_back(*k);
  }
  return std::make_shared<BackwardKernel>(std::move(*program), *forward, std::move(stages));
}

}  // namespace fusejit
