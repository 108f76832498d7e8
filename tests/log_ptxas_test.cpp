// The logging facility (FUSEJIT_LOG levels, filtering, sink) and the ptxas
// -v info parser behind CompileOptions::resource_usage. No GPU needed.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "fusejit/cubin.h"
#include "runtime/log.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

TEST(Log, ParsesLevelNames) {
  EXPECT_EQ(log::parse_level("error"), log::Level::Error);
  EXPECT_EQ(log::parse_level("warn"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("WARNING"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("Info"), log::Level::Info);
  EXPECT_EQ(log::parse_level("debug"), log::Level::Debug);
  EXPECT_FALSE(log::parse_level(""));
  EXPECT_FALSE(log::parse_level("verbose"));
  EXPECT_FALSE(log::parse_level("info "));
}

// Captures messages for the test's duration; restores the level and sink.
struct Capture {
  std::mutex mu;
  std::vector<std::pair<log::Level, std::string>> got;
  log::Level saved = log::level();
  Capture() {
    log::set_sink([this](log::Level l, const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      got.emplace_back(l, m);
    });
  }
  ~Capture() {
    log::set_sink(nullptr);
    log::set_level(saved);
  }
};

TEST(Log, FiltersBelowTheLevel) {
  Capture c;
  log::set_level(log::Level::Warn);
  EXPECT_TRUE(log::enabled(log::Level::Error));
  EXPECT_TRUE(log::enabled(log::Level::Warn));
  EXPECT_FALSE(log::enabled(log::Level::Info));
  log::error("e");
  log::warn("w");
  log::info("i");
  log::debug("d");
  ASSERT_EQ(c.got.size(), 2u);
  EXPECT_EQ(c.got[0], std::make_pair(log::Level::Error, std::string("e")));
  EXPECT_EQ(c.got[1], std::make_pair(log::Level::Warn, std::string("w")));

  c.got.clear();
  log::set_level(log::Level::Debug);
  log::info("i");
  log::debug("d");
  EXPECT_EQ(c.got.size(), 2u);
  log::set_level(log::Level::Error);
  log::warn("w");
  EXPECT_EQ(c.got.size(), 2u);
}

TEST(Log, ConcurrentWritersLoseNothing) {
  Capture c;
  log::set_level(log::Level::Info);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 100; ++i) log::info("x");
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.got.size(), 800u);
}

TEST(Log, NvrtcCompileLogsItsTime) {
  Capture c;
  log::set_level(log::Level::Info);
  NvrtcOptions opts;
  opts.arch = "sm_80";
  auto r = compile_to_cubin("extern \"C\" __global__ void fj_log_k(float* y) { y[0] = 1.0f; }",
                            "fj_log_k", opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(c.got.empty());
  EXPECT_EQ(c.got.back().first, log::Level::Info);
  EXPECT_NE(c.got.back().second.find("nvrtc fj_log_k for sm_80: "), std::string::npos) << c.got.back().second;
  EXPECT_NE(c.got.back().second.find(" ms"), std::string::npos);
}

const char* kPtxasLog = R"(ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'fj_gemm_relu' for 'sm_90a'
ptxas info    : Function properties for fj_gemm_relu
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 16 bytes cumulative stack size, 33280 bytes smem, 408 bytes cmem[0]
ptxas info    : Compiling entry function 'fj_pool' for 'sm_90a'
ptxas info    : Function properties for fj_pool
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 380 bytes cmem[0]
)";

TEST(PtxasInfo, ParsesEachEntryFunction) {
  auto k = parse_ptxas_info(kPtxasLog);
  ASSERT_EQ(k.size(), 2u);  // the device function _Z6helperf is not a kernel
  EXPECT_EQ(k[0].function, "fj_gemm_relu");
  EXPECT_EQ(k[0].registers, 168);
  EXPECT_EQ(k[0].shared_bytes, 33280);
  EXPECT_EQ(k[0].stack_bytes, 16);
  EXPECT_EQ(k[0].spill_stores, 8);
  EXPECT_EQ(k[0].spill_loads, 4);
  EXPECT_EQ(k[0].constant_bytes, 408);
  EXPECT_EQ(k[1].function, "fj_pool");
  EXPECT_EQ(k[1].registers, 12);
  EXPECT_EQ(k[1].shared_bytes, 0);
  EXPECT_EQ(k[1].constant_bytes, 380);
}

TEST(PtxasInfo, IgnoresOtherText) {
  EXPECT_TRUE(parse_ptxas_info("").empty());
  EXPECT_TRUE(parse_ptxas_info("warning: something\nUsed 3 registers\n").empty());
  auto k = parse_ptxas_info("ptxas info : Function properties for f\nptxas info : Used registers\n");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].registers, 0);
}

TEST(PtxasInfo, FromARealNvrtcCompile) {
  NvrtcOptions opts;
  opts.arch = "sm_90a";
  opts.extra = {"--ptxas-options=-v"};
  auto r = compile_to_cubin(
      "extern \"C\" __global__ void fj_res_k(float* y) { __shared__ float s[64];"
      " s[threadIdx.x] = y[threadIdx.x]; __syncthreads(); y[threadIdx.x] = s[63 - threadIdx.x]; }",
      "fj_res_k", opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto k = parse_ptxas_info(r->log);
  ASSERT_EQ(k.size(), 1u) << r->log;
  EXPECT_EQ(k[0].function, "fj_res_k");
  EXPECT_GT(k[0].registers, 0);
  EXPECT_EQ(k[0].shared_bytes, 256);
}

}  // namespace
}  // namespace fusejit
