// CPU (no GPU): a reduction over a conv's output pixels (global_avg_pool;
// sum, mean, max, min over [2, 3]) runs as per-channel partials from the conv
// epilogue (tiles of one image's pixels) plus one row-finish kernel: two
// kernels, the conv output never stored, every variant compiling for sm_80
// and sm_90a on the FFMA and mma.sync mainloops; sums add into one zeroed
// f32 per (image, channel) atomically unless atomic_partials=0. On sm_90a
// with spatial_cluster=auto|N, halo-patch convs finish the reduction in the
// kernel instead (clusters over each image's tiles: one kernel). Other
// consumers of the conv output keep it stored. GPU: gpu_conv_spatial_test.cpp.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "tests/compile_jobs.h"
#include "tests/conv_spatial_cases.h"

namespace fusejit {
namespace {

using test_util::compile_all;
using test_util::CompileJob;

TEST(CodegenConvSpatial, PartialsFromTheConvEpilogue) {
  std::vector<CompileJob> jobs;
  int clusters = 0;
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::F16})
    for (const testing::ConvSpatialCase& c : testing::conv_spatial_cases())
      for (const char* arch : {"sm_80", "sm_90a"})
        for (const char* config : {"", "mainloop=ffma", "mainloop=mma", "atomic_partials=0", "spatial_cluster=auto",
                                   "mainloop=mma,spatial_cluster=auto", "mainloop=mma,spatial_cluster=8"}) {
          if (std::string(config).rfind("mainloop=ffma", 0) == 0 && p != Precision::FP32) continue;
          const std::string label = c.label + " " + std::string(precision_name(p)) + " " + arch + " '" + config + "'";
          auto g = testing::conv_spatial_chain(p, c);
          ASSERT_TRUE(g) << label << ": " << g.error().str();
          auto prog = generate_program(*g, {arch, config});
          ASSERT_TRUE(prog.ok()) << label << ": " << prog.error().str();
          // With spatial_cluster, sm_90 halo-patch convs finish the reduction in the kernel, by clusters over
          // each image's tiles (pass_spatial_cluster.cpp): one kernel, no scratch, nothing added atomically.
          const bool halo = prog->plan_text.find(" from halo patches, ") != std::string::npos;  // the tile line
          const bool cluster = prog->plan_text.find("finished in the conv kernel: clusters of") != std::string::npos;
          EXPECT_EQ(cluster, std::string(arch) == "sm_90a" && halo &&
                                 std::string(config).find("spatial_cluster=") != std::string::npos)
              << label << "\n" << prog->plan_text;
          if (cluster) {
            ++clusters;
            EXPECT_EQ(prog->launches.size(), 1u) << label << "\n" << prog->plan_text;
            EXPECT_TRUE(prog->scratch.empty()) << label << "\n" << prog->plan_text;
            EXPECT_NE(prog->source.find("fj::finish_column_fold<SpatialOp, Tile::BN, kImageCluster>"), std::string::npos)
                << label;
            const int size = prog->launches[0].cluster;  // blocks an image: at most 16 (over 8: non-portable)
            EXPECT_TRUE(size >= 1 && size <= 16) << label << ": " << size;
            if (std::string(config).find("spatial_cluster=8") != std::string::npos) EXPECT_EQ(size, 8) << label;
            EXPECT_NE(prog->source.find("__cluster_dims__(" + std::to_string(size) + ", 1, 1)"), std::string::npos)
                << label;
            EXPECT_EQ(prog->source.find("fj::red_add_keep_in_l2("), std::string::npos) << label;
            jobs.push_back({label, arch, prog->name, prog->source});
            continue;
          }
          ASSERT_EQ(prog->launches.size(), 2u) << label << "\n" << prog->plan_text;
          EXPECT_NE(prog->plan_text.find("partly fused: each tile (pixels of one image)"), std::string::npos)
              << label << "\n" << prog->plan_text;
          ASSERT_EQ(prog->scratch.size(), 1u) << label << "\n" << prog->plan_text;  // the partials, not the conv
          // Sums add atomically into one f32 per (image, channel), zeroed (pass_spatial_atomics.cpp); max / min
          // and atomic_partials=0 keep per-tile partials in a fixed order.
          const bool atomic = c.op != "max" && c.op != "min" && std::string(config) != "atomic_partials=0";
          if (atomic) {
            EXPECT_NE(prog->scratch[0].what.find("added atomically"), std::string::npos) << prog->scratch[0].what;
            EXPECT_TRUE(prog->scratch[0].zeroed) << label;
            EXPECT_EQ(prog->scratch[0].bytes, c.x[0] * c.w[0] * 4) << label;
            EXPECT_NE(prog->source.find("fj::red_add_keep_in_l2("), std::string::npos) << label;
            EXPECT_NE(prog->plan_text.find("reads (and zeroes) the atomic sums"), std::string::npos) << prog->plan_text;
          } else {
            EXPECT_NE(prog->scratch[0].what.find("per-tile partials"), std::string::npos) << prog->scratch[0].what;
            EXPECT_FALSE(prog->scratch[0].zeroed) << label;
            EXPECT_LT(prog->scratch[0].bytes, c.x[0] * c.w[0] * 4 * 64) << label;
            EXPECT_EQ(prog->source.find("fj::red_add_keep_in_l2("), std::string::npos) << label;
          }
          jobs.push_back({label, arch, prog->name, prog->source});
        }
  EXPECT_GE(clusters, 40);  // every case on halo patches with mainloop=mma, each precision, two configs
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// Before sm_80 (the SIMT conv, no L2 cache hints): the atomic sums compile as plain atomicAdd.
TEST(CodegenConvSpatial, AtomicSumsCompileBeforeSm80) {
  std::vector<CompileJob> jobs;
  for (const testing::ConvSpatialCase& c : testing::conv_spatial_cases()) {
    if (c.op == "max" || c.op == "min") continue;
    auto g = testing::conv_spatial_chain(Precision::FP32, c);
    ASSERT_TRUE(g) << c.label << ": " << g.error().str();
    auto prog = generate_program(*g, {"sm_75", ""});
    ASSERT_TRUE(prog.ok()) << c.label << ": " << prog.error().str();
    EXPECT_NE(prog->source.find("fj::red_add_keep_in_l2("), std::string::npos) << c.label;
    jobs.push_back({c.label + " sm_75", "sm_75", prog->name, prog->source});
  }
  for (const std::string& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(CodegenConvSpatial, OtherConsumersKeepTheConvOutput) {
  GraphBuilder g(Precision::FP32, "conv_spatial_and_output");
  auto x = g.input("x", {2, 4, 10, 10});
  auto y = g.conv2d(x, g.input("w", {8, 4, 3, 3})).relu();
  g.output("pooled", y.global_avg_pool());
  g.output("y", y);  // the conv-shaped result is an output too
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  auto prog = generate_program(*graph, {"sm_90a", ""});
  ASSERT_TRUE(prog.ok()) << prog.error().str();
  EXPECT_NE(prog->plan_text.find("not fused into the epilogue: other consumers need the full conv-shaped result"),
            std::string::npos)
      << prog->plan_text;
  auto off = generate_program(*graph, {"sm_90a", "fuse_reductions=0"});
  ASSERT_TRUE(off.ok()) << off.error().str();
  EXPECT_EQ(off->plan_text.find("partly fused"), std::string::npos) << off->plan_text;
}

}  // namespace
}  // namespace fusejit
