// tests/simplify_util.h — helpers of the simplification tests (simplify_test.cpp,
// simplify_rows_test.cpp): specs, the simplified graph, op counts, plans, and
// the fp64 reference on inputs with NaN, +inf and -inf to compare the graph as
// written with the simplified one.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/simplify.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "tests/program_util.h"

namespace fusejit::simplify_test {

inline Graph spec(const std::string& text) {
  auto g = parse_spec(text, "simplify_test.yaml");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  return g.ok() ? g.take() : Graph{};
}

inline Graph simplified(const Graph& g, std::vector<std::string>* notes = nullptr) {
  auto s = simplify_graph(g, notes);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().str());
  if (!s.ok()) return g;
  Status v = verify_graph(*s);
  EXPECT_TRUE(v.ok()) << v.error().str() << "\n" << print_graph(*s);
  return s.take();
}

inline int count(const Graph& g, OpKind op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

inline Program program(const Graph& g, const std::string& config = "") {
  auto p = generate_program(g, {"sm_90a", config});
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().str());
  return p.ok() ? p.take() : Program{};
}

inline int64_t scratch_bytes(const Program& p) {
  int64_t b = 0;
  for (const ScratchSpec& s : testing::chain_scratch(p)) b += s.bytes;
  return b;
}

// Random inputs with NaN, +inf and -inf sprinkled into the inputs the anchor
// does not read (every `every`-th element, rotating through the three): in
// the anchor's operands they would turn whole rows into NaN.
inline std::vector<HostTensor> special_inputs(const Graph& g, uint64_t seed, int every = 7) {
  std::vector<HostTensor> in = make_random_inputs(g, seed);
  const std::vector<ValueId> ids = g.inputs();
  const std::vector<ValueId> anchor_operands = g.anchor() ? g.node(*g.anchor()).operands : std::vector<ValueId>{};
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (size_t k = 0; k < in.size(); ++k) {
    if (std::count(anchor_operands.begin(), anchor_operands.end(), ids[k])) continue;
    for (size_t i = (k * 3) % every; i < in[k].data.size(); i += every)
      in[k].data[i] = specials[(i / every + k) % 3];
  }
  return in;
}

// Mismatches between two evaluations: NaN / ±inf positions must agree
// bitwise (same class, same sign of inf); finite values must be equal, or
// within `rel` where a fold reassociates.
inline std::vector<std::string> mismatches(const std::vector<std::vector<double>>& a,
                                    const std::vector<std::vector<double>>& b, double rel = 0) {
  std::vector<std::string> out;
  if (a.size() != b.size()) return {"output count differs"};
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o].size() != b[o].size()) {
      out.push_back("output " + std::to_string(o) + " size differs");
      continue;
    }
    for (size_t i = 0; i < a[o].size() && out.size() < 5; ++i) {
      const double x = a[o][i], y = b[o][i];
      bool ok;
      if (std::isnan(x) || std::isnan(y)) ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(x) || std::isinf(y)) ok = x == y;
      else ok = rel == 0 ? x == y : std::fabs(x - y) <= rel * (std::fabs(x) + std::fabs(y)) + 1e-300;
      if (!ok)
        out.push_back("output " + std::to_string(o) + "[" + std::to_string(i) + "]: " + std::to_string(x) + " vs " +
                      std::to_string(y));
    }
  }
  return out;
}

inline std::vector<std::vector<double>> eval(const Graph& g, const std::vector<HostTensor>& in) {
  auto r = evaluate_reference(g, in);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? r.take() : std::vector<std::vector<double>>{};
}

// The ABI holds and the simplified graph means the same on special inputs.
inline void expect_same_meaning(const Graph& written, const Graph& simple, double rel = 0) {
  ASSERT_EQ(written.inputs().size(), simple.inputs().size());
  for (size_t k = 0; k < written.inputs().size(); ++k) {
    EXPECT_EQ(written.node(written.inputs()[k]).name, simple.node(simple.inputs()[k]).name);
    EXPECT_EQ(written.node(written.inputs()[k]).type, simple.node(simple.inputs()[k]).type);
  }
  ASSERT_EQ(written.outputs.size(), simple.outputs.size());
  for (size_t k = 0; k < written.outputs.size(); ++k) {
    EXPECT_EQ(written.outputs[k].name, simple.outputs[k].name);
    EXPECT_EQ(written.node(written.outputs[k].value).type, simple.node(simple.outputs[k].value).type);
  }
  for (uint64_t seed : {1, 2}) {
    const auto in = special_inputs(written, seed);
    for (const std::string& m : mismatches(eval(written, in), eval(simple, in), rel))
      ADD_FAILURE() << m << "\nwritten:\n" << print_graph(written) << "simplified:\n" << print_graph(simple);
  }
}

// linear to [64, 1], plus e (NaN / inf carrier), then `tail` on t.
inline std::string size1_spec(const std::string& tail, const std::string& outputs) {
  return "name: s1\nprecision: fp32\ninputs:\n"
         "  - {name: x, shape: [64, 32]}\n  - {name: w, shape: [1, 32]}\n  - {name: e, shape: [64, 1]}\n"
         "ops:\n  - {name: h, op: linear, args: [x, w]}\n  - {name: t, op: add, args: [h, e]}\n" +
         tail + "outputs: [" + outputs + "]\n";
}

}  // namespace fusejit::simplify_test
