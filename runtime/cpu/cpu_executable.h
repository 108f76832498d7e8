// runtime/cpu/cpu_executable.h — the CPU backend's runtime: a CpuProgram's
// LLVM IR optimized (O3) and compiled to host object code, linked in an ORC
// LLJIT, and run over a small thread pool (FUSEJIT_NUM_THREADS). Internal;
// the public way in is Engine with CompileOptions::backend = Backend::Cpu.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/cpu_program.h"
#include "fusejit/error.h"

namespace fusejit::cpu {

// The host as LLVM names it: process triple, CPU name (e.g. "skylake-avx512"),
// and the enabled features ("+avx512f,+fma,..."), plus LLVM's version.
CpuTarget host_target();  // = host_cpu_target() (compiler/cpu_program.h)
std::string llvm_version();  // "14.0.6"

// The program's module (bitcode or IR text) -> optimized (O3 for `target`) -> relocatable object file bytes.
Expected<std::vector<char>> compile_object(const CpuProgram& program);

class CpuExecutable {
 public:
  ~CpuExecutable();
  // Links `object` (from compile_object or the disk cache) into a fresh JIT
  // and resolves every launch's function. num_inputs / num_outputs (the
  // graph's; -1: not checked) are what run() must be given, and bound the
  // launches' buffer indices.
  static Expected<std::shared_ptr<CpuExecutable>> load(std::shared_ptr<const CpuProgram> program,
                                                       std::vector<char> object, int num_inputs = -1,
                                                       int num_outputs = -1);

  // Runs the launches in order on the thread pool and returns when all are
  // done. Host pointers to the inputs then the outputs (contiguous, declared
  // dtypes); scratch is allocated per call. Errors on wrong counts or nulls.
  Status run(const std::vector<void*>& inputs, const std::vector<void*>& outputs) const;

  const CpuProgram& program() const { return *program_; }
  const std::vector<char>& object() const { return object_; }

 private:
  CpuExecutable() = default;
  struct Jit;
  std::unique_ptr<Jit> jit_;
  std::shared_ptr<const CpuProgram> program_;
  std::vector<char> object_;
  using EntryPoint = void (*)(void**, int64_t, int64_t);
  std::vector<EntryPoint> entries_;  // one per launch
  int num_inputs_ = -1, num_outputs_ = -1;
};

// Runs fn(begin, end) over [0, items) in chunks of at least `grain` on the
// process-wide pool (FUSEJIT_NUM_THREADS threads, default: the hardware's),
// the caller taking part; returns when every chunk is done.
void parallel_for(int64_t items, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
int num_threads();

}  // namespace fusejit::cpu
