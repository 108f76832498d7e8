// The Engine without a GPU: every example's generated program compiles to
// CUBIN through NVRTC (codegen + templates + NVRTC options together), and
// "auto" needs a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "compiler/program.h"
#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> example_files() {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(FUSEJIT_SOURCE_DIR) / "examples", ec))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(RuntimeEngine, EveryExampleCompilesToCubin) {
  auto files = example_files();
  ASSERT_FALSE(files.empty());
  Engine engine;
  // One thread per example: also exercises concurrent NVRTC compiles.
  std::vector<std::string> failures(files.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < files.size(); ++i) {
    threads.emplace_back([&, i] {
      auto g = load_spec_file(files[i].string());
      if (!g) return void(failures[i] = g.error().str());
      auto program = engine.emit(*g, CompileOptions{.arch = "sm_90a"});
      if (!program) return void(failures[i] = "emit: " + program.error().str());
      if (program->launches.empty()) return void(failures[i] = "emit: no launches");
      auto cubin = engine.compile_cubin(*g, "sm_90a");
      if (!cubin) return void(failures[i] = "compile_cubin: " + cubin.error().str());
      if (cubin->cubin.size() < 4 || std::string(cubin->cubin.data() + 1, 3) != "ELF")
        failures[i] = "not an ELF CUBIN";
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < files.size(); ++i)
    EXPECT_EQ(failures[i], "") << files[i].filename().string();
  EXPECT_EQ(engine.cache_stats().compiles, 0u);  // compile_cubin is not cached
}

TEST(RuntimeEngine, ArchChecks) {
  auto files = example_files();
  ASSERT_FALSE(files.empty());
  auto g = load_spec_file(files.front().string());
  ASSERT_TRUE(g.ok()) << g.error().str();
  Engine engine;
  auto bad = engine.compile_cubin(*g, "sm_1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unsupported arch 'sm_1'"), std::string::npos);
  EXPECT_FALSE(engine.emit(*g, CompileOptions{.arch = "sm_1"}).ok());
  if (!gpu_available()) {
    auto autoarch = engine.compile_cubin(*g, "auto");
    ASSERT_FALSE(autoarch.ok());
    EXPECT_NE(autoarch.error().message.find("arch 'auto' needs a CUDA device"), std::string::npos)
        << autoarch.error().message;
    EXPECT_TRUE(engine.emit(*g).ok());  // emit falls back to sm_90a
  }
}

}  // namespace
}  // namespace fusejit
