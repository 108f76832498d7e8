// runtime/engine.cpp — Graph -> codegen -> NVRTC -> loaded kernel, cached.
// Backend::Cpu goes through runtime/engine_cpu.cpp (LLVM) instead.
#include "fusejit/engine.h"

#include <type_traits>

#include "compiler/codegen.h"
#include "fusejit/autotune.h"
#include "compiler/program.h"
#include "runtime/cuda_driver.h"
#include "runtime/cache_counters.h"
#include "runtime/cache_tiers.h"
#include "runtime/engine_cpu.h"
#include "runtime/kernel_cache.h"
#include "runtime/loaded_program.h"
#include "runtime/log.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"

namespace fusejit {

static_assert(std::is_same_v<DevicePtr, CUdeviceptr>, "DevicePtr must equal CUdeviceptr");
static_assert(std::is_same_v<StreamHandle, CUstream>, "StreamHandle must equal CUstream");

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::Cuda: return "cuda";
    case Backend::Cpu: return "cpu";
    case Backend::Auto: return "auto";
  }
  return "?";
}

std::optional<Backend> parse_backend(std::string_view text) {
  for (Backend b : {Backend::Cuda, Backend::Cpu, Backend::Auto})
    if (text == backend_name(b)) return b;
  return std::nullopt;
}

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

// The memory cache's graph field. The structural hash ignores names, but a
// cached CompiledKernel reports its arguments' names (args()): two graphs that
// differ only in them (a square linear's dX and dW stages) need two entries.
std::string memory_graph_key(const Graph& prepared) {
  std::string key = hash_hex(structural_hash(prepared));
  for (const KernelArg& a : kernel_args(prepared)) key += " " + std::to_string(a.name.size()) + ":" + a.name;
  return key;
}

Expected<Program> generate(const Graph& prepared, const std::string& arch,
                           const CompileOptions& opts) {
  CodegenOptions codegen;
  codegen.arch = arch;
  codegen.config = opts.config;
  long long start = log::now_ns();
  auto p = generate_program(prepared, codegen);
  if (p && log::enabled(log::Level::Info))
    log::info("codegen " + p->name + " for " + arch + ": " + log::elapsed_ms(start));
  return p;
}

NvrtcOptions nvrtc_options_for(const std::string& arch, const CompileOptions& opts) {
  NvrtcOptions nv;
  nv.arch = arch;
  nv.line_info = opts.line_info;
  if (opts.resource_usage) nv.extra.push_back("--ptxas-options=-v");
  return nv;
}

}  // namespace

// ---- CompiledKernel ---------------------------------------------------------

const std::string& CompiledKernel::name() const { return program_->name; }
const Program& CompiledKernel::program() const { return *program_; }
const CpuProgram* CompiledKernel::cpu_program() const {
  return cpu_ ? &cpu_executable_program(*cpu_) : nullptr;
}

Status CompiledKernel::launch(const std::vector<DevicePtr>& inputs,
                              const std::vector<DevicePtr>& outputs, StreamHandle stream) const {
  if (backend_ == Backend::Cpu) {  // host pointers, synchronous; no stream
    if (!cpu_) return Error("kernel '" + name() + "' is not loaded");
    Status s = run_cpu_executable(*cpu_, inputs, outputs);
    if (!s) return Error("kernel '" + name() + "': " + s.error().message);
    return s;
  }
  if (!loaded_) return Error("kernel '" + name() + "' is not loaded");
  Status s = loaded_->run(inputs, outputs, stream);
  if (!s) return Error("kernel '" + name() + "': " + s.error().message);
  return s;
}

// ---- Engine ------------------------------------------------------------------

struct Engine::Impl {
  OnceCache<std::shared_ptr<CompiledKernel>> cache;  // this process, loaded kernels
  CubinTiers tiers{DiskCache::open_default(),       // every process of this user, CUBINs,
                   RemoteCache::process_default()}; // then Redis (docs/cache.md)
  CpuDiskCounts cpu_disk;  // CPU objects go to the disk tier only (engine_cpu.h)

  Expected<std::shared_ptr<CompiledKernel>> compile_cpu(const Graph& graph, const CompileOptions& opts);
};

