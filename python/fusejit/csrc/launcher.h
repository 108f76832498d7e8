// fusejit's launcher below Python, shared by its two extension modules (launcher.cpp: the forward kernel and the
// backward program, one call each from Python's autograd Function; launcher_autograd.cpp: the same under a C++
// autograd Function). The kernels are launched through fj_kernel_launch, whose address Python hands over once.
#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fusejit_launcher {

using LaunchFn = int (*)(void* kernel, const uint64_t* args, size_t num_args, void* stream);
inline LaunchFn g_launch = nullptr;

using Shape = std::vector<int64_t>;
using Result = std::tuple<int64_t, std::vector<at::Tensor>>;  // fj_status, the tensors (none after an error)

inline at::ScalarType scalar_type(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  if (name == "float64") return at::kDouble;
  if (name == "int32") return at::kInt;
  if (name == "int64") return at::kLong;
  if (name == "uint8") return at::kByte;
  if (name == "bool") return at::kBool;
  throw std::invalid_argument("fusejit launcher: unknown dtype '" + name + "'");
}

inline void set_launch(uint64_t address) { g_launch = reinterpret_cast<LaunchFn>(address); }

// One kernel: its fj_kernel handle and the outputs it writes, allocated per call on its inputs' device.
struct Kernel {
  void* handle = nullptr;
  std::vector<Shape> shapes;
  std::vector<at::ScalarType> dtypes;

  Kernel(uint64_t h, std::vector<Shape> out_shapes, const std::vector<std::string>& out_dtypes)
      : handle(reinterpret_cast<void*>(h)), shapes(std::move(out_shapes)) {
    if (shapes.size() != out_dtypes.size()) throw std::invalid_argument("fusejit launcher: shapes and dtypes differ in number");
    for (const std::string& d : out_dtypes) dtypes.push_back(scalar_type(d));
  }

  // Launches on `inputs`; `outputs` gets the new outputs. The fj_status.
  int64_t run(const std::vector<const at::Tensor*>& inputs, const at::TensorOptions& where, int64_t stream,
              std::vector<at::Tensor>& outputs) const {
    if (!g_launch) throw std::runtime_error("fusejit launcher: set_launch was not called");
    std::vector<uint64_t> args;
    args.reserve(inputs.size() + shapes.size());
    for (const at::Tensor* t : inputs) args.push_back(reinterpret_cast<uint64_t>(t->data_ptr()));
    outputs.clear();
    for (size_t i = 0; i < shapes.size(); ++i) {
      outputs.push_back(at::empty(shapes[i], where.dtype(dtypes[i])));
      args.push_back(reinterpret_cast<uint64_t>(outputs.back().data_ptr()));
    }
    return g_launch(handle, args.data(), args.size(), reinterpret_cast<void*>(stream));
  }
};

// The forward kernel: inputs in, every output back.
class Forward {
 public:
  Forward(uint64_t handle, std::vector<Shape> shapes, const std::vector<std::string>& dtypes)
      : kernel_(handle, std::move(shapes), dtypes) {}

  size_t num_outputs() const { return kernel_.shapes.size(); }

  Result run(const std::vector<at::Tensor>& inputs, int64_t stream) const {
    if (inputs.empty()) throw std::invalid_argument("fusejit launcher: a forward without inputs");
    std::vector<const at::Tensor*> in;
    in.reserve(inputs.size());
    for (const at::Tensor& t : inputs) in.push_back(&t);
    std::vector<at::Tensor> outs;
    const int64_t status = kernel_.run(in, inputs[0].options(), stream, outs);
    if (status != 0) outs.clear();
    return {status, std::move(outs)};
  }

 private:
  Kernel kernel_;
};

// A backward program (fusejit.autograd._Program): buffers as slots, filled by the forward's inputs (slots 0..n-1),
// its saved outputs and the output gradients, then by each stage's outputs; each input's gradient read at the end.
class Program {
 public:
  using StageSpec = std::tuple<uint64_t, std::vector<int64_t>, std::vector<int64_t>, std::vector<Shape>,
                               std::vector<std::string>>;      // handle, input slots, output slots, shapes, dtypes
  using GradSpec = std::tuple<int64_t, Shape, std::string>;    // an output gradient's slot, shape, dtype

