// runtime/engine_cpu.cpp — Engine's CPU backend (runtime/engine_cpu.h).
#include "runtime/engine_cpu.h"

#include "runtime/cuda_driver.h"
#include "runtime/kernel_cache.h"
#include "runtime/log.h"
#include "runtime/sha256.h"

#ifdef FUSEJIT_HAVE_LLVM
#include "runtime/cpu/cpu_executable.h"
#endif

namespace fusejit {

bool cuda_device_present(int device) { return use_device(device).ok(); }

#ifdef FUSEJIT_HAVE_LLVM

namespace {

std::string launches_digest(const CpuProgram& p) {
  Sha256 h;
  auto field = [&](const std::string& s) {
    h.update(std::to_string(s.size()) + ":");
    h.update(s);
  };
  field(std::to_string(p.launches.size()));
  for (const CpuLaunch& l : p.launches) {
    field(l.function);
    field(std::to_string(l.work_items) + "," + std::to_string(l.grain));
    for (const BufferRef& r : l.args)
      field(std::to_string(static_cast<int>(r.kind)) + "/" + std::to_string(r.index));
  }
  for (const ScratchSpec& s : p.scratch) field("scratch " + std::to_string(s.bytes));
  return h.finish_hex();
}

}  // namespace

std::string cpu_memory_key(const std::string& graph_key, const std::string& config) {
  CpuTarget host = cpu::host_target();
  return kernel_cache_key(graph_key, config,
                          {"backend=cpu", "llvm=" + cpu::llvm_version(), "features=" + host.features},
                          "cpu:" + host.triple + ":" + host.cpu, -1);
}

CacheKey cpu_object_cache_key(const Graph& prepared, const std::string& config, const CpuProgram& program) {
  CacheKey key;
  key.add("backend", "cpu");
  key.add("graph", hash_hex(structural_hash(prepared)));
  key.add("config", config);
  key.add("generator", generator_version());
  key.add("ir", sha256_hex(program.llvm_module));
  key.add("launches", launches_digest(program));
  key.add("llvm", cpu::llvm_version());
  key.add("triple", program.target_triple);
  key.add("arch", "cpu " + program.cpu);
  key.add("features", program.features);
  return key;
}

Expected<std::shared_ptr<const cpu::CpuExecutable>> build_cpu_executable(const Graph& prepared,
                                                                        const std::string& config, DiskCache& disk,
                                                                        int num_inputs, int num_outputs,
                                                                        CpuDiskCounts& counts) {
  long long start = log::now_ns();
  CpuCodegenOptions cg;
  cg.target = cpu::host_target();
  cg.config = config;
  auto generated = generate_cpu_program(prepared, cg);
  if (!generated) return generated.error();
  auto program = std::make_shared<const CpuProgram>(generated.take());
  if (log::enabled(log::Level::Info))
    log::info("codegen " + program->name + " for cpu: " + log::elapsed_ms(start));
  CacheKey key = cpu_object_cache_key(prepared, config, *program);

  if (auto hit = disk.load(key)) {
    ++counts.hits;
    log::info("cache hit: " + program->name + " (from the disk cache: " + disk.entry_path(key) + ")");
    auto exe = cpu::CpuExecutable::load(program, std::move(*hit), num_inputs, num_outputs);
    if (exe) return std::shared_ptr<const cpu::CpuExecutable>(exe.take());
    // A verified entry the JIT refuses (e.g. written by another LLVM build): drop it, compile afresh.
    cache_warning("fusejit: kernel cache: dropping " + disk.entry_path(key) + ": " + exe.error().message);
    (void)disk.remove(key);
  } else {
    ++counts.misses;
    log::debug("cache miss: " + program->name);
  }
  auto object = cpu::compile_object(*program);
  if (!object) return object.error();
  (void)disk.store(key, *object);  // informational on failure (the cache warned)
  auto exe = cpu::CpuExecutable::load(program, object.take(), num_inputs, num_outputs);
  if (!exe) return exe.error();
  if (log::enabled(log::Level::Info))
    log::info("cpu kernel " + program->name + " compiled: " + log::elapsed_ms(start));
  return std::shared_ptr<const cpu::CpuExecutable>(exe.take());
}

Status run_cpu_executable(const cpu::CpuExecutable& exe, const std::vector<unsigned long long>& inputs,
                          const std::vector<unsigned long long>& outputs) {
  std::vector<void*> in, out;
  for (unsigned long long p : inputs) in.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(p)));
  for (unsigned long long p : outputs) out.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(p)));
  return exe.run(in, out);
}

const CpuProgram& cpu_executable_program(const cpu::CpuExecutable& exe) { return exe.program(); }

#else  // no LLVM: nothing to run

namespace {
Error no_llvm() {
  return Error("the CPU backend is not in this build (configure with LLVM 14: apt-get install llvm-14-dev, "
               "-DFUSEJIT_ENABLE_LLVM=ON)");
}
}  // namespace

std::string cpu_memory_key(const std::string& graph_key, const std::string& config) {
  return kernel_cache_key(graph_key, config, {"backend=cpu"}, "cpu", -1);
}

CacheKey cpu_object_cache_key(const Graph& prepared, const std::string& config, const CpuProgram& program) {
  CacheKey key;
  key.add("backend", "cpu");
  key.add("graph", hash_hex(structural_hash(prepared)));
  key.add("config", config);
  key.add("ir", sha256_hex(program.llvm_module));
  return key;
}

Expected<std::shared_ptr<const cpu::CpuExecutable>> build_cpu_executable(const Graph&, const std::string&,
                                                                        DiskCache&, int, int, CpuDiskCounts&) {
  return no_llvm();
}

Status run_cpu_executable(const cpu::CpuExecutable&, const std::vector<unsigned long long>&,
                          const std::vector<unsigned long long>&) {
  return no_llvm();
}

const CpuProgram& cpu_executable_program(const cpu::CpuExecutable&) {
  static const CpuProgram empty;  // unreachable: no CpuExecutable exists without LLVM
  return empty;
}

#endif

}  // namespace fusejit
