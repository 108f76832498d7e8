// End to end on the GPU: every examples/*.yaml is compiled by the Engine,
// launched on seeded random inputs with its outputs poisoned (0xFF bytes, a
// NaN no kernel writes), and compared with the fp64 CPU reference (sampled for
// outputs above 4M elements). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>

#include "compiler/program.h"
#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDenseLimit = int64_t{4} << 20;  // elements per output
constexpr int64_t kSamples = 20000;
constexpr uint64_t kSeed = 20240611;

fs::path examples_dir() { return fs::path(FUSEJIT_SOURCE_DIR) / "examples"; }

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(examples_dir(), ec))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Engine& shared_engine() {
  static Engine engine;
  return engine;
}

// Elements whose bytes are all 0xFF: never written by the kernel.
int64_t count_poisoned(const std::vector<uint8_t>& bytes, int element_size) {
  int64_t poisoned = 0;
  for (size_t at = 0; at + element_size <= bytes.size(); at += element_size) {
    bool all = true;
    for (int b = 0; b < element_size; ++b) all = all && bytes[at + b] == 0xFF;
    poisoned += all;
  }
  return poisoned;
}

struct DeviceTensors {
  std::vector<DeviceBuffer> buffers;
  std::vector<DevicePtr> ptrs;
};

class GpuExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuExamples, MatchesReference) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  const std::string name = GetParam();
  auto graph = load_spec_file((examples_dir() / (name + ".yaml")).string());
  ASSERT_TRUE(graph.ok()) << graph.error().str();
  const Graph& g = *graph;
  auto compiled = shared_engine().compile(g);
  ASSERT_TRUE(compiled.ok()) << compiled.error().str();
  const CompiledKernel& kernel = **compiled;
  ASSERT_EQ(kernel.args().size(), g.inputs().size() + g.outputs.size());

  std::vector<HostTensor> host_inputs = make_random_inputs(g, kSeed);
  DeviceTensors in, out;
  for (const HostTensor& t : host_inputs) {
    std::vector<uint8_t> bytes = to_device_bytes(t);
    auto buf = DeviceBuffer::allocate(bytes.size());
    ASSERT_TRUE(buf.ok()) << buf.error().message;
    ASSERT_TRUE(buf->upload(bytes.data(), bytes.size()).ok());
    in.ptrs.push_back(buf->ptr());
    in.buffers.push_back(buf.take());
  }
  for (const Output& o : g.outputs) {
    const TensorType& type = g.node(o.value).type;
    auto buf = DeviceBuffer::allocate(static_cast<size_t>(type.numel()) * dtype_size(type.dtype));
    ASSERT_TRUE(buf.ok()) << buf.error().message;
    ASSERT_TRUE(buf->fill_bytes(0xFF).ok());
    out.ptrs.push_back(buf->ptr());
    out.buffers.push_back(buf.take());
  }

  auto start = CudaEvent::create(), end = CudaEvent::create();
  ASSERT_TRUE(start.ok() && end.ok());
  ASSERT_TRUE(start->record(nullptr).ok());
  Status launched = kernel.launch(in.ptrs, out.ptrs);
  ASSERT_TRUE(launched.ok()) << launched.error().message;
  ASSERT_TRUE(end->record(nullptr).ok());
  Status synced = end->synchronize();
  ASSERT_TRUE(synced.ok()) << synced.error().message;
  auto ms = elapsed_ms(*start, *end);

  bool all_dense = true;
  for (const Output& o : g.outputs) all_dense = all_dense && g.node(o.value).type.numel() <= kDenseLimit;
  std::vector<std::vector<double>> dense;
  if (all_dense) {
    auto ref = evaluate_reference(g, host_inputs);
    ASSERT_TRUE(ref.ok()) << ref.error().str();
    dense = ref.take();
  }

  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorType& type = g.node(g.outputs[i].value).type;
    std::vector<uint8_t> bytes(out.buffers[i].size());
    ASSERT_TRUE(out.buffers[i].download(bytes.data(), bytes.size()).ok());
    EXPECT_EQ(count_poisoned(bytes, dtype_size(type.dtype)), 0)
        << "output " << g.outputs[i].name << " has elements the kernel never wrote";
    HostTensor result = from_device_bytes(type, bytes.data());

    Comparison c;
    if (all_dense) {
      c = compare_outputs(result.data.data(), dense[i].data(), type.numel(), g.precision);
    } else {
      std::vector<int64_t> samples = pick_samples(type.numel(), kSamples, kSeed + i);
      auto ref = evaluate_reference_at(g, host_inputs, static_cast<int>(i), samples);
      ASSERT_TRUE(ref.ok()) << ref.error().str();
      c = compare_outputs(result.data.data(), ref->data(), samples, g.precision);
    }
    std::cout << "[ " << name << " ] output " << g.outputs[i].name << " " << type.str() << ": "
              << c.summary() << (all_dense ? " (dense)" : " (sampled)") << ", kernel "
              << kernel.name() << " " << (ms.ok() ? *ms : -1.f) << " ms (first launch)\n";
    EXPECT_TRUE(c.pass) << name << " output " << g.outputs[i].name << ": " << c.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, GpuExamples, ::testing::ValuesIn(example_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string id = info.param;
                           for (char& c : id)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return id;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuExamples);

// The Engine's cache and launch checks with a real generated kernel.
TEST(GpuEngine, RecompileHitsTheCacheAndBadLaunchesAreErrors) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: " << gpu_unavailable_reason();
  auto g = load_spec_file((fs::path(FUSEJIT_SOURCE_DIR) / "tests/specs/seed2_small.yaml").string());
  ASSERT_TRUE(g.ok()) << g.error().str();
  Engine engine;
  auto a = engine.compile(*g);
  ASSERT_TRUE(a.ok()) << a.error().str();
  auto b = engine.compile(*g);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(engine.cache_stats().compiles, 1u);
  EXPECT_EQ(engine.cache_stats().hits, 1u);

  CompileOptions no_line_info;
  no_line_info.line_info = false;  // another NVRTC option list: another key
  auto c = engine.compile(*g, no_line_info);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(engine.cache_stats().compiles, 2u);

  auto arch = Engine::device_arch();
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ((*a)->arch(), *arch);
  auto cubin = engine.compile_cubin(*g, "sm_80");
  ASSERT_TRUE(cubin.ok()) << cubin.error().str();

  Status s = (*a)->launch({}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("expects"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace fusejit
