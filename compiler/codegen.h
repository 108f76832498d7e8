// compiler/codegen.h — graph -> Program (CUDA source + launches).
#pragma once

#include <string>

#include "compiler/program.h"
#include "fusejit/error.h"
#include "fusejit/ir.h"

namespace fusejit {

struct CodegenOptions {
  std::string arch = "sm_90a";  // target; codegen may pick per-arch paths
  // Scheduler heuristics live in plain per-scheduler structs (see compiler/);
  // empty means "use the heuristic defaults". The autotuner fills this later.
  std::string config;
};

// Plans fusion groups for a prepared graph and emits the CUDA program.
Expected<Program> generate_program(const Graph& g, const CodegenOptions& opts);

}  // namespace fusejit
