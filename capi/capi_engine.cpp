// capi/capi_engine.cpp — engines, compilation and kernels of the C API.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "capi/capi_internal.h"
#include "compiler/cpu_program.h"
#include "compiler/program.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"

using namespace fusejit::capi;

namespace {

// FJ_ERR_NO_DEVICE unless `device` exists.
fj_status check_device(int device) {
  auto n = fusejit::device_count();
  if (!n) return fail(FJ_ERR_NO_DEVICE, message_of(n.error()));
  if (device >= *n)
    return fail(FJ_ERR_NO_DEVICE, "no CUDA device " + std::to_string(device) + " (" +
                                      std::to_string(*n) + " present)");
  return FJ_OK;
}

// The options' arch with "auto" replaced by the device's.
fj_status resolve_arch(const fusejit::CompileOptions& opts, std::string& arch) {
  if (opts.arch != "auto") {
    arch = opts.arch;
    return FJ_OK;
  }
  if (fj_status s = check_device(opts.device); s != FJ_OK) return s;
  auto a = fusejit::Engine::device_arch(opts.device);
  if (!a) return fail(FJ_ERR_CUDA, message_of(a.error()));
  arch = *a;
  return FJ_OK;
}

// Engine::compile fails in codegen / NVRTC, or (messages "program '...'")
// while loading the module on the device. CPU: always codegen / LLVM.
fj_status compile_failure(const fusejit::Error& e, fusejit::Backend backend) {
  bool load_failed = backend == fusejit::Backend::Cuda && e.message.rfind("program '", 0) == 0;
  return fail(load_failed ? FJ_ERR_CUDA : FJ_ERR_COMPILE, message_of(e));
}

bool same_args(const std::vector<fusejit::KernelArg>& a, const std::vector<fusejit::KernelArg>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || !(a[i].type == b[i].type) || a[i].is_output != b[i].is_output)
      return false;
  return true;
}

std::string kernel_label(const fj_kernel& k) {
  return k.graph.name.empty() ? std::string("kernel") : "kernel '" + k.graph.name + "'";
}

// Compiles and loads `k` unless done; a failure is recorded. Needs k.mutex held.
fj_status load_locked(fj_kernel& k) {
  if (k.compiled) return FJ_OK;
  if (k.failure != FJ_OK) return fail(k.failure, k.failure_message);
  const bool cpu = k.options.compile.backend == fusejit::Backend::Cpu;
  fj_status s = cpu ? (fusejit::cpu_backend_available() ? FJ_OK : cpu_backend_missing())
                    : check_device(k.options.compile.device);
  if (s == FJ_OK) {
    fusejit::CompileOptions opts = k.options.compile;
    opts.autotune = k.options.autotune == FJ_AUTOTUNE_FORCE    ? fusejit::AutotuneMode::Force
                    : k.options.autotune == FJ_AUTOTUNE_USE_DB ? fusejit::AutotuneMode::UseDb
                                                               : fusejit::AutotuneMode::Off;
    auto compiled = k.engine->compile(k.graph, opts);
    if (!compiled) {
      s = compile_failure(compiled.error(), k.options.compile.backend);
    } else if (!same_args((*compiled)->args(), k.args)) {
      s = fail(FJ_ERR_INTERNAL,
               kernel_label(k) + ": the engine's argument list differs from the spec's");
    } else {
      k.compiled = compiled.take();
    }
  }
  if (s != FJ_OK) {
    k.failure = s;
    k.failure_message = fj_last_error();
  }
  return s;
}

fj_options options_or_default(const fj_options* options) {
  return options ? *options : fj_options{};
}

}  // namespace

