// NVRTC: CUDA C++ -> CUBIN without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/embedded_templates.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"

namespace fusejit {
namespace {

const char* kSaxpy = R"(
extern "C" __global__ void fj_test_saxpy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + y[i];
}
)";

bool is_elf(const std::vector<char>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
         bytes[3] == 'F';
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(RuntimeNvrtc, CompilesToCubinForEachArch) {
  for (const char* arch : {"sm_80", "sm_89", "sm_90a"}) {
    NvrtcOptions opts;
    opts.arch = arch;
    auto r = compile_to_cubin(kSaxpy, "fj_test_saxpy", opts);
    ASSERT_TRUE(r.ok()) << arch << ": " << r.error().message;
    EXPECT_TRUE(is_elf(r->cubin)) << arch;
    EXPECT_TRUE(contains(r->options, std::string("--gpu-architecture=") + arch));
    EXPECT_TRUE(contains(r->options, "-std=c++17"));
    EXPECT_TRUE(contains(r->options, "-default-device"));
    EXPECT_TRUE(contains(r->options, "-lineinfo"));
    EXPECT_FALSE(contains(r->options, "--use_fast_math"));
  }
}

TEST(RuntimeNvrtc, OptionsFollowRequest) {
  NvrtcOptions opts;
  opts.arch = "sm_80";
  opts.line_info = false;
  opts.extra = {"-DFJ_TEST_EXTRA=1"};
  auto r = compile_to_cubin(kSaxpy, "fj_test_saxpy", opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(contains(r->options, "-lineinfo"));
  EXPECT_EQ(r->options.back(), "-DFJ_TEST_EXTRA=1");
  EXPECT_EQ(r->options, nvrtc_option_list(opts));
}

TEST(RuntimeNvrtc, HalfAndBfloat16HeadersAreFound) {
  // NVRTC has no built-in <cuda_fp16.h>; the toolkit include dir must be found.
  ASSERT_FALSE(cuda_include_dir().empty());
  const char* src = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void fj_test_half(const __half* a, const __nv_bfloat16* b, float* out) {
  out[threadIdx.x] = __half2float(a[threadIdx.x]) + __bfloat162float(b[threadIdx.x]);
}
)";
  NvrtcOptions opts;
  opts.arch = "sm_80";
  auto r = compile_to_cubin(src, "fj_test_half", opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(is_elf(r->cubin));
}

TEST(RuntimeNvrtc, EmbeddedTemplatesAreIncludable) {
  // Every templates/*.cuh is handed to NVRTC as an in-memory header; each must
  // compile on its own (a template that needs another must include it).
  ASSERT_FALSE(embedded_templates().empty());
  for (const EmbeddedFile& file : embedded_templates()) {
    const std::string& include = file.name;
    EXPECT_EQ(include.rfind("fusejit/", 0), 0u) << include;
    std::string src = "#include \"" + include + "\"\n" +
                      "extern \"C\" __global__ void fj_test_empty() {}\n";
    NvrtcOptions opts;
    opts.arch = "sm_90a";
    auto r = compile_to_cubin(src, "fj_test_include", opts);
    EXPECT_TRUE(r.ok()) << include << ": " << r.error().message;
  }
}

TEST(RuntimeNvrtc, SyntaxErrorReportsLogAndSavesSource) {
  std::string src = "extern \"C\" __global__ void fj_test_broken(float* x) { x[0] = ; }\n";
  NvrtcOptions opts;
  opts.arch = "sm_80";
  auto r = compile_to_cubin(src, "fj_test_broken", opts);
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.error().message;
  EXPECT_NE(msg.find("fj_test_broken"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected an expression"), std::string::npos) << msg;  // from the log

  const std::string marker = "source saved to ";
  size_t at = msg.find(marker);
  ASSERT_NE(at, std::string::npos) << msg;
  std::string path = msg.substr(at + marker.size(), msg.find('\n', at) - at - marker.size());
  EXPECT_NE(path.find("fusejit-failed-fj_test_broken-"), std::string::npos) << path;
  std::ifstream saved(path);
  ASSERT_TRUE(saved.good()) << path;
  std::stringstream text;
  text << saved.rdbuf();
  EXPECT_EQ(text.str(), src);
  std::filesystem::remove(path);
}

TEST(RuntimeNvrtc, UnsupportedArchIsACleanError) {
  NvrtcOptions opts;
  opts.arch = "sm_1";
  auto r = compile_to_cubin(kSaxpy, "fj_test_saxpy", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unsupported arch 'sm_1'"), std::string::npos)
      << r.error().message;
  for (const char* bad : {"", "sm_", "sm_80a", "sm_90b", "compute_90", "sm_99", "sm_9000", "90"})
    EXPECT_FALSE(check_arch(bad).ok()) << bad;
  for (const char* good : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"})
    EXPECT_TRUE(check_arch(good).ok()) << good << ": " << check_arch(good).error().message;
}

TEST(RuntimeNvrtc, ConcurrentCompilesOfSeparatePrograms) {
  constexpr int kThreads = 4;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &errors] {
      std::string src = std::string(kSaxpy) + "extern \"C\" __global__ void fj_test_k" +
                        std::to_string(t) + "(float* x) { x[0] = " + std::to_string(t) + "; }\n";
      NvrtcOptions opts;
      opts.arch = t % 2 ? "sm_80" : "sm_90a";
      auto r = compile_to_cubin(src, "fj_test_thread" + std::to_string(t), opts);
      if (!r.ok()) errors[t] = r.error().message;
      else if (!is_elf(r->cubin)) errors[t] = "not an ELF CUBIN";
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
}

TEST(RuntimeNvrtc, VersionIsReported) {
  std::string v = nvrtc_version();
  ASSERT_NE(v.find('.'), std::string::npos) << v;
  EXPECT_GE(std::stoi(v), 11) << v;
}

}  // namespace
}  // namespace fusejit
