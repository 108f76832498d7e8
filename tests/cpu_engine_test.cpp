// Engine with Backend::Cpu: a builder graph compiled through LLVM and run on
// host pointers against the fp64 reference; the memory cache, the disk cache
// in a fresh Engine (as another process would), corrupt entries refused and
// recompiled, argument errors, Backend::Auto without a device. Prints the
// cold-compile and cache-hit times (not asserted). Built only with LLVM.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "compiler/cpu_program.h"
#include "fusejit/builder.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "runtime/disk_cache.h"
#include "runtime/engine_cpu.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Graph small_graph() {
  GraphBuilder g(Precision::FP32, "cpu_engine_linear");
  auto x = g.input("x", {37, 96});
  auto w = g.input("w", {80, 96});
  auto b = g.input("b", {80});
  auto y = g.linear(x, w, b).gelu().mul(0.5);
  g.output("y", y);
  auto graph = g.build();
  EXPECT_TRUE(graph) << graph.error().str();
  return graph ? graph.take() : Graph();
}

// A temporary FUSEJIT_CACHE_DIR for the test's lifetime (Engines read it when made).
struct TempCacheDir {
  std::string dir;
  TempCacheDir() {
    char tmpl[] = "/tmp/fj-cpu-engine-XXXXXX";
    if (mkdtemp(tmpl)) dir = tmpl;
    setenv("FUSEJIT_CACHE_DIR", dir.c_str(), 1);
  }
  ~TempCacheDir() {
    unsetenv("FUSEJIT_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".entry") out.push_back(e.path());
    return out;
  }
};

CompileOptions cpu_options() {
  CompileOptions o;
  o.backend = Backend::Cpu;
  return o;
}

// Skips while the codegen cannot do this graph yet ("not implemented"), and in builds without LLVM.
#define SKIP_UNLESS_CPU_CODEGEN(graph)                                                                   \
  do {                                                                                                   \
    if (!cpu_backend_available()) GTEST_SKIP() << "no LLVM in this build";                              \
    Graph prepared_ = (graph);                                                                           \
    ASSERT_TRUE(prepare_graph(prepared_));                                                               \
    auto p_ = generate_cpu_program(prepared_, {});                                                       \
    if (!p_ && p_.error().message.find("not implemented") != std::string::npos)                         \
      GTEST_SKIP() << p_.error().message;                                                                \
  } while (0)

// Runs the kernel on seeded inputs and compares every output with the reference.
void expect_matches_reference(const CompiledKernel& k, const Graph& graph) {
  Graph g = graph;
  ASSERT_TRUE(prepare_graph(g));
  auto inputs = make_random_inputs(g, 42);
  auto ref = evaluate_reference(g, inputs);
  ASSERT_TRUE(ref) << ref.error().str();
  std::vector<std::vector<uint8_t>> in_bytes;
  std::vector<DevicePtr> in_ptrs, out_ptrs;
  for (const HostTensor& t : inputs) in_bytes.push_back(to_device_bytes(t));
  for (auto& b : in_bytes) in_ptrs.push_back(reinterpret_cast<DevicePtr>(b.data()));
  std::vector<std::vector<float>> outs;
  for (const Output& o : g.outputs) outs.emplace_back(g.node(o.value).type.numel(), std::nanf(""));
  for (auto& o : outs) out_ptrs.push_back(reinterpret_cast<DevicePtr>(o.data()));
  Status s = k.launch(in_ptrs, out_ptrs);
  ASSERT_TRUE(s) << s.error().str();
  for (size_t i = 0; i < outs.size(); ++i) {
    Comparison c = compare_outputs(outs[i].data(), (*ref)[i].data(), static_cast<int64_t>(outs[i].size()), g.precision);
    EXPECT_TRUE(c.pass) << c.summary();
  }
}

TEST(CpuEngine, CompilesRunsAndCaches) {
  Graph graph = small_graph();
  SKIP_UNLESS_CPU_CODEGEN(graph);
  TempCacheDir tmp;

  Engine first;
  auto t0 = std::chrono::steady_clock::now();
  auto k = first.compile(graph, cpu_options());
  double cold_ms = ms_since(t0);
  ASSERT_TRUE(k) << k.error().str();
  EXPECT_EQ((*k)->backend(), Backend::Cpu);
  EXPECT_EQ((*k)->arch(), "cpu");
  EXPECT_FALSE((*k)->name().empty());
  EXPECT_EQ((*k)->program().name, (*k)->name());
  ASSERT_NE((*k)->cpu_program(), nullptr);
  EXPECT_FALSE((*k)->cpu_program()->launches.empty());
  ASSERT_EQ((*k)->args().size(), 4u);
  EXPECT_TRUE((*k)->args()[3].is_output);
  expect_matches_reference(**k, graph);
  EXPECT_EQ(first.cache_stats().disk_stores, 1u);
  EXPECT_EQ(first.cache_stats().disk_misses, 1u);
  EXPECT_EQ(first.cache_stats().disk_hits, 0u);

  // The memory cache: the same kernel, nothing compiled.
  t0 = std::chrono::steady_clock::now();
  auto again = first.compile(graph, cpu_options());
  double memory_ms = ms_since(t0);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get(), k->get());
  EXPECT_EQ(first.cache_stats().hits, 1u);
  EXPECT_EQ(first.cache_stats().compiles, 1u);

