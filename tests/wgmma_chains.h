// Graphs and programs the wgmma codegen tests share (no GPU needed).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "compiler/codegen.h"
#include "fusejit/builder.h"

namespace fusejit::test_util {

// y = relu(x @ w.T + b), with an optional row reduction of y.
inline Graph linear_chain(Precision p, int64_t m, int64_t k, int64_t n, const std::string& tail = "",
                          DType operands = DType::F32) {
  GraphBuilder g(p, "linear_chain");
  auto x = g.input("x", {m, k}, operands);
  auto w = g.input("w", {n, k}, operands);
  auto b = g.input("b", {n}, operands);
  auto y = g.linear(x, w).add(b).relu();
  if (tail == "logsumexp") y = y.logsumexp({-1});
  if (tail == "sum") y = y.sum({-1}, true);
  g.output("y", y);
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.take();
}

// y = relu(a @ b + bias) with b [K, N]; a [batch, 1, M, K] when batch > 0.
inline Graph matmul_chain(Precision p, int64_t batch, int64_t m, int64_t k, int64_t n, const std::string& tail = "",
                          DType operands = DType::BF16) {
  GraphBuilder g(p, "matmul_chain");
  auto a = batch ? g.input("a", {batch, 1, m, k}, operands) : g.input("a", {m, k}, operands);
  auto b = g.input("b", {k, n}, operands);
  auto bias = g.input("bias", {n}, operands);
  auto y = g.matmul(a, b).add(bias).relu();
  if (tail == "sum") y = y.sum({-1}, true);
  if (tail == "mean") y = y.mean({-1});
  g.output("y", y);
  auto built = g.build();
  EXPECT_TRUE(built.ok()) << built.error().str();
  return built.take();
}

inline DType operand_type(Precision p) { return p == Precision::BF16 ? DType::BF16 : p == Precision::F16 ? DType::F16 : DType::F32; }

inline Program generate(const Graph& g, const std::string& arch = "sm_90a", const std::string& config = "") {
  auto p = generate_program(g, {arch, config});
  EXPECT_TRUE(p.ok()) << p.error().str();
  return p.ok() ? p.take() : Program{};
}

}  // namespace fusejit::test_util