// Backend::Cpu: the same prepared graph and argument order as CUDA; the
// kernel's Program carries the name and plan (cpu_program() the rest).
Expected<std::shared_ptr<CompiledKernel>> Engine::Impl::compile_cpu(const Graph& graph,
                                                                   const CompileOptions& opts) {
  if (!cpu_backend_available()) return generate_cpu_program(graph, {}).error();  // "not in this build"
  if (opts.autotune != AutotuneMode::Off && opts.config.empty())
    return Error("autotuning needs the CUDA backend (the CPU backend runs heuristics or `config`)");
  auto g = prepared_copy(graph);
  if (!g) return g.error();
  const Graph& prepared = *g;
  std::string key = cpu_memory_key(memory_graph_key(prepared), opts.config);
  bool built = false;
  auto result = cache.get_or_build(key, [&]() -> Expected<std::shared_ptr<CompiledKernel>> {
    built = true;
    log::debug("memory cache miss: compiling for cpu");
    std::vector<KernelArg> args = kernel_args(prepared);
    int num_outputs = static_cast<int>(prepared.outputs.size());
    int num_inputs = static_cast<int>(args.size()) - num_outputs;
    auto exe = build_cpu_executable(prepared, opts.config, tiers.disk(), num_inputs, num_outputs, cpu_disk);
    if (!exe) return exe.error();
    const CpuProgram& cp = cpu_executable_program(**exe);
    auto program = std::make_shared<Program>();
    program->name = cp.name;
    program->plan_text = cp.plan_text;
    program->scratch = cp.scratch;
    std::shared_ptr<CompiledKernel> kernel(new CompiledKernel());
    kernel->program_ = std::move(program);
    kernel->arch_ = "cpu";
    kernel->device_ = -1;
    kernel->args_ = std::move(args);
    kernel->backend_ = Backend::Cpu;
    kernel->cpu_ = exe.take();
    return kernel;
  });
  if (!built && result) log::debug("memory cache hit: " + (*result)->name());
  return result;
}

namespace {
// A CUBIN from the disk or remote cache, or NVRTC's (then stored; a failed store only warns).
Expected<std::vector<char>> cubin_for(CubinTiers& tiers, const CacheKey& key, const Program& program,
                                      const NvrtcOptions& nv, bool& from_disk, bool lookup = true) {
  from_disk = false;
  if (auto hit = lookup ? tiers.load(key) : std::nullopt) {
    from_disk = true;
    log::info("cache hit: " + program.name + " (from the " + hit->from + ")");
    return std::move(hit->cubin);
  }
  log::debug("cache miss: " + program.name);
  auto c = compile_to_cubin(program.source, program.name, nv);
  if (!c) return c.error();
  tiers.store(key, c->cubin);
  return std::move(c->cubin);
}
}  // namespace

Engine::Engine() : impl_(std::make_unique<Impl>()) {}

// This Engine's memory and disk hits and misses go to the cache directory's
// counters (`fusejit cache stats`, docs/cache.md). Never throws: a failure is
// one warning; a disabled cache records nothing (it warned when opened).
Engine::~Engine() {
  try {
    DiskCache& disk = impl_->tiers.disk();
    if (!disk.enabled()) return;
    CacheStats memory = impl_->cache.stats();
    TierStats tiers = impl_->tiers.stats();
    CacheCounters counters(disk.dir());
    uint64_t disk_hits = tiers.disk_hits + impl_->cpu_disk.hits.load();  // CUBINs and CPU objects
    uint64_t disk_misses = tiers.disk_misses + impl_->cpu_disk.misses.load();
    if (Status s = counters.add({memory.hits, memory.misses, disk_hits, disk_misses}); !s)
      cache_warning_once(counters.path(), "fusejit: kernel cache: hit/miss counters: " + s.error().message);
  } catch (...) {  // e.g. bad_alloc: the counters are not worth an abort
  }
}

Expected<std::string> Engine::device_arch(int device) {
  auto info = device_info(device);
  if (!info) return info.error();
  return info->arch;
}