  // A fresh Engine (another process): the object from disk, no LLVM compile.
  Engine second;
  t0 = std::chrono::steady_clock::now();
  auto hit = second.compile(graph, cpu_options());
  double disk_ms = ms_since(t0);
  ASSERT_TRUE(hit) << hit.error().str();
  EXPECT_EQ(second.cache_stats().disk_hits, 1u);
  EXPECT_EQ(second.cache_stats().disk_stores, 0u);
  EXPECT_EQ(second.cache_stats().disk_misses, 0u);
  expect_matches_reference(**hit, graph);
  ASSERT_EQ(tmp.entries().size(), 1u);
  std::printf("[ info ] cpu kernel %s: cold compile %.1f ms, disk-cache hit %.1f ms, memory-cache hit %.3f ms\n",
              (*k)->name().c_str(), cold_ms, disk_ms, memory_ms);

  // The key names the backend and target; `fusejit cache list` shows its arch part.
  Graph prepared = graph;
  ASSERT_TRUE(prepare_graph(prepared));
  CacheKey key = cpu_object_cache_key(prepared, "", *(*k)->cpu_program());
  ASSERT_NE(key.find("backend"), nullptr);
  EXPECT_EQ(*key.find("backend"), "cpu");
  EXPECT_EQ(*key.find("arch"), "cpu " + (*k)->cpu_program()->cpu);
  EXPECT_EQ(DiskCache(tmp.dir).entry_path(key), tmp.entries()[0].string());
}

// The structural hash ignores names; a cached kernel reports its arguments'
// names, so graphs differing only in them (a square linear's dX and dW
// stages) each get their own kernel, each reporting its own names.
TEST(CpuEngine, GraphsDifferingOnlyInArgumentNamesKeepTheirNames) {
  auto square = [](const char* a, const char* b, const char* out) {
    GraphBuilder g(Precision::FP32, "square_linear");
    g.output(out, g.linear(g.input(a, {16, 16}), g.input(b, {16, 16})));
    auto graph = g.build();
    EXPECT_TRUE(graph) << graph.error().str();
    return graph ? graph.take() : Graph();
  };
  Graph dx = square("tmp_dz", "w", "grad_x"), dw = square("tmp_dz_t", "x_t", "grad_w");
  ASSERT_EQ(structural_hash(dx), structural_hash(dw));
  SKIP_UNLESS_CPU_CODEGEN(dx);
  TempCacheDir tmp;
  Engine engine;
  auto kx = engine.compile(dx, cpu_options());
  auto kw = engine.compile(dw, cpu_options());
  ASSERT_TRUE(kx) << kx.error().str();
  ASSERT_TRUE(kw) << kw.error().str();
  auto names = [](const CompiledKernel& k) {
    std::set<std::string> out;
    for (const KernelArg& a : k.args()) out.insert(a.name);
    return out;
  };
  EXPECT_EQ(names(**kx), (std::set<std::string>{"tmp_dz", "w", "grad_x"}));
  EXPECT_EQ(names(**kw), (std::set<std::string>{"tmp_dz_t", "x_t", "grad_w"}));
  EXPECT_EQ(engine.cache_stats().hits, 0u);
  expect_matches_reference(**kw, dw);
  auto again = engine.compile(dw, cpu_options());  // the same names: a memory hit
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get(), kw->get());
}

