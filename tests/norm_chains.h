// Chains with per-sample norms (group / instance / layer norm) and inference
// batch_norm after a linear or conv2d anchor, shared by the codegen, CPU and
// GPU norm tests: ragged sizes, affine or not, rows shorter and longer than a
// block, pooling and reductions after the norm, every precision mode.
#pragma once

#include <string>
#include <vector>

#include "fusejit/builder.h"

namespace fusejit::testing_norm {

struct NormChain {
  std::string label;
  Expected<Graph> graph;
};

inline Expected<Graph> conv_chain(Precision p, const std::string& kind) {
  GraphBuilder g(p, "norm_" + kind);
  const DType dt = anchor_dtype(p);
  const bool big = kind == "group_norm_wide";
  const int64_t cin = big ? 16 : 6, cout = big ? 32 : 12, h = big ? 24 : 9, w = big ? 24 : 11;
  auto x = g.input("x", {2, cin, h, w}, dt);
  auto wt = g.input("w", {cout, cin, 3, 3}, dt);
  auto b = g.input("b", {cout}, dt);
  Conv2dOptions o;
  o.padding = {1, 1};
  auto c = g.conv2d(x, wt, b, o);
  Value y;
  if (kind == "group_norm_swish") {
    y = c.group_norm(3, g.input("gamma", {cout}, DType::F32, InitKind::Normal),
                     g.input("beta", {cout}, DType::F32, InitKind::Normal)).silu();
  } else if (kind == "group_norm_wide") {
    y = c.group_norm(2, g.input("gamma", {cout}, DType::F32, InitKind::Normal)).relu();
  } else if (kind == "group_norm_gap") {
    y = c.group_norm(1, g.input("gamma", {cout}, DType::F32, InitKind::Normal)).global_avg_pool();
  } else if (kind == "instance_norm_maxpool") {
    Pool2dOptions po;
    y = c.instance_norm().max_pool2d(po);
  } else if (kind == "group_norm_swish_avgpool") {  // pooled by the norm kernel: overlapping, padded, ceil windows
    Pool2dOptions po;
    po.kernel = {3, 3};
    po.stride = {2, 2};
    po.padding = {1, 1};
    po.ceil_mode = true;
    po.count_include_pad = false;
    y = c.group_norm(3, g.input("gamma", {cout}, DType::F32, InitKind::Normal),
                     g.input("beta", {cout}, DType::F32, InitKind::Normal)).silu().avg_pool2d(po) * 2.0;
  } else if (kind == "layer_norm_maxpool") {  // weight per element (C, H, W): normalized at each window element
    Pool2dOptions po;
    po.kernel = {3, 2};
    po.stride = {2, 1};
    po.padding = {1, 0};
    y = c.layer_norm({cout, h, w}, g.input("ln_w", {cout, h, w}, DType::F32, InitKind::Normal)).max_pool2d(po).tanh();
  } else if (kind == "instance_norm_affine_sum") {
    y = c.instance_norm(g.input("gamma", {cout}, DType::F32, InitKind::Normal),
                        g.input("beta", {cout}, DType::F32, InitKind::Normal), 1e-3)
            .sum({1}, true);
  } else {  // batch_norm_relu: every parameter, of the anchor's dtype
    y = c.batch_norm(g.input("rmean", {cout}, dt, InitKind::Normal), g.input("rvar", {cout}, dt, InitKind::Uniform01),
                     g.input("gamma", {cout}, dt, InitKind::Normal), g.input("beta", {cout}, dt, InitKind::Normal))
            .relu();
  }
  g.output("y", y);
  return g.build();
}

inline Expected<Graph> linear_chain(Precision p, const std::string& kind) {
  GraphBuilder g(p, "norm_" + kind);
  const DType dt = anchor_dtype(p);
  const bool three_d = kind == "layer_norm_2d_sum";
  const int64_t k = 40, n = three_d ? 24 : 100;
  auto x = three_d ? g.input("x", {3, 5, k}, dt) : g.input("x", {37, k}, dt);
  auto h = g.linear(x, g.input("w", {n, k}, dt), g.input("b", {n}, dt));
  Value y;
  if (kind == "layer_norm_relu") {
    y = h.layer_norm({n}, g.input("ln_w", {n}, DType::F32, InitKind::Normal),
                     g.input("ln_b", {n}, DType::F32, InitKind::Normal)).relu();
  } else if (kind == "layer_norm_2d_sum") {
    y = h.layer_norm({5, n}, g.input("ln_w", {5, n}, DType::F32, InitKind::Normal)).sum({-1});
  } else if (kind == "layer_norm_gelu_residual") {
    auto ln = h.layer_norm({n});
    y = ln.gelu() + h;
  } else {  // batch_norm_tanh: running statistics only
    y = h.batch_norm(g.input("rmean", {n}, dt, InitKind::Normal), g.input("rvar", {n}, dt, InitKind::Uniform01)).tanh();
  }
  g.output("y", y);
  return g.build();
}

inline std::vector<NormChain> norm_chains(const std::vector<Precision>& precisions) {
  std::vector<NormChain> out;
  for (Precision p : precisions) {
    const std::string pre = std::string(precision_name(p)) + " ";
    for (const char* kind : {"group_norm_swish", "group_norm_wide", "group_norm_gap", "instance_norm_maxpool",
                             "group_norm_swish_avgpool", "layer_norm_maxpool", "instance_norm_affine_sum",
                             "batch_norm_relu"})
      out.push_back({pre + "conv " + kind, conv_chain(p, kind)});
    for (const char* kind : {"layer_norm_relu", "layer_norm_2d_sum", "layer_norm_gelu_residual", "batch_norm_tanh"})
      out.push_back({pre + "linear " + kind, linear_chain(p, kind)});
  }
  return out;
}

}  // namespace fusejit::testing_norm
