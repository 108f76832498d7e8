// compiler/cpu_program.h — what the LLVM codegen hands to the CPU runtime: one
// LLVM module (bitcode) and the ordered calls that run it. The CPU twin of
// program.h; no LLVM types here (the library builds without LLVM).
//
// Function ABI: every generated entry point is
//   extern "C" void name(void** args, int64_t begin, int64_t end)
// where args[i] is the host pointer of CpuLaunch::args[i] (contiguous tensors
// of their declared dtype; scratch buffers are f32) and [begin, end) a range of
// the launch's independent work items (tiles, rows, chunks of elements). The
// runtime splits [0, work_items) over its threads; launches run in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/program.h"
#include "fusejit/error.h"
#include "fusejit/ir.h"

namespace fusejit {

struct CpuLaunch {
  std::string function;        // symbol in CpuProgram::llvm_module
  int64_t work_items = 1;      // the function covers [0, work_items)
  int64_t grain = 1;           // fewest work items worth a task of their own
  std::vector<BufferRef> args; // args[i] of the call, in order
  std::string what;            // one line for plans and logs
};

struct CpuProgram {
  std::string name;                  // e.g. "fj_cpu_linear_relu"
  // The module as LLVM bitcode, or as IR text with CpuCodegenOptions::ir_text
  // (parseIR reads either). The cache key hashes it.
  std::string llvm_module;
  std::string target_triple, cpu, features;  // what it was generated for
  std::vector<CpuLaunch> launches;   // run in this order
  std::vector<ScratchSpec> scratch;  // intermediates (f32), allocated by the runtime
  std::string plan_text;             // the fusion plan, as for CUDA, plus CPU notes
};

// The machine the code is generated for. Empty fields: the host's
// (llvm::sys::getProcessTriple, getHostCPUName, getHostCPUFeatures).
struct CpuTarget {
  std::string triple, cpu, features;
};

// The host's target: triple, CPU name and "+name,-name" features sorted by
// name (a stable string: cache keys hash it). Builds with the CPU backend only.
CpuTarget host_cpu_target();

struct CpuCodegenOptions {
  CpuTarget target;
  std::string config;  // scheduler config; CPU keys: cpu_tile=MRxNR (see docs/cpu.md)
  // The module as readable IR text (fusejit emit) instead of bitcode. Printing
  // text is ~5x slower than writing bitcode: a disk-cache hit regenerates the
  // module to hash it, so the engine asks for bitcode.
  bool ir_text = false;
};

// Whether this build has the LLVM CPU backend (FUSEJIT_ENABLE_LLVM).
bool cpu_backend_available();

// Plans a prepared graph (the same passes as CUDA codegen, CPU heuristics) and
// lowers it to an LLVM module. An Error without LLVM, or on bad config.
Expected<CpuProgram> generate_cpu_program(const Graph& g, const CpuCodegenOptions& opts);

}  // namespace fusejit
