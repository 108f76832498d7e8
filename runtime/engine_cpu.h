// runtime/engine_cpu.h — Engine's CPU backend (internal): prepared graph ->
// generate_cpu_program -> object file (disk cache, else LLVM O3) -> LLJIT.
// Without LLVM in the build every entry point returns an Error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "compiler/cpu_program.h"
#include "fusejit/error.h"
#include "fusejit/ir.h"
#include "runtime/disk_cache.h"

namespace fusejit {
namespace cpu { class CpuExecutable; }

// Whether Backend::Auto means Cuda: a CUDA device `device` answers.
bool cuda_device_present(int device);

// The in-memory (per Engine) key of a CPU kernel: graph, config, backend,
// host target and LLVM version.
std::string cpu_memory_key(const std::string& graph_key, const std::string& config);

// The disk cache key of a CPU object file. Parts: backend ("cpu"), graph,
// config, generator, ir (sha256 of the module's bitcode), launches (sha256 of the
// launch list and scratch sizes), llvm, triple, arch ("cpu <name>", so that
// `fusejit cache list` tells CPU entries apart), features.
CacheKey cpu_object_cache_key(const Graph& prepared, const std::string& config, const CpuProgram& program);

// Generates, compiles (or reads from `disk`: a hit is logged at info, as for
// CUBINs; an object the JIT refuses is removed and compiled afresh) and links.
// `counts` gets the disk hits and misses (an Engine's, for CacheStats).
struct CpuDiskCounts {
  std::atomic<uint64_t> hits{0}, misses{0};
};
Expected<std::shared_ptr<const cpu::CpuExecutable>> build_cpu_executable(const Graph& prepared,
                                                                        const std::string& config, DiskCache& disk,
                                                                        int num_inputs, int num_outputs,
                                                                        CpuDiskCounts& counts);

// Runs a CPU executable on host pointers (the CompiledKernel::launch of Backend::Cpu).
Status run_cpu_executable(const cpu::CpuExecutable& exe, const std::vector<unsigned long long>& inputs,
                          const std::vector<unsigned long long>& outputs);
const CpuProgram& cpu_executable_program(const cpu::CpuExecutable& exe);

}  // namespace fusejit
