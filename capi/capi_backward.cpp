// capi/capi_backward.cpp — the gradient program through the C API.
#include "capi/capi_internal.h"
#include "fusejit/backward.h"

using namespace fusejit::capi;

struct fj_backward {
  fusejit::BackwardProgram program;
  std::vector<fusejit::KernelArg> buffers;  // program.buffers as argument infos
};

namespace {

fj_status spec_of(const fusejit::Graph& g, fj_spec** spec) {
  auto out = std::make_unique<fj_spec>();
  out->graph = g;
  out->args = kernel_args(out->graph);
  *spec = out.release();
  return FJ_OK;
}

}  // namespace

extern "C" {

fj_status fj_backward_build(const fj_spec* forward, const char* const* no_grad, fj_backward** backward) {
  return fj_backward_build_for(forward, no_grad, FJ_BACKEND_CUDA, backward);
}

fj_status fj_backward_build_for(const fj_spec* forward, const char* const* no_grad, fj_backend backend,
                                fj_backward** backward) {
  return guarded([&]() -> fj_status {
    if (!forward) return null_argument("forward");
    if (!backward) return null_argument("backward");
    if (backend != FJ_BACKEND_CUDA && backend != FJ_BACKEND_CPU && backend != FJ_BACKEND_AUTO)
      return fail(FJ_ERR_INVALID_ARGUMENT, "backend " + std::to_string(static_cast<int>(backend)) +
                                               " is not FJ_BACKEND_CUDA, FJ_BACKEND_CPU or FJ_BACKEND_AUTO");
    fusejit::BackwardOptions opts;
    for (const char* const* n = no_grad; n && *n; ++n) opts.no_grad.emplace_back(*n);
    // Both backends run conv2d_weight_grad (the CPU's since 2026-11-25, faster there than im2col + GEMM on
    // stride-1 convs and without the im2col buffer: docs/cpu.md): one program for either today.
    auto p = fusejit::build_backward(forward->graph, opts);
    if (!p) return fail(FJ_ERR_SPEC, message_of(p.error()));
    auto out = std::make_unique<fj_backward>();
    out->program = p.take();
    for (const auto& b : out->program.buffers) out->buffers.push_back(fusejit::KernelArg{b.name, b.type, false});
    *backward = out.release();
    return FJ_OK;
  });
}

void fj_backward_destroy(fj_backward* backward) { delete backward; }

fj_status fj_backward_forward(const fj_backward* backward, fj_spec** spec) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!spec) return null_argument("spec");
    return spec_of(backward->program.forward, spec);
  });
}

fj_status fj_backward_num_stages(const fj_backward* backward, size_t* count) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!count) return null_argument("count");
    *count = backward->program.stages.size();
    return FJ_OK;
  });
}

fj_status fj_backward_stage(const fj_backward* backward, size_t index, fj_spec** spec) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!spec) return null_argument("spec");
    if (index >= backward->program.stages.size())
      return fail(FJ_ERR_INVALID_ARGUMENT, "stage index " + std::to_string(index) + " is out of range (" +
                                               std::to_string(backward->program.stages.size()) + " stages)");
    return spec_of(backward->program.stages[index].graph, spec);
  });
}

fj_status fj_backward_num_buffers(const fj_backward* backward, size_t* count) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!count) return null_argument("count");
    *count = backward->buffers.size();
    return FJ_OK;
  });
}

fj_status fj_backward_buffer(const fj_backward* backward, size_t index, fj_arg_info* info, fj_buffer_role* role) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!role) return null_argument("role");
    if (fj_status s = arg_at(backward->buffers, index, info); s != FJ_OK) return s;
    *role = static_cast<fj_buffer_role>(backward->program.buffers[index].role);
    return FJ_OK;
  });
}

fj_status fj_backward_input_grad(const fj_backward* backward, const char* input, const char** buffer) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!input) return null_argument("input");
    if (!buffer) return null_argument("buffer");
    bool known = false;
    for (fusejit::ValueId i : backward->program.forward.inputs())
      known = known || backward->program.forward.node(i).name == input;
    if (!known) return fail(FJ_ERR_INVALID_ARGUMENT, std::string("'") + input + "' is not an input of the forward");
    auto it = backward->program.input_grads.find(input);
    *buffer = it == backward->program.input_grads.end() ? nullptr : it->second.c_str();
    return FJ_OK;
  });
}

fj_status fj_backward_print(const fj_backward* backward, char** text) {
  return guarded([&]() -> fj_status {
    if (!backward) return null_argument("backward");
    if (!text) return null_argument("text");
    char* out = dup_string(fusejit::print_backward(backward->program));
    if (!out) return fail(FJ_ERR_INTERNAL, "out of memory");
    *text = out;
    return FJ_OK;
  });
}

}  // extern "C"