Expected<std::shared_ptr<CompiledKernel>> Engine::compile(const Graph& graph,
                                                          const CompileOptions& opts) {
  Backend backend = opts.backend;
  if (backend == Backend::Auto)  // without LLVM: Cuda, whose error says what is missing
    backend = cpu_backend_available() && !cuda_device_present(opts.device) ? Backend::Cpu : Backend::Cuda;
  if (backend == Backend::Cpu) return impl_->compile_cpu(graph, opts);
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
    tuned.backend = Backend::Cuda;
    return compile(graph, tuned);
  }
  auto g = prepared_copy(graph);
  if (!g) return g.error();
  auto arch = resolve_arch(opts.arch, opts.device);
  if (!arch) return arch.error();
  NvrtcOptions nv = nvrtc_options_for(*arch, opts);
  std::string key = kernel_cache_key(memory_graph_key(*g), opts.config,
                                     nvrtc_option_list(nv), *arch, opts.device);

  const Graph& prepared = *g;
  bool built = false;
  auto result = impl_->cache.get_or_build(key, [&]() -> Expected<std::shared_ptr<CompiledKernel>> {
    built = true;
    log::debug("memory cache miss: compiling for " + *arch);
    auto program = generate(prepared, *arch, opts);
    if (!program) return program.error();
    CacheKey disk_key = cubin_cache_key(prepared, *arch, opts.config, nvrtc_option_list(nv), program->source);
    bool from_disk = false;
    auto cubin = cubin_for(impl_->tiers, disk_key, *program, nv, from_disk);
    if (!cubin) return cubin.error();
    std::vector<KernelArg> args = kernel_args(prepared);
    int num_outputs = static_cast<int>(prepared.outputs.size());
    int num_inputs = static_cast<int>(args.size()) - num_outputs;
    auto loaded = LoadedProgram::load(*program, *cubin, num_inputs, num_outputs, opts.device);
    if (!loaded && from_disk) {  // a cached CUBIN the driver refuses: drop it, compile afresh
      impl_->tiers.remove(disk_key);
      cubin = cubin_for(impl_->tiers, disk_key, *program, nv, from_disk, /*lookup=*/false);
      if (!cubin) return cubin.error();
      loaded = LoadedProgram::load(*program, *cubin, num_inputs, num_outputs, opts.device);
    }
    if (!loaded) return loaded.error();

    std::shared_ptr<CompiledKernel> kernel(new CompiledKernel());
    kernel->program_ = std::make_shared<const Program>(program.take());
    kernel->cubin_ = cubin.take();
    kernel->arch_ = *arch;
    kernel->device_ = opts.device;
    kernel->args_ = std::move(args);
    kernel->loaded_ = loaded.take();
    return kernel;
  });
  if (!built && result) log::debug("memory cache hit: " + (*result)->name());
  return result;
}

Expected<CubinResult> Engine::compile_cubin(const Graph& graph, const std::string& arch,
                                            const CompileOptions& opts) const {
  auto g = prepared_copy(graph);
  if (!g) return g.error();
  auto resolved = resolve_arch(arch, opts.device);
  if (!resolved) return resolved.error();
  auto program = generate(*g, *resolved, opts);
  if (!program) return program.error();
  NvrtcOptions nv = nvrtc_options_for(*resolved, opts);
  CacheKey key = cubin_cache_key(*g, *resolved, opts.config, nvrtc_option_list(nv), program->source);
  if (opts.resource_usage) {  // ptxas's info is only in a fresh compile's log
    auto c = compile_to_cubin(program->source, program->name, nv);
    if (c) c->resources = parse_ptxas_info(c->log);
    return c;
  }
  if (auto hit = impl_->tiers.load(key)) {
    log::info("cache hit: " + program->name + " (from the " + hit->from + ")");
    CubinResult r;
    r.cubin = std::move(hit->cubin);
    r.options = nvrtc_option_list(nv);
    r.log = "(from the " + hit->from + ")";
    return r;
  }
  log::debug("cache miss: " + program->name);
  auto c = compile_to_cubin(program->source, program->name, nv);
  if (c) impl_->tiers.store(key, c->cubin);
  return c;
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

CacheStats Engine::cache_stats() const {
  CacheStats st = impl_->cache.stats();
  DiskCacheStats d = impl_->tiers.disk().stats();
  TierStats t = impl_->tiers.stats();
  st.disk_hits = d.hits;
  st.disk_stores = d.stores;
  st.disk_misses = t.disk_misses + impl_->cpu_disk.misses.load();
  st.remote_hits = t.remote_hits;
  st.remote_misses = t.remote_misses;
  st.remote_stores = t.remote_stores;
  return st;
}
void Engine::clear_cache() { impl_->cache.clear(); }

}  // namespace fusejit