extern "C" {

// ---- engines -------------------------------------------------------------------

fj_status fj_engine_create(fj_engine** engine) {
  return guarded([&]() -> fj_status {
    if (!engine) return null_argument("engine");
    auto e = std::make_unique<fj_engine>();
    e->engine = std::make_shared<fusejit::Engine>();
    *engine = e.release();
    return FJ_OK;
  });
}

void fj_engine_destroy(fj_engine* engine) { delete engine; }

fj_status fj_engine_compile(fj_engine* engine, const fj_spec* spec, const fj_options* options,
                            fj_kernel** kernel) {
  return guarded([&]() -> fj_status {
    if (!engine) return null_argument("engine");
    if (!spec) return null_argument("spec");
    if (!kernel) return null_argument("kernel");
    auto k = std::make_unique<fj_kernel>();
    k->engine = engine->engine;
    k->graph = spec->graph;
    k->options = options_or_default(options);
    k->options.compile.backend = resolve_backend(k->options.compile.backend);
    k->args = spec->args;
    if (!k->options.lazy) {
      std::lock_guard<std::mutex> lock(k->mutex);
      if (fj_status s = load_locked(*k); s != FJ_OK) return s;
    }
    *kernel = k.release();
    return FJ_OK;
  });
}

fj_status fj_engine_compile_cubin(fj_engine* engine, const fj_spec* spec, const fj_options* options,
                                  void** data, size_t* size) {
  return guarded([&]() -> fj_status {
    if (!engine) return null_argument("engine");
    if (!spec) return null_argument("spec");
    if (!data) return null_argument("data");
    if (!size) return null_argument("size");
    fj_options opts = options_or_default(options);
    if (opts.compile.backend == fusejit::Backend::Cpu)
      return fail(FJ_ERR_INVALID_ARGUMENT, "a CUBIN is CUDA only, but the options select the cpu backend");
    std::string arch;
    if (fj_status s = resolve_arch(opts.compile, arch); s != FJ_OK) return s;
    auto cubin = engine->engine->compile_cubin(spec->graph, arch, opts.compile);
    if (!cubin) return fail(FJ_ERR_COMPILE, message_of(cubin.error()));
    const std::vector<char>& bytes = cubin->cubin;
    void* out = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (!out) return fail(FJ_ERR_INTERNAL, "out of memory");
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    *data = out;
    *size = bytes.size();
    return FJ_OK;
  });
}

fj_status fj_engine_compile_cubin_file(fj_engine* engine, const fj_spec* spec,
                                       const fj_options* options, const char* path) {
  return guarded([&]() -> fj_status {
    if (!path) return null_argument("path");
    void* data = nullptr;
    size_t size = 0;
    if (fj_status s = fj_engine_compile_cubin(engine, spec, options, &data, &size); s != FJ_OK)
      return s;
    std::unique_ptr<void, void (*)(void*)> owned(data, std::free);
    std::FILE* f = std::fopen(path, "wb");
    if (!f)
      return fail(FJ_ERR_IO, std::string("cannot write '") + path + "': " + std::strerror(errno));
    bool ok = std::fwrite(data, 1, size, f) == size;
    int write_errno = ok ? 0 : errno;
    if (std::fclose(f) != 0 && ok) {
      ok = false;
      write_errno = errno;
    }
    if (!ok)
      return fail(FJ_ERR_IO,
                  std::string("cannot write '") + path + "': " + std::strerror(write_errno));
    return FJ_OK;
  });
}

fj_status fj_engine_emit(fj_engine* engine, const fj_spec* spec, const fj_options* options,
                         fj_emit_kind what, char** text) {
  return guarded([&]() -> fj_status {
    if (!engine) return null_argument("engine");
    if (!spec) return null_argument("spec");
    if (!text) return null_argument("text");
    int kind = enum_bits(what);
    if (kind != FJ_EMIT_SOURCE && kind != FJ_EMIT_PLAN)
      return fail(FJ_ERR_INVALID_ARGUMENT, "unknown emit kind " + std::to_string(kind));
    fj_options opts = options_or_default(options);
    if (resolve_backend(opts.compile.backend) == fusejit::Backend::Cpu) {
      if (!fusejit::cpu_backend_available()) return cpu_backend_missing();
      fusejit::CpuCodegenOptions cg;
      cg.config = opts.compile.config;
      cg.ir_text = kind == FJ_EMIT_SOURCE;
      auto cpu = fusejit::generate_cpu_program(spec->graph, cg);
      if (!cpu) return fail(FJ_ERR_COMPILE, message_of(cpu.error()));
      char* out = dup_string(kind == FJ_EMIT_SOURCE ? cpu->llvm_module : cpu->plan_text);
      if (!out) return fail(FJ_ERR_INTERNAL, "out of memory");
      *text = out;
      return FJ_OK;
    }
    auto program = engine->engine->emit(spec->graph, opts.compile);
    if (!program) return fail(FJ_ERR_COMPILE, message_of(program.error()));
    char* out = dup_string(kind == FJ_EMIT_SOURCE ? program->source : program->plan_text);
    if (!out) return fail(FJ_ERR_INTERNAL, "out of memory");
    *text = out;
    return FJ_OK;
  });
}

// ---- kernels -------------------------------------------------------------------

void fj_kernel_destroy(fj_kernel* kernel) { delete kernel; }

fj_status fj_kernel_load(fj_kernel* kernel) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    std::lock_guard<std::mutex> lock(kernel->mutex);
    return load_locked(*kernel);
  });
}

