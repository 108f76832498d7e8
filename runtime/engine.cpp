// runtime/engine.cpp — Graph -> codegen -> NVRTC -> loaded kernel, cached.
#include "fusejit/engine.h"

#include <type_traits>

#include "compiler/codegen.h"
#include "fusejit/autotune.h"
#include "compiler/program.h"
#include "runtime/cuda_driver.h"
#include "runtime/kernel_cache.h"
#include "runtime/loaded_program.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"

namespace fusejit {

static_assert(std::is_same_v<DevicePtr, CUdeviceptr>, "DevicePtr must equal CUdeviceptr");
static_assert(std::is_same_v<StreamHandle, CUstream>, "StreamHandle must equal CUstream");

namespace {

Expected<Graph> prepared_copy(const Graph& graph) {
  Graph g = graph;
  if (auto s = prepare_graph(g); !s) return s.error();
  return g;
}

// "auto" -> the device's arch; anything else must be an arch NVRTC supports.
Expected<std::string> resolve_arch(const std::string& arch, int device) {
  if (arch == "auto") {
    auto a = Engine::device_arch(device);
    if (!a) return Error("arch 'auto' needs a CUDA device: " + a.error().message);
    return a;
  }
  if (auto s = check_arch(arch); !s) return s.error();
  return arch;
}

std::vector<KernelArg> kernel_args(const Graph& g) {
  std::vector<KernelArg> args;
  for (ValueId id : g.inputs()) args.push_back({g.node(id).name, g.node(id).type, false});
  for (const Output& out : g.outputs) args.push_back({out.name, g.node(out.value).type, true});
  return args;
}

Expected<Program> generate(const Graph& prepared, const std::string& arch,
                           const CompileOptions& opts) {
  CodegenOptions codegen;
  codegen.arch = arch;
  codegen.config = opts.config;
  return generate_program(prepared, codegen);
}

NvrtcOptions nvrtc_options_for(const std::string& arch, const CompileOptions& opts) {
  NvrtcOptions nv;
  nv.arch = arch;
  nv.line_info = opts.line_info;
  return nv;
}

}  // namespace

// ---- CompiledKernel ---------------------------------------------------------

const std::string& CompiledKernel::name() const { return program_->name; }
const Program& CompiledKernel::program() const { return *program_; }

Status CompiledKernel::launch(const std::vector<DevicePtr>& inputs,
                              const std::vector<DevicePtr>& outputs, StreamHandle stream) const {
  if (!loaded_) return Error("kernel '" + name() + "' is not loaded");
  Status s = loaded_->run(inputs, outputs, stream);
  if (!s) return Error("kernel '" + name() + "': " + s.error().message);
  return s;
}

// ---- Engine ------------------------------------------------------------------

struct Engine::Impl {
  OnceCache<std::shared_ptr<CompiledKernel>> cache;
};

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

Expected<std::string> Engine::device_arch(int device) {
  auto info = device_info(device);
  if (!info) return info.error();
  return info->arch;
}

Expected<std::shared_ptr<CompiledKernel>> Engine::compile(const Graph& graph,
                                                          const CompileOptions& opts) {
  if (auto s = use_device(opts.device); !s) return s.error();
  if (opts.autotune != AutotuneMode::Off && opts.config.empty()) {
    CompileOptions tuned = opts;
    tuned.autotune = AutotuneMode::Off;
    if (opts.autotune == AutotuneMode::UseDb) {
      auto stored = stored_tuning(graph, opts);
      if (!stored) return stored.error();
      if (*stored) tuned.config = **stored;
    } else {
      TuneOptions t;
      t.budget_s = opts.tune_budget_s;
      auto report = autotune(*this, graph, opts, t);
      if (!report) return report.error();
      tuned.config = report->best()->config;
    }
    return compile(graph, tuned);
  }
  auto g = prepared_copy(graph);
  if (!g) return g.error();
  auto arch = resolve_arch(opts.arch, opts.device);
  if (!arch) return arch.error();
  NvrtcOptions nv = nvrtc_options_for(*arch, opts);
  std::string key = kernel_cache_key(hash_hex(structural_hash(*g)), opts.config,
                                     nvrtc_option_list(nv), *arch, opts.device);

  const Graph& prepared = *g;
  return impl_->cache.get_or_build(key, [&]() -> Expected<std::shared_ptr<CompiledKernel>> {
    auto program = generate(prepared, *arch, opts);
    if (!program) return program.error();
    auto cubin = compile_to_cubin(program->source, program->name, nv);
    if (!cubin) return cubin.error();
    std::vector<KernelArg> args = kernel_args(prepared);
    int num_outputs = static_cast<int>(prepared.outputs.size());
    int num_inputs = static_cast<int>(args.size()) - num_outputs;
    auto loaded = LoadedProgram::load(*program, cubin->cubin, num_inputs, num_outputs, opts.device);
    if (!loaded) return loaded.error();

    std::shared_ptr<CompiledKernel> kernel(new CompiledKernel());
    kernel->program_ = std::make_shared<const Program>(program.take());
    kernel->cubin_ = std::move(cubin->cubin);
    kernel->arch_ = *arch;
    kernel->device_ = opts.device;
    kernel->args_ = std::move(args);
    kernel->loaded_ = loaded.take();
    return kernel;
  });
}

Expected<CubinResult> Engine::compile_cubin(const Graph& graph, const std::string& arch,
                                            const CompileOptions& opts) const {
  auto g = prepared_copy(graph);
  if (!g) return g.error();
  auto resolved = resolve_arch(arch, opts.device);
  if (!resolved) return resolved.error();
  auto program = generate(*g, *resolved, opts);
  if (!program) return program.error();
  return compile_to_cubin(program->source, program->name, nvrtc_options_for(*resolved, opts));
}

Expected<Program> Engine::emit(const Graph& graph, const CompileOptions& opts) const {
  auto g = prepared_copy(graph);
  if (!g) return g.error();
  std::string arch = opts.arch;
  if (arch == "auto") {
    auto device = device_arch(opts.device);
    arch = device ? *device : "sm_90a";
  } else if (auto s = check_arch(arch); !s) {
    return s.error();
  }
  return generate(*g, arch, opts);
}

CacheStats Engine::cache_stats() const { return impl_->cache.stats(); }
void Engine::clear_cache() { impl_->cache.clear(); }

}  // namespace fusejit
