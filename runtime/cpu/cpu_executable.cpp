// runtime/cpu/cpu_executable.cpp — an object file linked in its own ORC LLJIT
// (symbols the code needs from outside, libm's expf/tanhf/erff..., memset,
// resolve in this process), and its launches run on the thread pool.
#include <cstdlib>
#include <new>
#include <string>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include "runtime/cpu/cpu_executable.h"
#include "runtime/cpu/cpu_jit_internal.h"
#include "runtime/log.h"

namespace fusejit::cpu {

struct CpuExecutable::Jit {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

CpuExecutable::~CpuExecutable() = default;

namespace {

std::string message(llvm::Error e) { return llvm::toString(std::move(e)); }

const char* kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::Input: return "input";
    case BufferKind::Output: return "output";
    case BufferKind::Scratch: return "scratch";
  }
  return "?";
}

// 64-byte aligned scratch, freed at scope exit.
struct AlignedFree {
  void operator()(void* p) const { ::operator delete(p, std::align_val_t(64)); }
};
using Scratch = std::unique_ptr<void, AlignedFree>;

}  // namespace

Expected<std::shared_ptr<CpuExecutable>> CpuExecutable::load(std::shared_ptr<const CpuProgram> program,
                                                             std::vector<char> object, int num_inputs,
                                                             int num_outputs) {
  if (!program) return Error("cpu executable: no program");
  const std::string where = "cpu program '" + program->name + "': ";
  if (object.empty()) return Error(where + "empty object file");
  // Every buffer reference must name something run() can supply.
  for (const CpuLaunch& l : program->launches) {
    for (const BufferRef& r : l.args) {
      int limit = r.kind == BufferKind::Input    ? num_inputs
                  : r.kind == BufferKind::Output ? num_outputs
                                                 : static_cast<int>(program->scratch.size());
      if (r.index < 0 || (limit >= 0 && r.index >= limit))
        return Error(where + "launch '" + l.function + "' uses " + kind_name(r.kind) + " " +
                     std::to_string(r.index) + " of " + std::to_string(limit));
    }
    if (l.work_items < 0) return Error(where + "launch '" + l.function + "' has negative work items");
  }
  long long start = log::now_ns();
  init_llvm_native();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return Error(where + "cannot create the LLVM JIT: " + message(jit.takeError()));
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process) return Error(where + "cannot search this process's symbols: " + message(process.takeError()));
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()),
                                                     program->name + ".o");
  if (llvm::Error e = (*jit)->addObjectFile(std::move(buffer)))
    return Error(where + "cannot add the object file: " + message(std::move(e)));

  std::shared_ptr<CpuExecutable> exe(new CpuExecutable());
  exe->jit_ = std::make_unique<Jit>();
  exe->jit_->jit = std::move(*jit);
  for (const CpuLaunch& l : program->launches) {
    auto symbol = exe->jit_->jit->lookup(l.function);  // links the object on first lookup
    if (!symbol) return Error(where + "cannot resolve '" + l.function + "': " + message(symbol.takeError()));
    exe->entries_.push_back(reinterpret_cast<EntryPoint>(static_cast<uintptr_t>(symbol->getAddress())));
  }
  exe->program_ = std::move(program);
  exe->object_ = std::move(object);
  exe->num_inputs_ = num_inputs;
  exe->num_outputs_ = num_outputs;
  log::debug("loaded " + exe->program_->name + " in the LLVM JIT: " + log::elapsed_ms(start));
  return exe;
}

Status CpuExecutable::run(const std::vector<void*>& inputs, const std::vector<void*>& outputs) const {
  const CpuProgram& p = *program_;
  auto count_error = [&](const char* what, size_t got, int want) {
    return Error("cpu program '" + p.name + "': expected " + std::to_string(want) + " " + what + " pointers, got " +
                 std::to_string(got));
  };
  if (num_inputs_ >= 0 && inputs.size() != static_cast<size_t>(num_inputs_))
    return count_error("input", inputs.size(), num_inputs_);
  if (num_outputs_ >= 0 && outputs.size() != static_cast<size_t>(num_outputs_))
    return count_error("output", outputs.size(), num_outputs_);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i]) return Error("cpu program '" + p.name + "': input " + std::to_string(i) + " is null");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i]) return Error("cpu program '" + p.name + "': output " + std::to_string(i) + " is null");

  std::vector<Scratch> scratch;
  scratch.reserve(p.scratch.size());
  for (const ScratchSpec& s : p.scratch) {
    size_t bytes = static_cast<size_t>(std::max<int64_t>(s.bytes, 64));
    void* mem = ::operator new(bytes, std::align_val_t(64), std::nothrow);
    if (!mem)
      return Error("cpu program '" + p.name + "': cannot allocate " + std::to_string(bytes) + " bytes of scratch");
    scratch.emplace_back(mem);
  }

  std::vector<void*> args;
  for (size_t li = 0; li < p.launches.size(); ++li) {
    const CpuLaunch& l = p.launches[li];
    args.clear();
    for (const BufferRef& r : l.args) {
      const std::vector<void*>* from = r.kind == BufferKind::Input ? &inputs : r.kind == BufferKind::Output ? &outputs : nullptr;
      size_t have = from ? from->size() : scratch.size();
      if (r.index < 0 || static_cast<size_t>(r.index) >= have)
        return Error("cpu program '" + p.name + "': launch '" + l.function + "' needs " + kind_name(r.kind) + " " +
                     std::to_string(r.index) + ", only " + std::to_string(have) + " given");
      args.push_back(from ? (*from)[r.index] : scratch[r.index].get());
    }
    EntryPoint entry = entries_[li];
    void** argv = args.data();
    parallel_for(l.work_items, l.grain, [entry, argv](int64_t b, int64_t e) { entry(argv, b, e); });
  }
  return {};
}

}  // namespace fusejit::cpu
