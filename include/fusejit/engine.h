// fusejit/engine.h — compile a Graph into a launchable CUDA kernel.
//
//   fusejit::Engine engine;
//   auto kernel = engine.compile(graph);          // codegen -> NVRTC -> load
//   if (!kernel) { report(kernel.error()); ... }
//   Status s = (*kernel)->launch({x, w, b}, {y}, stream);
//
// compile() needs a CUDA device (it loads the module), unless
// CompileOptions::backend is Cpu (LLVM, host code, synchronous launches on
// host pointers; object files cached on disk like CUBINs); compile_cubin()
// and emit() are CUDA-only and need no device. CUBINs are cached on disk across processes (docs/cache.md:
// $FUSEJIT_CACHE_DIR, ...; FUSEJIT_CACHE_MAX_BYTES=0 turns it off). Compiled
// kernels are also cached in memory per Engine: the key is
// the graph's structural hash, the codegen config, the exact NVRTC options,
// the arch and the device, so compiling an equivalent graph again returns the
// same kernel without recompiling; concurrent compiles of one key run once.
// Every Engine and CompiledKernel method is thread-safe.
//
// Launch arguments are device pointers to contiguous tensors: the graph's
// inputs in declaration order, then its outputs in Graph::outputs order (see
// CompiledKernel::args()). The types below equal cuda.h's CUdeviceptr and
// CUstream, so callers holding those pass them directly. Program is declared
// in compiler/program.h, CubinResult in fusejit/cubin.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusejit/backward.h"
#include "fusejit/error.h"
#include "fusejit/ir.h"

struct CUstream_st;

namespace fusejit {

using DevicePtr = unsigned long long;  // CUdeviceptr
using StreamHandle = CUstream_st*;     // CUstream; nullptr = the default stream

struct Program;
struct CpuProgram;   // compiler/cpu_program.h
struct CubinResult;  // fusejit/cubin.h
class LoadedProgram;
namespace cpu { class CpuExecutable; }

// Runtime autotuning (include/fusejit/autotune.h): off; use the tuning
// database's winner for this graph and device when there is one; or tune now
// (and store the winner) before compiling.
enum class AutotuneMode { Off, UseDb, Force };

// Where a compiled kernel runs. Cuda: NVRTC -> CUBIN -> a CUDA device.
// Cpu: LLVM -> host object code (docs/cpu.md; needs a build with LLVM).
// Auto: Cuda when a CUDA device is present, else Cpu.
enum class Backend { Cuda, Cpu, Auto };
std::string_view backend_name(Backend);  // "cuda", "cpu", "auto"
std::optional<Backend> parse_backend(std::string_view);

struct CompileOptions {
  // compile() only; compile_cubin() and emit() are CUDA. Cuda by default: with
  // Auto, a default compile() on a machine without a GPU would silently run
  // on the CPU (the C API's default options included).
  Backend backend = Backend::Cuda;
  std::string arch = "auto";  // "auto": the device's arch (9.0 -> sm_90a), else e.g. "sm_80"
  std::string config;         // scheduler config for codegen; empty = heuristics
  bool line_info = true;      // -lineinfo, for profilers
  int device = 0;             // CUDA device ordinal (compile() only)
  AutotuneMode autotune = AutotuneMode::Off;  // compile() only; ignored when `config` is set
  double tune_budget_s = 120;                 // Force: wall-clock budget of the tuning run
  // compile_cubin() only: compile afresh (no disk cache) with ptxas -v and fill
  // CubinResult::resources (registers, spills, shared memory per kernel).
  bool resource_usage = false;
};

struct KernelArg {
  std::string name;  // input or output name in the graph
  TensorType type;
  bool is_output = false;
};

struct CacheStats {
  uint64_t hits = 0;      // requests served by an existing (or in-flight) entry
  uint64_t misses = 0;    // requests that started a compile
  uint64_t compiles = 0;  // compiles run (== misses)
  uint64_t failures = 0;  // compiles that failed (not kept in the cache)
  size_t entries = 0;     // kernels held now
  uint64_t disk_hits = 0;    // CUBINs read from the disk cache (docs/cache.md)
  uint64_t disk_stores = 0;  // CUBINs written to it
  uint64_t disk_misses = 0;  // CUBIN lookups the disk cache missed
  uint64_t remote_hits = 0, remote_misses = 0, remote_stores = 0;  // the remote tier, if on
};

// A kernel loaded on one device, ready to launch.
class CompiledKernel {
 public:
  const std::string& name() const;  // the program's name, e.g. "fj_conv2d_relu"
  const std::vector<KernelArg>& args() const { return args_; }  // inputs, then outputs
  // CUDA: the generated program. CPU: name, plan_text and scratch only (no
  // source, no launches); the LLVM IR and host launches are in cpu_program().
  const Program& program() const;
  const CpuProgram* cpu_program() const;  // Backend::Cpu; nullptr for Cuda
  const std::vector<char>& cubin() const { return cubin_; }  // empty for Cpu
  const std::string& arch() const { return arch_; }  // "cpu" for the CPU backend
  Backend backend() const { return backend_; }        // Cuda or Cpu (never Auto)
  int device() const { return device_; }  // -1 for Cpu

  // Enqueues the program's launches on `stream`. Wrong pointer counts or null
  // pointers are Errors. Does not synchronize. On the CPU backend the
  // pointers are host addresses, `stream` is ignored and the call returns when
  // the kernel has run.
  Status launch(const std::vector<DevicePtr>& inputs, const std::vector<DevicePtr>& outputs,
                StreamHandle stream = nullptr) const;

 private:
  friend class Engine;
  CompiledKernel() = default;
  std::shared_ptr<const Program> program_;
  std::vector<char> cubin_;
  std::string arch_;
  int device_ = 0;
  std::vector<KernelArg> args_;
  std::shared_ptr<LoadedProgram> loaded_;
  Backend backend_ = Backend::Cuda;
  std::shared_ptr<const cpu::CpuExecutable> cpu_;  // Backend::Cpu
};

class Engine {
 public:
  Engine();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Prepares a copy of the graph (prepare_graph), generates, compiles and
  // loads it, or returns the cached kernel.
  Expected<std::shared_ptr<CompiledKernel>> compile(const Graph& graph,
                                                    const CompileOptions& opts = {});
  // The gradient program of `graph` (fusejit/backward.h: build_backward),
  // its forward and every stage compiled with `opts` (one backend, device,
  // arch; autotuning applies per stage).
  Expected<std::shared_ptr<BackwardKernel>> compile_backward(const Graph& graph, const BackwardOptions& backward = {},
                                                             const CompileOptions& opts = {});
  // Generated source -> CUBIN for `arch` (overrides opts.arch); no GPU needed
  // unless arch is "auto". Not cached in memory; uses the disk cache.
  Expected<CubinResult> compile_cubin(const Graph& graph, const std::string& arch,
                                      const CompileOptions& opts = {}) const;
  // Codegen only. "auto" means the device's arch, or sm_90a without a device.
  Expected<Program> emit(const Graph& graph, const CompileOptions& opts = {}) const;

  CacheStats cache_stats() const;
  void clear_cache();  // kernels already handed out stay valid

  // The arch "auto" stands for on `device`; an Error without a device.
  static Expected<std::string> device_arch(int device = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusejit
