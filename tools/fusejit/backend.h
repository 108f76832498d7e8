// Backend choice and size reduction shared by `fusejit run` and `fusejit emit`.
#pragma once

#include <cstdint>
#include <string>

#include "fusejit/engine.h"
#include "fusejit/ir.h"
#include "runtime/kernel_check.h"

namespace fusejit::cli {

// --backend's value (cuda, cpu or auto) -> Backend; Auto stays Auto. Sets
// `error` on anything else.
Backend parse_backend_arg(const std::string& value, std::string& error);

// Auto -> Cpu when built with it and no GPU is present, else Cuda. Returns "" when the chosen
// backend can run here, else why not (for the message and exit status 3).
std::string resolve_backend(Backend& backend);

// --batch N: sets dim 0 of the anchor's x (and of matmul's B when batched,
// and of every other input of x's rank whose dim 0 equals x's: residuals) to
// n, then re-infers every type. Weights and biases keep their shapes.
Status set_batch(Graph& g, int64_t n);

// "model name" from /proc/cpuinfo, or "unknown CPU".
std::string cpu_model_name();

// `fusejit run --backend cpu`: host buffers, seeded inputs, NaN-poisoned
// outputs, fp64 check, steady_clock timing. Returns the exit status.
int run_on_cpu(const Graph& g, const CheckOptions& check, const std::string& config);

}  // namespace fusejit::cli
