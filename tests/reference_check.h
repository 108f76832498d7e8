// tests/reference_check.h — GPU tests: compile a graph and compare every
// output with the fp64 reference (runtime/kernel_check.h: fresh seeded
// inputs, outputs poisoned first, the precision's tolerance).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/kernel_check.h"

namespace fusejit::test_util {

inline void expect_matches_reference(Engine& engine, const Graph& g, const std::string& config,
                                     const std::string& label) {
  CompileOptions opts;
  opts.config = config;
  auto kernel = engine.compile(g, opts);
  ASSERT_TRUE(kernel) << label << " (config '" << config << "') does not compile: " << kernel.error().str();
  CheckOptions check;
  check.time = false;
  auto r = check_kernel(**kernel, g, check);
  EXPECT_TRUE(r && r->pass) << label << " (config '" << config << "'):\n"
                            << (r ? r->summary() : r.error().str()) << print_graph(g);
}

}  // namespace fusejit::test_util