int fj_kernel_is_loaded(const fj_kernel* kernel) {
  if (!kernel) return 0;
  try {
    std::lock_guard<std::mutex> lock(kernel->mutex);
    return kernel->compiled ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

fj_status fj_kernel_num_args(const fj_kernel* kernel, size_t* num_inputs, size_t* num_outputs) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    if (!num_inputs) return null_argument("num_inputs");
    if (!num_outputs) return null_argument("num_outputs");
    count_args(kernel->args, num_inputs, num_outputs);
    return FJ_OK;
  });
}

fj_status fj_kernel_arg(const fj_kernel* kernel, size_t index, fj_arg_info* info) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    return arg_at(kernel->args, index, info);
  });
}

static fj_status loaded_kernel(const fj_kernel* kernel,
                               std::shared_ptr<fusejit::CompiledKernel>& out) {
  std::lock_guard<std::mutex> lock(kernel->mutex);
  if (!kernel->compiled)
    return fail(FJ_ERR_INVALID_ARGUMENT,
                kernel_label(*kernel) + " is not loaded (lazy): call fj_kernel_load first");
  out = kernel->compiled;
  return FJ_OK;
}

fj_status fj_kernel_name(const fj_kernel* kernel, const char** name) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    if (!name) return null_argument("name");
    std::shared_ptr<fusejit::CompiledKernel> c;
    if (fj_status s = loaded_kernel(kernel, c); s != FJ_OK) return s;
    *name = c->name().c_str();  // owned by the kernel, which never drops `compiled`
    return FJ_OK;
  });
}

fj_status fj_kernel_arch(const fj_kernel* kernel, const char** arch) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    if (!arch) return null_argument("arch");
    std::shared_ptr<fusejit::CompiledKernel> c;
    if (fj_status s = loaded_kernel(kernel, c); s != FJ_OK) return s;
    *arch = c->arch().c_str();
    return FJ_OK;
  });
}

fj_status fj_kernel_autotune(const fj_kernel* kernel, fj_autotune* mode) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    if (!mode) return null_argument("mode");
    *mode = kernel->options.autotune;
    return FJ_OK;
  });
}

fj_status fj_kernel_launch(fj_kernel* kernel, const uint64_t* args, size_t num_args, void* stream) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    const auto& expected = kernel->args;
    const bool cpu = kernel->options.compile.backend == fusejit::Backend::Cpu;
    const char* kind = cpu ? "host" : "device";
    if (num_args != expected.size()) {
      size_t num_inputs = 0, num_outputs = 0;
      count_args(expected, &num_inputs, &num_outputs);
      return fail(FJ_ERR_INVALID_ARGUMENT,
                  kernel_label(*kernel) + " takes " + std::to_string(expected.size()) +
                      " " + kind + " pointers (" + std::to_string(num_inputs) + " inputs, then " +
                      std::to_string(num_outputs) + " outputs), got " + std::to_string(num_args));
    }
    if (!args && num_args > 0) return null_argument("args");
    std::vector<fusejit::DevicePtr> inputs, outputs;
    for (size_t i = 0; i < num_args; ++i) {
      if (args[i] == 0)
        return fail(FJ_ERR_INVALID_ARGUMENT,
                    kernel_label(*kernel) + ": argument " + std::to_string(i) + " ('" +
                        expected[i].name + "', " + (expected[i].is_output ? "output" : "input") +
                        ") is a null " + kind + " pointer");
      (expected[i].is_output ? outputs : inputs).push_back(args[i]);
    }
    std::shared_ptr<fusejit::CompiledKernel> compiled;
    {
      std::lock_guard<std::mutex> lock(kernel->mutex);
      if (fj_status s = load_locked(*kernel); s != FJ_OK) return s;
      compiled = kernel->compiled;
    }
    fusejit::Status s =
        compiled->launch(inputs, outputs, static_cast<fusejit::StreamHandle>(stream));
    if (!s) return fail(cpu ? FJ_ERR_INTERNAL : FJ_ERR_CUDA, message_of(s.error()));
    return FJ_OK;
  });
}

}  // extern "C"
