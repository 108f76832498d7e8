// GoogleTest check of build_backward's gradients: every input's gradient from
// the program (run stage by stage on the fp64 reference) against central
// finite differences of L = sum_o <grad_o, y_o> (tests/autodiff_reference.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/autodiff_reference.h"

namespace fusejit::testing {

// Tolerances and how the numbers are drawn. The stages pass float32 buffers
// (Z, dZ) to each other, so a chain that amplifies rounding (divisions, kinks)
// moves a little from fp64 finite differences; a wrong derivative is off by O(1).
struct GradCheck {
  double rel_l2 = 1e-5;  // of each gradient against the numeric one
  double elem = 1e-4;    // worst element error over the numeric gradient's RMS
  double step = 1e-6;    // finite-difference step (relative); a cast to f32 rounds the forward: 1e-3 there
  bool every_input = false;  // every input must have a gradient (else: a zero numeric gradient may be left out)
  uint64_t input_seed = 7, grad_seed = 11;
};

inline void check_graph_gradients(const Graph& g, const BackwardOptions& opt = {}, const GradCheck& c = {}) {
  auto p = build_backward(g, opt);
  ASSERT_TRUE(static_cast<bool>(p)) << p.error().str();
  const auto inputs = make_random_inputs(g, c.input_seed);
  const auto out_grads = random_out_grads(g, c.grad_seed);
  auto grads = backward_on_reference(*p, inputs, out_grads);
  ASSERT_TRUE(static_cast<bool>(grads)) << grads.error().str() << "\n" << print_backward(*p);
  const auto ids = g.inputs();
  for (size_t j = 0; j < ids.size(); ++j) {
    const std::string& name = g.node(ids[j]).name;
    const bool skipped = std::find(opt.no_grad.begin(), opt.no_grad.end(), name) != opt.no_grad.end();
    auto it = grads->find(name);
    if (skipped) {
      EXPECT_EQ(it, grads->end()) << name << " was asked not to get a gradient";
      continue;
    }
    if (c.every_input) ASSERT_NE(it, grads->end()) << name << " has no gradient\n" << print_backward(*p);
    const std::vector<double> fd = finite_difference(g, inputs, j, out_grads, c.step);
    double ref2 = 0, err2 = 0, worst = 0;
    for (double v : fd) ref2 += v * v;
    const double rms = std::sqrt(ref2 / static_cast<double>(fd.size()));
    if (it == grads->end()) {  // a zero gradient is left out of the program
      EXPECT_EQ(rms, 0.0) << name << " has no gradient buffer but a non-zero numeric gradient";
      continue;
    }
    ASSERT_EQ(it->second.data.size(), fd.size()) << name;
    if (c.every_input) ASSERT_GT(ref2, 0) << name << ": a zero numeric gradient checks nothing";
    for (size_t i = 0; i < fd.size(); ++i) {
      const double e = it->second.data[i] - fd[i];
      err2 += e * e;
      worst = std::max(worst, std::fabs(e) / (rms + 1e-30));
    }
    std::string pairs;
    for (size_t i = 0; i < fd.size() && i < 8; ++i)
      pairs += " " + std::to_string(it->second.data[i]) + "/" + std::to_string(fd[i]);
    const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
    EXPECT_LT(rel, c.rel_l2) << name << ": relative L2 error " << rel << " (program/numeric:" << pairs << ")\n"
                             << print_backward(*p);
    EXPECT_LT(worst, c.elem) << name << ": worst element error / rms " << worst;
  }
}

}  // namespace fusejit::testing
