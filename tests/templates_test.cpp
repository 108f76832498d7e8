// Each templates/*.cuh compiles on its own with nvcc (included first in a tiny
// .cu that instantiates what it declares), for sm_80 (the Hopper-only
// headers for sm_90a). Skipped without nvcc.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "tests/template_instantiations.h"

namespace {

namespace fs = std::filesystem;
const char* kNvcc = "/usr/local/cuda/bin/nvcc";
using fusejit::testing::template_instantiations;

TEST(Templates, EveryTemplateCompilesStandaloneWithNvcc) {
  if (!fs::exists(kNvcc)) GTEST_SKIP() << kNvcc << " not found";
  const fs::path templates = fs::path(FUSEJIT_SOURCE_DIR) / "templates";
  const fs::path dir = fs::path(FUSEJIT_BINARY_DIR) / "templates_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "include");
  fs::create_directory_symlink(templates, dir / "include" / "fusejit");

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(templates))
    if (e.path().extension() == ".cuh") files.push_back(e.path().filename().string());
  for (const std::string& f : files) EXPECT_TRUE(template_instantiations().count(f)) << f << " has no instantiation test";

  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      auto it = template_instantiations().find(files[i]);
      if (it == template_instantiations().end()) continue;
      const fs::path cu = dir / (files[i] + ".cu"), log = dir / (files[i] + ".log");
      std::ofstream(cu) << "#include \"fusejit/" << files[i] << "\"\n" << it->second << "\n";
      const bool hopper = files[i] == "gemm_wgmma.cuh" || files[i] == "wgmma_ops.cuh" || files[i] == "conv_wgmma.cuh" ||
                          files[i] == "conv_wgmma_halo.cuh" || files[i] == "conv_wgmma_store.cuh" ||
                          files[i] == "wgmma_tma_store.cuh" || files[i] == "wgmma_swap_ab.cuh" ||
                          files[i] == "wgrad_swap_ab.cuh" || files[i] == "wgmma_row_cluster.cuh" ||
                          files[i] == "wgmma_sm90.cuh" || files[i] == "epilogue_staged.cuh" || files[i] == "epilogue_norm.cuh" ||
                          files[i] == "cluster_sm90.cuh" || files[i] == "conv_spatial_cluster.cuh";  // (on wgmma tiles)
      const std::string cmd = std::string(kNvcc) + (hopper ? " -gencode=arch=compute_90a,code=sm_90a" : " -arch=sm_80") + " -std=c++17 -Werror all-warnings -I" +
                              (dir / "include").string() + " -c " + cu.string() + " -o " +
                              (dir / (files[i] + ".o")).string() + " > " + log.string() + " 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        std::ifstream in(log);
        std::string text((std::istreambuf_iterator<char>(in)), {});
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(files[i] + ":\n" + text);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

}  // namespace
