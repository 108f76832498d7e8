// Runs a BackwardProgram on the fp64 reference (stage by stage, buffers by
// name) and computes the same gradients by central finite differences of
// L = sum_o <grad_o, y_o>, also in fp64. Shared by the autodiff tests.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "fusejit/backward.h"
#include "fusejit/reference.h"

namespace fusejit::testing {

using Buffers = std::map<std::string, HostTensor>;

// Evaluates `g` on the buffers named by its inputs (viewed with the graph's
// shapes) and stores its outputs under their names: as float32, or rounded to
// the buffer's dtype (`round`: as a device stores them, for comparing with one).
inline Status run_reference_stage(const Graph& g, Buffers& buffers, bool round = false) {
  std::vector<HostTensor> in;
  for (ValueId i : g.inputs()) {
    auto it = buffers.find(g.node(i).name);
    if (it == buffers.end()) return Error("no buffer '" + g.node(i).name + "'");
    HostTensor t = it->second;
    if (t.type.numel() != g.node(i).type.numel()) return Error("buffer '" + g.node(i).name + "' has another size");
    t.type = g.node(i).type;  // a view
    in.push_back(std::move(t));
  }
  auto out = evaluate_reference(g, in);
  if (!out) return out.error();
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    HostTensor t{g.node(g.outputs[k].value).type, {}};
    for (double v : (*out)[k])
      t.data.push_back(round ? round_to_dtype(static_cast<float>(v), t.type.dtype) : static_cast<float>(v));
    buffers[g.outputs[k].name] = std::move(t);
  }
  return {};
}

// The program's input gradients (by forward input name) for `inputs` and the
// output gradients `out_grads` (in Graph::outputs order of the original forward).
// Upstream gradients for every output of g: standard normal values, seeded.
inline std::vector<HostTensor> random_out_grads(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<HostTensor> out;
  for (const Output& o : g.outputs) {
    HostTensor t{g.node(o.value).type, {}};
    for (int64_t i = 0; i < t.type.numel(); ++i) t.data.push_back(normal(rng));
    out.push_back(std::move(t));
  }
  return out;
}

inline Expected<std::map<std::string, HostTensor>> backward_on_reference(const BackwardProgram& p,
                                                                          const std::vector<HostTensor>& inputs,
                                                                          const std::vector<HostTensor>& out_grads,
                                                                          bool round = false) {
  Buffers b;
  const auto ids = p.forward.inputs();
  for (size_t j = 0; j < ids.size(); ++j) b[p.forward.node(ids[j]).name] = inputs[j];
  if (Status s = run_reference_stage(p.forward, b, round); !s) return s.error();
  size_t k = 0;
  for (const auto& buf : p.buffers)
    if (buf.role == BufferRole::OutputGrad) b[buf.name] = out_grads.at(k++);
  for (const auto& st : p.stages)
    if (Status s = run_reference_stage(st.graph, b, round); !s) return s.error();
  std::map<std::string, HostTensor> grads;
  for (const auto& [input, buffer] : p.input_grads) grads[input] = b.at(buffer);
  return grads;
}

// L(inputs) = sum over the forward's outputs of <grad_o, y_o>, in fp64.
inline double loss(const Graph& fwd, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& out_grads) {
  auto out = evaluate_reference(fwd, inputs);
  if (!out) return std::numeric_limits<double>::quiet_NaN();
  double l = 0;
  for (size_t o = 0; o < fwd.outputs.size(); ++o)
    for (size_t i = 0; i < (*out)[o].size(); ++i) l += (*out)[o][i] * out_grads[o].data[i];
  return l;
}

// dL/d(input j) by central differences; the step is the float distance
// actually taken, so the quotient has no rounding of the inputs in it.
inline std::vector<double> finite_difference(const Graph& fwd, std::vector<HostTensor> inputs, size_t j,
                                             const std::vector<HostTensor>& out_grads, double h = 1e-6) {
  std::vector<double> d(inputs[j].data.size());
  for (size_t i = 0; i < d.size(); ++i) {
    const float x0 = inputs[j].data[i];
    const float up = static_cast<float>(x0 + h * (1 + std::fabs(x0))), down = static_cast<float>(x0 - h * (1 + std::fabs(x0)));
    inputs[j].data[i] = up;
    const double lu = loss(fwd, inputs, out_grads);
    inputs[j].data[i] = down;
    const double ld = loss(fwd, inputs, out_grads);
    inputs[j].data[i] = x0;
    d[i] = (lu - ld) / (static_cast<double>(up) - static_cast<double>(down));
  }
  return d;
}

}  // namespace fusejit::testing
