// fusejit's launcher under a C++ autograd Function (FUSEJIT_LAUNCHER auto or cpp-autograd; docs/python.md, "Host
// overhead"): the eager training forward of fusejit.models runs as one call into C++, and its backward as a C++
// autograd node (no Python and no GIL in the backward). The forward kernels and backward programs are registered
// once per DifferentiableSpec (ids into this module's registry, kept for the process). A failed launch raises
// RuntimeError with fusejit's message (fj_last_error, whose address Python hands over with fj_kernel_launch's).
#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <mutex>

#include "launcher.h"

namespace fusejit_launcher {
namespace {

using LastErrorFn = const char* (*)();
LastErrorFn g_last_error = nullptr;

std::mutex g_registry_mutex;
std::vector<std::shared_ptr<const Forward>> g_forwards;
std::vector<std::shared_ptr<const Program>> g_programs;

template <class T>
std::shared_ptr<const T> lookup(const std::vector<std::shared_ptr<const T>>& all, int64_t id, const char* what) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (id < 0 || id >= static_cast<int64_t>(all.size())) throw std::invalid_argument(std::string("fusejit: no such ") + what);
  return all[static_cast<size_t>(id)];
}

int64_t current_stream(const at::Tensor& t) {
  if (!t.is_cuda()) return 0;
  return reinterpret_cast<int64_t>(c10::cuda::getCurrentCUDAStream(t.get_device()).stream());
}

void raise_for(int64_t status) {
  if (status == 0) return;
  throw std::runtime_error(std::string("fusejit: launch failed (status ") + std::to_string(status) +
                           "): " + (g_last_error ? g_last_error() : "no message"));
}

struct FusedFunction : public torch::autograd::Function<FusedFunction> {
  // fwd, prog: registry ids; n_out: the spec's outputs (the forward's first ones), the rest saved for backward
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, int64_t fwd, int64_t prog,
                                                int64_t n_out, at::TensorList inputs) {
    const auto f = lookup(g_forwards, fwd, "forward kernel");
    const auto p = lookup(g_programs, prog, "backward program");
    std::vector<at::Tensor> in = inputs.vec();
    auto [status, outs] = f->run(in, current_stream(in.at(0)));
    raise_for(status);
    torch::autograd::variable_list to_save(in.begin(), in.end());
    const std::vector<int64_t>& saved_slots = p->saved_slots();
    for (size_t j = 0; j < saved_slots.size() && j < outs.size(); ++j)
      if (saved_slots[j] >= 0) to_save.push_back(outs[j]);
    ctx->save_for_backward(to_save);
    ctx->saved_data["prog"] = prog;
    ctx->saved_data["n_in"] = static_cast<int64_t>(in.size());
    ctx->saved_data["n_fwd_out"] = static_cast<int64_t>(outs.size());
    outs.resize(static_cast<size_t>(n_out));
    return outs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    if (at::GradMode::is_enabled())
      throw std::runtime_error("fusejit: the generated backward is not differentiable (no second derivatives "
                               "through a fusejit chain: create_graph=True is not supported by the C++ launcher)");
    const auto p = lookup(g_programs, ctx->saved_data["prog"].toInt(), "backward program");
    const auto n_in = static_cast<size_t>(ctx->saved_data["n_in"].toInt());
    const auto n_fwd_out = static_cast<size_t>(ctx->saved_data["n_fwd_out"].toInt());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> inputs(saved.begin(), saved.begin() + static_cast<std::ptrdiff_t>(n_in));
    std::vector<std::optional<at::Tensor>> outs(n_fwd_out);
    size_t next = n_in;
    const std::vector<int64_t>& saved_slots = p->saved_slots();
    for (size_t j = 0; j < n_fwd_out && j < saved_slots.size(); ++j)
      if (saved_slots[j] >= 0) outs[j] = saved.at(next++);
    std::vector<std::optional<at::Tensor>> output_grads;
    for (size_t k = 0; k < p->num_output_grads(); ++k)
      output_grads.emplace_back(k < grads.size() ? std::optional<at::Tensor>(grads[k]) : std::nullopt);
    auto [status, input_grads] = p->run(inputs, outs, output_grads, current_stream(inputs.at(0)));
    raise_for(status);
    torch::autograd::variable_list result = {at::Tensor(), at::Tensor(), at::Tensor()};  // fwd, prog, n_out
    for (size_t i = 0; i < input_grads.size(); ++i)
      result.push_back(ctx->needs_input_grad(i) ? input_grads[i] : at::Tensor());
    return result;
  }
};

int64_t register_forward(uint64_t handle, std::vector<Shape> shapes, const std::vector<std::string>& dtypes) {
  auto f = std::make_shared<const Forward>(handle, std::move(shapes), dtypes);
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_forwards.push_back(std::move(f));
  return static_cast<int64_t>(g_forwards.size()) - 1;
}

int64_t register_program(int64_t slots, std::vector<int64_t> saved_slots, std::vector<Program::GradSpec> grads,
                         std::vector<Program::StageSpec> stages, std::vector<int64_t> input_grad_slots) {
  auto p = std::make_shared<const Program>(slots, std::move(saved_slots), std::move(grads), std::move(stages),
                                           std::move(input_grad_slots));
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_programs.push_back(std::move(p));
  return static_cast<int64_t>(g_programs.size()) - 1;
}

torch::autograd::variable_list apply(int64_t fwd, int64_t prog, int64_t n_out, const std::vector<at::Tensor>& inputs) {
  return FusedFunction::apply(fwd, prog, n_out, at::TensorList(inputs));
}

void set_last_error(uint64_t address) { g_last_error = reinterpret_cast<LastErrorFn>(address); }

}  // namespace
}  // namespace fusejit_launcher

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "fusejit's launcher under a C++ autograd Function: the eager training forward and its backward node";
  m.def("set_launch", &fusejit_launcher::set_launch, "fj_kernel_launch's address (ctypes)");
  m.def("set_last_error", &fusejit_launcher::set_last_error, "fj_last_error's address (ctypes)");
  m.def("register_forward", &fusejit_launcher::register_forward);
  m.def("register_program", &fusejit_launcher::register_program);
  m.def("apply", &fusejit_launcher::apply);
}