TEST(CpuEngine, CorruptEntriesAreRefusedAndRecompiled) {
  Graph graph = small_graph();
  SKIP_UNLESS_CPU_CODEGEN(graph);
  TempCacheDir tmp;
  std::vector<std::string> warnings;
  CacheWarningSink old = set_cache_warning_sink([&](const std::string& w) { warnings.push_back(w); });
  {
    Engine e;
    ASSERT_TRUE(e.compile(graph, cpu_options()));
  }
  ASSERT_EQ(tmp.entries().size(), 1u);
  fs::path entry = tmp.entries()[0];

  {  // A flipped byte: the checksum refuses it; compiled afresh and stored again.
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  {
    Engine e;
    auto k = e.compile(graph, cpu_options());
    ASSERT_TRUE(k) << k.error().str();
    EXPECT_EQ(e.cache_stats().disk_hits, 0u);
    EXPECT_EQ(e.cache_stats().disk_stores, 1u);
    expect_matches_reference(**k, graph);
  }
  EXPECT_FALSE(warnings.empty()) << "the corrupt entry was not reported";

  {  // A well-formed entry whose payload is not an object file: the JIT refuses it.
    Engine e;
    auto k = e.compile(graph, cpu_options());
    ASSERT_TRUE(k);
    Graph prepared = graph;
    ASSERT_TRUE(prepare_graph(prepared));
    CacheKey key = cpu_object_cache_key(prepared, "", *(*k)->cpu_program());
    DiskCache disk(tmp.dir);
    ASSERT_TRUE(disk.store(key, std::vector<char>(256, 'x')));
  }
  size_t before = warnings.size();
  {
    Engine e;
    auto k = e.compile(graph, cpu_options());
    ASSERT_TRUE(k) << k.error().str();
    EXPECT_EQ(e.cache_stats().disk_stores, 1u);
    expect_matches_reference(**k, graph);
  }
  EXPECT_GT(warnings.size(), before);
  {
    Engine e;  // the recompiled object is what is on disk now
    ASSERT_TRUE(e.compile(graph, cpu_options()));
    EXPECT_EQ(e.cache_stats().disk_hits, 1u);
  }
  set_cache_warning_sink(old);
}

TEST(CpuEngine, LaunchArgumentErrors) {
  Graph graph = small_graph();
  SKIP_UNLESS_CPU_CODEGEN(graph);
  TempCacheDir tmp;
  Engine e;
  auto k = e.compile(graph, cpu_options());
  ASSERT_TRUE(k) << k.error().str();
  std::vector<float> x(37 * 96), w(80 * 96), b(80), y(37 * 80);
  auto p = [](std::vector<float>& v) { return reinterpret_cast<DevicePtr>(v.data()); };
  EXPECT_FALSE((*k)->launch({p(x), p(w)}, {p(y)}));
  EXPECT_FALSE((*k)->launch({p(x), p(w), p(b)}, {}));
  EXPECT_FALSE((*k)->launch({p(x), 0, p(b)}, {p(y)}));
  EXPECT_FALSE((*k)->launch({p(x), p(w), p(b)}, {0}));
  EXPECT_TRUE((*k)->launch({p(x), p(w), p(b)}, {p(y)}));
}

TEST(CpuEngine, BackendNamesAndAuto) {
  EXPECT_EQ(backend_name(Backend::Cpu), "cpu");
  EXPECT_EQ(parse_backend("cuda"), Backend::Cuda);
  EXPECT_EQ(parse_backend("auto"), Backend::Auto);
  EXPECT_FALSE(parse_backend("gpu"));

  Graph graph = small_graph();
  SKIP_UNLESS_CPU_CODEGEN(graph);
  if (Engine::device_arch()) GTEST_SKIP() << "a CUDA device is present: Auto means Cuda";
  TempCacheDir tmp;
  Engine e;
  CompileOptions auto_opts;
  auto_opts.backend = Backend::Auto;
  auto k = e.compile(graph, auto_opts);
  ASSERT_TRUE(k) << k.error().str();
  EXPECT_EQ((*k)->backend(), Backend::Cpu);
  CompileOptions cuda;
  cuda.backend = Backend::Cuda;
  EXPECT_FALSE(e.compile(graph, cuda)) << "Cuda without a device must fail, not fall back";
  CompileOptions tuned = cpu_options();
  tuned.autotune = AutotuneMode::Force;
  EXPECT_FALSE(e.compile(graph, tuned));
}

}  // namespace
}  // namespace fusejit