  Program(int64_t slots, std::vector<int64_t> saved_slots, std::vector<GradSpec> grads, std::vector<StageSpec> stages,
          std::vector<int64_t> input_grad_slots)
      : slots_(slots), saved_slots_(std::move(saved_slots)), input_grad_slots_(std::move(input_grad_slots)) {
    for (const auto& [slot, shape, dtype] : grads) grads_.push_back({slot, shape, scalar_type(dtype)});
    for (const auto& [handle, ins, outs, shapes, dtypes] : stages) {
      if (outs.size() != shapes.size()) throw std::invalid_argument("fusejit launcher: a stage's outputs and shapes differ");
      stages_.push_back({Kernel(handle, shapes, dtypes), ins, outs});
    }
    for (int64_t s : all_slots())
      if (s < -1 || s >= slots_) throw std::invalid_argument("fusejit launcher: slot " + std::to_string(s) + " out of range");
  }

  const std::vector<int64_t>& saved_slots() const { return saved_slots_; }  // a forward output's slot, -1: unread
  size_t num_output_grads() const { return grads_.size(); }

  // inputs: the forward's inputs; saved: its outputs (None where no stage reads one); grads: the output
  // gradients (None: zeros). Each input's gradient (zeros where no buffer holds one).
  Result run(const std::vector<at::Tensor>& inputs, const std::vector<std::optional<at::Tensor>>& saved,
             const std::vector<std::optional<at::Tensor>>& grads, int64_t stream) const {
    if (inputs.size() != input_grad_slots_.size() || saved.size() != saved_slots_.size() || grads.size() != grads_.size())
      throw std::invalid_argument("fusejit launcher: the backward's arguments do not match its program");
    std::vector<at::Tensor> env(static_cast<size_t>(slots_));
    for (size_t i = 0; i < inputs.size(); ++i) env[i] = inputs[i];
    for (size_t j = 0; j < saved.size(); ++j)
      if (saved[j] && saved_slots_[j] >= 0) env[static_cast<size_t>(saved_slots_[j])] = *saved[j];
    const at::TensorOptions where = inputs[0].options();
    for (size_t k = 0; k < grads.size(); ++k) {
      const GradIn& g = grads_[k];
      at::Tensor& slot = env[static_cast<size_t>(g.slot)];
      if (!grads[k] || !grads[k]->defined()) slot = at::zeros(g.shape, where.dtype(g.dtype));
      else if (grads[k]->scalar_type() != g.dtype || !grads[k]->is_contiguous()) slot = grads[k]->to(g.dtype).contiguous();
      else slot = *grads[k];
    }
    std::vector<const at::Tensor*> in;
    std::vector<at::Tensor> outs;
    for (const Stage& st : stages_) {
      in.clear();
      for (int64_t s : st.in) {
        const at::Tensor& t = env[static_cast<size_t>(s)];
        if (!t.defined()) throw std::runtime_error("fusejit launcher: slot " + std::to_string(s) + " is empty");
        in.push_back(&t);
      }
      if (const int64_t status = st.kernel.run(in, where, stream, outs); status != 0) return {status, {}};
      for (size_t i = 0; i < outs.size(); ++i) env[static_cast<size_t>(st.out[i])] = std::move(outs[i]);
    }
    std::vector<at::Tensor> result;
    result.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t s = input_grad_slots_[i];
      if (s < 0) {
        result.push_back(at::zeros_like(inputs[i]));
        continue;
      }
      at::Tensor g = env[static_cast<size_t>(s)];
      if (g.sizes() != inputs[i].sizes()) g = g.reshape(inputs[i].sizes());
      if (g.scalar_type() != inputs[i].scalar_type()) g = g.to(inputs[i].scalar_type());
      result.push_back(std::move(g));
    }
    return {0, std::move(result)};
  }

 private:
  struct GradIn {
    int64_t slot;
    Shape shape;
    at::ScalarType dtype;
  };
  struct Stage {
    Kernel kernel;
    std::vector<int64_t> in, out;
  };

  std::vector<int64_t> all_slots() const {
    std::vector<int64_t> all(saved_slots_);
    all.insert(all.end(), input_grad_slots_.begin(), input_grad_slots_.end());
    for (const GradIn& g : grads_) all.push_back(g.slot);
    for (const Stage& st : stages_) {
      all.insert(all.end(), st.in.begin(), st.in.end());
      all.insert(all.end(), st.out.begin(), st.out.end());
    }
    return all;
  }

  int64_t slots_;
  std::vector<int64_t> saved_slots_, input_grad_slots_;
  std::vector<GradIn> grads_;
  std::vector<Stage> stages_;
};


}  // namespace fusejit_launcher
