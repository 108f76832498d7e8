// The sm_90a wgmma mainloop (no GPU needed): when the planner picks it and
// why not, its configs and their errors, and the CUBINs NVRTC makes of it
// (no spills in the default configs; HGMMA in the SASS where cuobjdump exists).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/codegen.h"
#include "compiler/plan.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/compile_jobs.h"
#include "tests/wgmma_chains.h"

namespace fusejit {
namespace {

using test_util::generate;
using test_util::linear_chain;
using test_util::matmul_chain;
using test_util::operand_type;

TEST(CodegenWgmma, PlannerPicksWgmmaPerPrecision) {
  const std::pair<Precision, std::string> modes[] = {
      {Precision::BF16, "bf16"}, {Precision::F16, "f16"}, {Precision::TF32, "tf32"}, {Precision::FP32, "f32x3"}};
  for (const auto& [p, kind] : modes) {
    Program prog = generate(linear_chain(p, 2048, 512, 384, "", operand_type(p)));  // enough tiles: no split-K
    EXPECT_NE(prog.plan_text.find("wgmma " + kind), std::string::npos) << prog.plan_text;
    EXPECT_EQ(prog.name, "fj_linear_wgmma_" + kind + "_add_relu");
    // 3xTF32: the split kernel first, and the residuals' maps after x's and w's.
    const size_t anchor = kind == "f32x3" ? 1 : 0, operand_maps = kind == "f32x3" ? 4 : 2;
    ASSERT_EQ(prog.launches.size(), anchor + 1);
    const LaunchSpec& l = prog.launches[anchor];
    // x, w (and their residuals); bias + relu is cheap: y by TMA stores too (auto), but not for 3xTF32.
    ASSERT_EQ(l.tensor_maps.size(), operand_maps + (kind == "f32x3" ? 0 : 1));
    for (const TensorMapSpec& m : l.tensor_maps) EXPECT_TRUE(m.swizzle128);
    const Program global = generate(linear_chain(p, 2048, 512, 384, "", operand_type(p)), "sm_90a", "tma_store=0");
    EXPECT_EQ(global.launches.at(anchor).tensor_maps.size(), operand_maps);
    const Program bulk = generate(linear_chain(p, 2048, 512, 384, "", operand_type(p)), "sm_90a", "tma_store=1");
    ASSERT_EQ(bulk.launches.at(anchor).tensor_maps.size(), operand_maps + 1);  // and y's TMA-stored tiles
    const TensorMapSpec& out = bulk.launches[anchor].tensor_maps[operand_maps];
    EXPECT_TRUE(out.swizzle128);  // swizzled 128-byte store slots
    EXPECT_EQ(out.buffer, (BufferRef{BufferKind::Output, 0}));
    EXPECT_EQ(out.cols, 384);
    EXPECT_GT(l.shared_bytes, 48u * 1024);
    EXPECT_EQ(l.block[0] % 128, 0u);
    EXPECT_NE(prog.source.find("__grid_constant__ fj::TmaDescriptor"), std::string::npos);
  }
}

// fp32 on wgmma (3xTF32): a split kernel writes x's and w's TF32 residuals to
// scratch, and the anchor's producer loads them through maps tiled like the
// operands'.
TEST(CodegenWgmma, ThreeTf32SplitsTheOperandsFirst) {
  Program prog = generate(linear_chain(Precision::FP32, 2048, 512, 384, "", DType::F32), "sm_90a", "wgmma_tile=128x64x3");
  ASSERT_EQ(prog.launches.size(), 2u) << prog.plan_text;
  const LaunchSpec& split = prog.launches[0];
  EXPECT_EQ(split.kernel, "fj_split_tf32_operands");
  EXPECT_TRUE(split.operand_staging);
  EXPECT_FALSE(prog.launches[1].operand_staging);
  ASSERT_EQ(prog.scratch.size(), 2u) << prog.plan_text;
  EXPECT_EQ(prog.scratch[0].bytes, 2048 * 512 * 4);
  EXPECT_EQ(prog.scratch[1].bytes, 384 * 512 * 4);
  for (const ScratchSpec& s : prog.scratch) EXPECT_EQ(s.what.rfind("3xTF32 residual of", 0), 0u) << s.what;
  const std::vector<BufferRef> args = {{BufferKind::Input, 0}, {BufferKind::Input, 1}, {BufferKind::Scratch, 0},
                                       {BufferKind::Scratch, 1}};
  EXPECT_EQ(split.args, args);
  for (const AlignedBuffer& a : split.aligned) EXPECT_EQ(a.bytes, 16);  // float4 copies
  EXPECT_EQ(split.aligned.size(), 4u);
  const auto& maps = prog.launches[1].tensor_maps;
  ASSERT_EQ(maps.size(), 4u);  // x, w, then their residuals
  const BufferRef buffers[] = {{BufferKind::Input, 0}, {BufferKind::Input, 1}, {BufferKind::Scratch, 0},
                               {BufferKind::Scratch, 1}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(maps[i].buffer, buffers[i]) << i;
    EXPECT_EQ(maps[i].rows, i % 2 ? 384 : 2048) << i;
    EXPECT_EQ(maps[i].box_rows, i % 2 ? 64 : 128) << i;
    EXPECT_EQ(maps[i].cols, 512);
    EXPECT_EQ(maps[i].box_cols, 32);  // 128 bytes of fp32
    EXPECT_EQ(maps[i].elem_bytes, 4);
    EXPECT_TRUE(maps[i].swizzle128);
  }
  EXPECT_NE(prog.source.find("fj::tf32_residuals("), std::string::npos);
  EXPECT_NE(prog.plan_text.find("TF32 residual"), std::string::npos) << prog.plan_text;
  // Other precisions split nothing.
  EXPECT_EQ(generate(linear_chain(Precision::TF32, 2048, 512, 384, "", DType::F32)).launches.size(), 1u);
}

// An fp32 matmul B [K, N] on wgmma: the staging kernel transposes it to
// [N, K] (any N; tf32 wgmma reads K-major B only), and for 3xTF32 writes the
// residuals of A and of B^T; the anchor reads B^T like linear's W.
TEST(CodegenWgmma, Fp32MatmulReadsBTransposedByTheStagingKernel) {
  for (Precision p : {Precision::TF32, Precision::FP32}) {
    const bool split = p == Precision::FP32;
    Program prog = generate(matmul_chain(p, 2, 1024, 512, 301, "", DType::F32), "sm_90a", "mainloop=wgmma");
    ASSERT_EQ(prog.launches.size(), 2u) << prog.plan_text;
    const LaunchSpec& staging = prog.launches[0];
    EXPECT_EQ(staging.kernel, split ? "fj_split_tf32_operands_transpose_b" : "fj_transpose_b");
    EXPECT_TRUE(staging.operand_staging);
    EXPECT_EQ(prog.name, std::string("fj_matmul_wgmma_") + (split ? "f32x3" : "tf32") + "_add_relu");
    ASSERT_EQ(prog.scratch.size(), split ? 3u : 1u) << prog.plan_text;
    EXPECT_EQ(prog.scratch[0].bytes, 301 * 512 * 4);  // B^T
    const auto& maps = prog.launches[1].tensor_maps;
    ASSERT_EQ(maps.size(), split ? 4u : 2u);
    EXPECT_EQ(maps[0].buffer, (BufferRef{BufferKind::Input, 0}));
    EXPECT_EQ(maps[0].rows, 2 * 1024);  // a's leading dims flattened
    EXPECT_EQ(maps[1].buffer, (BufferRef{BufferKind::Scratch, 0}));  // B^T, K-major like linear's W
    EXPECT_EQ(maps[1].rows, 301);
    EXPECT_EQ(maps[1].cols, 512);
    if (split) {
      EXPECT_EQ(maps[2].buffer, (BufferRef{BufferKind::Scratch, 1}));  // A's residual
      EXPECT_EQ(maps[3].buffer, (BufferRef{BufferKind::Scratch, 2}));  // B^T's residual
      EXPECT_EQ(maps[3].rows, 301);
    }
    EXPECT_EQ(prog.source.find("kBNMajor=*/true"), std::string::npos) << "B^T is K-major";
    // One batch of B [K, N] (the conv's staging transposes many: codegen_conv_wgmma_test.cpp).
    const size_t call = prog.source.find("fj::transpose_batched<" + std::string(split ? "true" : "false") + ">(");
    ASSERT_NE(call, std::string::npos) << prog.source;
    EXPECT_NE(prog.source.find(", 1, kK, kN, blockIdx.x, kTransposeBlocks);", call), std::string::npos) << prog.source;
    // b [K, N] is read by plain loads: no alignment asked of it.
    for (const AlignedBuffer& a : staging.aligned) EXPECT_NE(a.buffer, (BufferRef{BufferKind::Input, 1}));
    auto cubin = compile_to_cubin(prog.source, prog.name, {"sm_90a", false, {}});
    EXPECT_TRUE(cubin.ok()) << (cubin.ok() ? "" : cubin.error().str());
  }
}

TEST(CodegenWgmma, TensorMapsDescribeTheOperands) {
  Program prog = generate(linear_chain(Precision::BF16, 100, 1000, 500, "", DType::BF16), "sm_90a", "wgmma_tile=64x128x3");
  ASSERT_EQ(prog.launches.size(), 1u);
  const auto& maps = prog.launches[0].tensor_maps;
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].buffer, (BufferRef{BufferKind::Input, 0}));
  EXPECT_EQ(maps[0].rows, 100);
  EXPECT_EQ(maps[0].cols, 1000);
  EXPECT_EQ(maps[0].box_rows, 64);
  EXPECT_EQ(maps[0].box_cols, 64);  // 128 bytes of bf16
  EXPECT_TRUE(maps[0].bf16);
  EXPECT_EQ(maps[1].buffer, (BufferRef{BufferKind::Input, 1}));
  EXPECT_EQ(maps[1].rows, 500);
  EXPECT_EQ(maps[1].box_rows, 128);
  EXPECT_EQ(prog.launches[0].grid[0], 2u * 4u);  // ceil(100/64) * ceil(500/128)
  EXPECT_EQ(prog.launches[0].block[0], 256u);    // producer + one consumer warpgroup
}

TEST(CodegenWgmma, SaysWhyNotWgmma) {
  auto plan_of = [](const Graph& g, const std::string& arch, const std::string& config = "") {
    return generate(g, arch, config).plan_text;
  };
  const Graph bf16 = linear_chain(Precision::BF16, 64, 64, 64, "", DType::BF16);
  EXPECT_NE(plan_of(bf16, "sm_80").find("not wgmma: the target is sm_80"), std::string::npos);
  EXPECT_NE(plan_of(bf16, "sm_90a", "mainloop=ffma").find("mainloop=ffma in the config"), std::string::npos);
  const std::string odd_k = plan_of(linear_chain(Precision::BF16, 64, 37, 64, "", DType::BF16), "sm_90a");
  EXPECT_NE(odd_k.find("TMA needs rows of a multiple of 16 bytes and K=37"), std::string::npos) << odd_k;
  const std::string tf32_matmul = plan_of(matmul_chain(Precision::TF32, 0, 64, 64, 64, "", DType::F32), "sm_90a");
  EXPECT_NE(tf32_matmul.find("wgmma tf32"), std::string::npos) << tf32_matmul;  // B as the register operand
  EXPECT_NE(tf32_matmul.find("B [K, N] as wgmma's register operand"), std::string::npos) << tf32_matmul;
  const std::string tf32_odd = plan_of(matmul_chain(Precision::TF32, 0, 64, 64, 63, "", DType::F32), "sm_90a");
  EXPECT_NE(tf32_odd.find("B [K, N] transposed to [N, K] in scratch first"), std::string::npos) << tf32_odd;
  const std::string odd_n = plan_of(matmul_chain(Precision::BF16, 0, 64, 64, 36), "sm_90a");
  EXPECT_NE(odd_n.find("not wgmma: TMA needs rows of a multiple of 16 bytes and B's N=36"), std::string::npos) << odd_n;
  const std::string batched_b = plan_of(*[] {
    GraphBuilder g(Precision::BF16, "matmul");
    auto a = g.input("a", {2, 64, 64}, DType::BF16);
    auto b = g.input("b", {2, 64, 64}, DType::BF16);
    g.output("y", g.matmul(a, b).relu());
    return g.build();
  }(), "sm_90a");
  EXPECT_NE(batched_b.find("not wgmma: matmul's B has batch dims"), std::string::npos) << batched_b;
  const std::string mma_tile = plan_of(matmul_chain(Precision::BF16, 0, 64, 64, 64), "sm_90a", "mma_tile=64x64x3");
  EXPECT_NE(mma_tile.find("not wgmma: mma_tile in the config"), std::string::npos) << mma_tile;
}

// A 16-bit matmul with one B [K, N] runs on wgmma, B read N-major (64-wide
// TMA columns), x's leading dims flattened into M; ragged shapes and tiles
// compile for sm_90a, row reductions (whole rows and per-tile partials) included.
TEST(CodegenWgmma, MatmulWithOneBRunsWgmmaNMajor) {
  std::vector<test_util::CompileJob> jobs;
  const int64_t shapes[][4] = {{0, 1, 64, 64}, {3, 100, 72, 48}, {0, 257, 96, 520}, {2, 129, 520, 264}};
  const char* tails[] = {"", "mean", "sum", "mean"};  // [3] x 48: whole rows; [2] x 264: partials (most configs)
  for (Precision p : {Precision::BF16, Precision::F16})
    for (int i = 0; i < 4; ++i)
      for (const char* config : {"", "wgmma_tile=64x64x4x8", "wgmma_tile=128x256x3x8"}) {
        const int64_t* sh = shapes[i];
        const std::string label = std::string(precision_name(p)) + " [" + std::to_string(sh[0]) + "] " +
                                  std::to_string(sh[1]) + "x" + std::to_string(sh[2]) + "x" + std::to_string(sh[3]) +
                                  " " + tails[i] + " '" + config + "'";
        Program prog =
            generate(matmul_chain(p, sh[0], sh[1], sh[2], sh[3], tails[i], operand_type(p)), "sm_90a", config);
        EXPECT_NE(prog.name.find("_wgmma_"), std::string::npos) << label << ": " << prog.name;
        EXPECT_NE(prog.plan_text.find("B [K, N] read N-major"), std::string::npos) << label << "\n" << prog.plan_text;
        ASSERT_GE(prog.launches.size(), 1u) << label;
        const auto& maps = prog.launches[0].tensor_maps;
        ASSERT_GE(maps.size(), 2u) << label;  // x, b (and the TMA-stored output's tiles)
        EXPECT_EQ(maps[0].rows, std::max<int64_t>(sh[0], 1) * sh[1]) << label;  // leading dims flattened
        EXPECT_EQ(maps[0].cols, sh[2]) << label;
        EXPECT_EQ(maps[1].rows, sh[2]) << label;  // B [K, N]: K rows of N
        EXPECT_EQ(maps[1].cols, sh[3]) << label;
        EXPECT_EQ(maps[1].box_rows, 64) << label;  // BK
        EXPECT_EQ(maps[1].box_cols, 64) << label;  // one 128-byte swizzle row of n
        jobs.push_back({label, "sm_90a", prog.name, prog.source});
      }
  for (const std::string& f : test_util::compile_all(jobs)) ADD_FAILURE() << f;
}

// Ping-pong (64-row tiles, two consumers taking turns) when the config asks;
// cooperative by default (measured faster on the H100), never for 3xTF32.
// 168, 176 and 192 columns where they cut a wave (K-major B only), valid in configs, never N-major or clustered.
TEST(CodegenWgmma, OddWidthTilesWhereTheyCutAWave) {
  for (Precision p : {Precision::BF16, Precision::TF32}) {
    // 264 tiles of 128x168: 2 whole waves on 132 SMs (176: 252 tiles, the same 2 waves of larger tiles)
    const Program mlp = generate(linear_chain(p, 512, 4096, 11008, "", operand_type(p)));
    EXPECT_NE(mlp.plan_text.find("tile 128x168, 5 stages"), std::string::npos) << mlp.plan_text;
    EXPECT_EQ(mlp.launches.at(0).grid[0], 264u);
    EXPECT_NE(mlp.source.find("fj::WgmmaTile<128, 168, 5"), std::string::npos);
    // 168 columns: bf16 outputs by TMA in unswizzled chunks of 56, fp32 staged in chunks of 56 (3 a tile)
    EXPECT_NE(mlp.source.find(p == Precision::BF16 ? "tma_pairs<2, kOutSlots, 56>" : "tile_pointwise_staged<56>"),
              std::string::npos) << mlp.source;
    auto cubin = compile_to_cubin(mlp.source, mlp.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << cubin->log;
  }
  // Ping-pong 64x168 at the most stages (7) leaves room for 24 columns a chunk (8-column groups dividing 168; 16
  // do not: a static_assert in NVRTC), with and without pairs.
  for (const char* config : {"wgmma_schedule=pingpong", "wgmma_schedule=pingpong,epilogue_pairs=1"}) {
    const Program pp = generate(linear_chain(Precision::F16, 512, 64, 11000, "", DType::F16), "sm_90a", config);
    EXPECT_NE(pp.plan_text.find("tile 64x168 ping-pong, 7 stages"), std::string::npos) << pp.plan_text;
    EXPECT_NE(pp.source.find("<24>(frag"), std::string::npos) << config << "\n" << pp.source;
    auto cubin = compile_to_cubin(pp.source, pp.name, {"sm_90a", false, {}});
    EXPECT_TRUE(cubin.ok()) << config << ": " << cubin.error().str();
  }
  // 168 columns in 2-block clusters: 84-row halves of B are not whole 8-row swizzle atoms, so boxes of 56 rows
  // (block 0 loads two, block 1 one).
  const Program odd_cluster = generate(linear_chain(Precision::BF16, 512, 4096, 11008, "", DType::BF16), "sm_90a",
                                       "wgmma_tile=128x168x4,wgmma_cluster=2");
  EXPECT_NE(odd_cluster.plan_text.find("tile 128x168, 4 stages, raster group 8, 2-block clusters sharing B"),
            std::string::npos)
      << odd_cluster.plan_text;
  ASSERT_GE(odd_cluster.launches.at(0).tensor_maps.size(), 2u);
  EXPECT_EQ(odd_cluster.launches.at(0).tensor_maps[1].box_rows, 56);
  auto odd_cubin = compile_to_cubin(odd_cluster.source, odd_cluster.name, {"sm_90a", false, {}});
  EXPECT_TRUE(odd_cubin.ok()) << odd_cubin.error().str();
  const Program square = generate(linear_chain(Precision::BF16, 4096, 4096, 4096, "", DType::BF16));
  EXPECT_EQ(square.plan_text.find("tile 128x176"), std::string::npos) << square.plan_text;
  const Program asked = generate(linear_chain(Precision::BF16, 512, 4096, 4096, "", DType::BF16), "sm_90a",
                                 "wgmma_tile=128x176x4,tma_store=1");
  EXPECT_NE(asked.plan_text.find("tile 128x176, 4 stages"), std::string::npos) << asked.plan_text;
  EXPECT_NE(asked.plan_text.find("neither whole 128-byte chunks"), std::string::npos) << "176 bf16 columns: no TMA stores";
  const Program three_chunks = generate(linear_chain(Precision::BF16, 512, 4096, 4096, "", DType::BF16), "sm_90a",
                                        "wgmma_tile=128x192x4");
  EXPECT_NE(three_chunks.plan_text.find("TMA bulk"), std::string::npos) << three_chunks.plan_text;
  auto matmul = generate_program(matmul_chain(Precision::BF16, 0, 512, 4096, 11008, "", DType::BF16),
                                 {"sm_90a", "wgmma_tile=128x176x4"});
  ASSERT_FALSE(matmul.ok());
  EXPECT_NE(matmul.error().str().find("64-column boxes"), std::string::npos) << matmul.error().str();
  const Program n_major = generate(matmul_chain(Precision::BF16, 0, 512, 4096, 11008, "", DType::BF16));
  EXPECT_EQ(n_major.plan_text.find("x176"), std::string::npos) << n_major.plan_text;
  // 2-block clusters on 176 columns (K-major B): each block loads 88 of B's rows (11 swizzle atoms), the last
  // column tile's past N zero-filled by TMA; compiled here, opt-in until timed on a GPU.
  const Program clustered = generate(linear_chain(Precision::BF16, 512, 4096, 11008, "", DType::BF16), "sm_90a",
                                     "wgmma_tile=128x176x4,wgmma_cluster=2");
  EXPECT_EQ(clustered.launches.at(0).cluster, 2) << clustered.plan_text;
  ASSERT_EQ(clustered.launches.at(0).tensor_maps.size(), 2u);
  EXPECT_EQ(clustered.launches.at(0).tensor_maps[1].box_rows, 88);
  auto cubin = compile_to_cubin(clustered.source, clustered.name, {"sm_90a", false, {"--ptxas-options=-v"}});
  ASSERT_TRUE(cubin.ok()) << cubin.error().str();
  EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << cubin->log;
  EXPECT_EQ(generate(linear_chain(Precision::BF16, 512, 4096, 11008, "", DType::BF16)).launches.at(0).cluster, 1)
      << "odd-width tiles take no clusters by default";
}

TEST(CodegenWgmma, PingPongWhenAsked) {
  const Graph g = linear_chain(Precision::BF16, 4096, 4096, 4096, "", DType::BF16);
  EXPECT_EQ(generate(g).plan_text.find("ping-pong"), std::string::npos);
  const Program big = generate(g, "sm_90a", "wgmma_schedule=pingpong");
  EXPECT_NE(big.plan_text.find("tile 64x256 ping-pong"), std::string::npos) << big.plan_text;
  EXPECT_EQ(big.launches.at(0).block[0], 384u);  // a producer and two consumer warpgroups
  EXPECT_NE(big.source.find("/*kPingPong=*/true"), std::string::npos);
  EXPECT_NE(big.source.find("frag.consumer() * kEpilogueFloats"), std::string::npos);
  const Program tf32 = generate(linear_chain(Precision::TF32, 4096, 4096, 4096), "sm_90a", "wgmma_schedule=pingpong");
  EXPECT_NE(tf32.plan_text.find("ping-pong"), std::string::npos) << tf32.plan_text;
  const Program asked = generate(g, "sm_90a", "wgmma_schedule=cooperative");
  EXPECT_EQ(asked.plan_text.find("ping-pong"), std::string::npos) << asked.plan_text;
  // 128x128 tiles, two per SM or more: ping-pong by default (not for 3xTF32).
  for (Precision p : {Precision::BF16, Precision::TF32}) {
    const Program wide = generate(linear_chain(p, 1024, 4096, 9472, "", operand_type(p)));  // 592 tiles
    EXPECT_NE(wide.plan_text.find("tile 128x128 ping-pong, 5 stages"), std::string::npos) << wide.plan_text;
  }
  EXPECT_EQ(generate(linear_chain(Precision::FP32, 512, 4096, 11008)).plan_text.find("ping-pong"), std::string::npos);
  const Program few = generate(linear_chain(Precision::BF16, 256, 4096, 11008, "", DType::BF16));  // 172 tiles
  EXPECT_EQ(few.plan_text.find("ping-pong"), std::string::npos) << few.plan_text;
  const Program forced = generate(linear_chain(Precision::BF16, 100, 1000, 500, "", DType::BF16), "sm_90a",
                                  "wgmma_schedule=pingpong");
  EXPECT_NE(forced.plan_text.find("ping-pong"), std::string::npos) << forced.plan_text;
  // 128-row ping-pong tiles (two wgmmas per k step and consumer) up to 128
  // columns; wider ones would need 256 accumulators per thread.
  const Program tall = generate(g, "sm_90a", "wgmma_schedule=pingpong,wgmma_tile=128x128x5x16");
  EXPECT_NE(tall.plan_text.find("tile 128x128 ping-pong"), std::string::npos) << tall.plan_text;
  EXPECT_NE(tall.source.find("fj::WgmmaTile<128, 128, 5, fj::MmaKind::BF16, /*kBNMajor=*/false, /*kPingPong=*/true>"),
            std::string::npos);
  cg::WgmmaConfig wide;
  wide.bm = 128;
  wide.bn = 256;
  wide.stages = 3;
  wide.pingpong = true;
  const Status bad = cg::validate_wgmma(wide, false);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bn must be at most 128, or 168"), std::string::npos) << bad.error().message;
}

// wgmma_cluster=2: clusters of two blocks on vertically adjacent tiles share
// B (each loads half of B's k-tile, multicast to both): __cluster_dims__ in
// the kernel, the launch's cluster, B's TMA box halved (K-major) or whole
// 64-column boxes split (N-major), the grid a multiple of 2; errors where the
// schedule cannot run it.
TEST(CodegenWgmma, TwoBlockClustersWhenAsked) {
  const Graph g = linear_chain(Precision::BF16, 1000, 520, 700, "", DType::BF16);
  EXPECT_EQ(generate(g).launches.at(0).cluster, 1);  // 24 tiles: not by default
  // By default for 16-bit GEMMs of a wave of tiles or more (not tf32: no gain measured).
  const Program big = generate(linear_chain(Precision::BF16, 4096, 4096, 4096, "", DType::BF16));
  EXPECT_EQ(big.launches.at(0).cluster, 2) << big.plan_text;
  EXPECT_NE(big.plan_text.find("raster group 16, 2-block clusters sharing B"), std::string::npos) << big.plan_text;
  EXPECT_EQ(generate(linear_chain(Precision::TF32, 4096, 4096, 4096)).launches.at(0).cluster, 1);
  // ... and not under a fused row reduction (measured 1-3% slower there).
  EXPECT_EQ(generate(linear_chain(Precision::BF16, 4096, 4096, 256, "logsumexp", DType::BF16)).launches.at(0).cluster, 1);
  EXPECT_EQ(generate(linear_chain(Precision::BF16, 4096, 4096, 4096, "", DType::BF16), "sm_90a", "wgmma_cluster=1")
                .launches.at(0).cluster, 1);
  const Program p = generate(g, "sm_90a", "wgmma_cluster=2,wgmma_tile=128x256x4");
  EXPECT_NE(p.plan_text.find("2-block clusters sharing B"), std::string::npos) << p.plan_text;
  const LaunchSpec& l = p.launches.at(0);
  EXPECT_EQ(l.cluster, 2);
  EXPECT_EQ(l.grid[0], 4u * 3u * 2u);  // 8 row tiles in 4 pairs x 3 column tiles, a block each
  EXPECT_NE(p.source.find("__cluster_dims__(2, 1, 1)"), std::string::npos);
  EXPECT_NE(p.source.find("/*kClusterM=*/2"), std::string::npos);
  ASSERT_EQ(l.tensor_maps.size(), 2u);
  EXPECT_EQ(l.tensor_maps[0].box_rows, 128);  // A: the block's own rows
  EXPECT_EQ(l.tensor_maps[1].box_rows, 128);  // B: half of the tile's 256 columns
  // Odd row tiles: the last pair's second block computes past M and stores nothing.
  const Program odd = generate(linear_chain(Precision::TF32, 257, 96, 130), "sm_90a", "wgmma_cluster=2");
  EXPECT_EQ(odd.launches.at(0).cluster, 2) << odd.plan_text;
  EXPECT_EQ(odd.launches.at(0).grid[0] % 2, 0u);
  // The default's ping-pong and split-K give way to the cooperative schedule, whole tiles.
  const Program pp = generate(linear_chain(Precision::BF16, 512, 4096, 11008, "", DType::BF16), "sm_90a", "wgmma_cluster=2");
  EXPECT_EQ(pp.plan_text.find("ping-pong"), std::string::npos) << pp.plan_text;
  const Program sk = generate(linear_chain(Precision::BF16, 32, 8192, 1024, "", DType::BF16), "sm_90a", "wgmma_cluster=2");
  EXPECT_EQ(sk.plan_text.find("split-K"), std::string::npos) << sk.plan_text;
  // matmul's bf16 B [K, N]: the 64-column boxes split between the blocks.
  const Program mm = generate(matmul_chain(Precision::BF16, 2, 300, 200, 384), "sm_90a",
                             "wgmma_cluster=2,wgmma_tile=128x128x4");
  EXPECT_NE(mm.source.find("/*kBNMajor=*/true, /*kPingPong=*/false, /*kClusterM=*/2"), std::string::npos) << mm.plan_text;
  for (const Program* prog : {&p, &odd, &mm}) {
    auto cubin = compile_to_cubin(prog->source, prog->name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << prog->name << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << prog->name << "\n" << cubin->log;
  }
  auto error_of = [](const Graph& graph, const std::string& config) {
    auto r = generate_program(graph, {"sm_90a", config});
    return r.ok() ? std::string("(no error)") : r.error().message;
  };
  EXPECT_NE(error_of(g, "wgmma_cluster=3").find("wgmma_cluster must be 1 or 2"), std::string::npos);
  EXPECT_NE(error_of(g, "wgmma_cluster=2,split_k=2").find("without split-K"), std::string::npos);
  EXPECT_NE(error_of(linear_chain(Precision::FP32, 4096, 4096, 4096), "wgmma_cluster=2").find("not 3xTF32"),
            std::string::npos);
  EXPECT_NE(error_of(matmul_chain(Precision::BF16, 0, 256, 256, 256), "wgmma_cluster=2,wgmma_tile=128x64x4")
                .find("at least 128 wide"),
            std::string::npos);
}

// tma_store=1: a pointwise epilogue writes its outputs from the accumulators
// to two swizzled shared-memory slots of BM rows x 128 bytes and out by TMA
// bulk stores, a chunk of columns at a time (a 128x256 tile keeps its four
// stages); a fused reduction, a ping-pong schedule, outputs of different
// element sizes or rows TMA cannot write keep global stores.
TEST(CodegenWgmma, TmaStoresForPointwiseEpilogues) {
  const Graph g = linear_chain(Precision::BF16, 4096, 4096, 4096, "", DType::BF16);
  EXPECT_EQ(generate(g, "sm_90a", "tma_store=0").launches.at(0).tensor_maps.size(), 2u);
  // auto (default): bias + relu is cheap; gelu is not (and keeps no note).
  const Program cheap = generate(g);
  EXPECT_EQ(cheap.launches.at(0).tensor_maps.size(), 3u);
  EXPECT_NE(cheap.plan_text.find("128x256, 4 stages"), std::string::npos) << cheap.plan_text;
  EXPECT_NE(cheap.source.find("cols0[tile_col];  // input 'b', staged for the tile's columns"), std::string::npos)
      << cheap.source;
  GraphBuilder gb(Precision::BF16, "gelu_chain");
  auto hg = gb.linear(gb.input("x", {4096, 4096}, DType::BF16), gb.input("w", {4096, 4096}, DType::BF16));
  gb.output("y", hg.add(gb.input("b", {4096}, DType::BF16)).gelu());
  const Program gelu = generate(*gb.build());
  EXPECT_EQ(gelu.launches.at(0).tensor_maps.size(), 2u);
  EXPECT_EQ(gelu.plan_text.find("TMA bulk stores"), std::string::npos) << gelu.plan_text;
  const Program bulk = generate(g, "sm_90a", "tma_store=1");
  EXPECT_NE(bulk.plan_text.find("out by TMA bulk stores"), std::string::npos) << bulk.plan_text;
  EXPECT_NE(bulk.plan_text.find("128x256, 4 stages"), std::string::npos) << bulk.plan_text;
  ASSERT_EQ(bulk.launches.at(0).tensor_maps.size(), 3u);
  const TensorMapSpec& y = bulk.launches[0].tensor_maps[2];
  EXPECT_EQ(y.rows, 4096);
  EXPECT_EQ(y.box_rows, 128);
  EXPECT_EQ(y.box_cols, 64);  // 128 bytes of bf16
  EXPECT_TRUE(y.swizzle128);
  EXPECT_EQ(y.elem_bytes, 2);
  // One output: its value per element, two columns per shared-memory store.
  EXPECT_NE(bulk.source.find("fj::tile_pointwise_tma_pairs<2, kOutSlots>(frag, m0, n0, kM, kN, out_tile0, kOutSlot,"),
            std::string::npos);
  EXPECT_EQ(bulk.source.find("fj_epilogue("), std::string::npos);
  EXPECT_NE(bulk.source.find("fj::sm90::tma_store_2d(tma_out0, out_tile0 + slot * kOutSlot, n0 + c0, m0);"),
            std::string::npos);
  // tma_slots: a ring of four slots (a whole 128x256 bf16 tile) beside three stages.
  const Program four = generate(g, "sm_90a", "tma_store=1,tma_slots=4,wgmma_tile=128x256x3");
  EXPECT_NE(four.plan_text.find("128x256, 3 stages, raster group 8, 4 TMA store slots"), std::string::npos)
      << four.plan_text;
  EXPECT_NE(four.source.find("kOutSlots = 4;"), std::string::npos);
  auto no_room = generate_program(g, {"sm_90a", "tma_store=1,tma_slots=8,wgmma_tile=128x256x4"});
  ASSERT_TRUE(no_room.ok()) << no_room.error().str();  // the ring keeps its stages: global stores
  EXPECT_NE(no_room->plan_text.find("do not fit beside a 4-stage ring"), std::string::npos) << no_room->plan_text;
  // fp32 outputs: 32-column chunks.
  const Program f32 = generate(linear_chain(Precision::TF32, 4096, 4096, 4096), "sm_90a", "tma_store=1");
  ASSERT_EQ(f32.launches.at(0).tensor_maps.size(), 3u);
  EXPECT_EQ(f32.launches[0].tensor_maps[2].box_cols, 32);
  EXPECT_NE(f32.source.find("fj::tile_pointwise_tma_pairs<4, kOutSlots>("), std::string::npos);
  // Two outputs (h and gelu(h)): the epilogue stores each element into both slots.
  GraphBuilder two(Precision::BF16, "two_outputs");
  auto h = two.linear(two.input("x", {2048, 512}, DType::BF16), two.input("w", {384, 512}, DType::BF16));
  two.output("h", h);
  two.output("y", h.gelu());
  const Program both = generate(*two.build(), "sm_90a", "tma_store=1");
  ASSERT_EQ(both.launches.at(0).tensor_maps.size(), 4u);
  EXPECT_NE(both.source.find("fj::tile_pointwise_tma<2, kOutSlots>(frag, m0, n0,"), std::string::npos) << both.source;
  EXPECT_NE(bulk.source.find("fj::tma_store_drain();"), std::string::npos);
  auto global_stores = [](const Program& p, const std::string& why) {
    EXPECT_NE(p.plan_text.find("global stores, not TMA bulk stores: " + why), std::string::npos) << p.plan_text;
    EXPECT_EQ(p.launches.at(0).tensor_maps.size(), 2u);
  };
  global_stores(generate(g, "sm_90a", "tma_store=1,wgmma_schedule=pingpong"), "the ping-pong schedule");
  global_stores(generate(*[] {  // y and its row sum: the sum is fused into the epilogue
    GraphBuilder b(Precision::BF16, "linear_and_sum");
    auto y = b.linear(b.input("x", {4096, 1024}, DType::BF16), b.input("w", {256, 1024}, DType::BF16)).relu();
    b.output("y", y);
    b.output("s", y.sum({-1}, true));
    return b.build();
  }(), "sm_90a", "tma_store=1"),
                "a reduction or pool");
  global_stores(generate(linear_chain(Precision::BF16, 512, 256, 100, "", DType::BF16), "sm_90a", "tma_store=1"),
                "TMA needs rows");
  auto bad = generate_program(g, {"sm_90a", "tma_store=2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tma_store must be 0, 1 or auto"), std::string::npos);
}

TEST(CodegenWgmma, ConfigErrorsAreClear) {
  const Graph g = linear_chain(Precision::BF16, 64, 37, 64, "", DType::BF16);
  auto forced = generate_program(g, {"sm_90a", "mainloop=wgmma"});
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.error().message.find("mainloop=wgmma, but TMA needs rows"), std::string::npos);
  const Graph ok = linear_chain(Precision::BF16, 64, 64, 64, "", DType::BF16);
  for (const char* bad : {"wgmma_tile=96x128x4", "wgmma_tile=128x512x4", "wgmma_tile=128x128x1", "wgmma_tile=128x128",
                          "wgmma_tile=128x256x8"}) {
    auto p = generate_program(ok, {"sm_90a", bad});
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) EXPECT_NE(p.error().message.find("codegen config"), std::string::npos) << p.error().message;
  }
  auto bad_schedule = generate_program(ok, {"sm_90a", "wgmma_schedule=pingpng"});
  ASSERT_FALSE(bad_schedule.ok());
  EXPECT_NE(bad_schedule.error().message.find("wgmma_schedule must be auto, cooperative or pingpong"),
            std::string::npos);
  auto tall = generate_program(ok, {"sm_90a", "wgmma_tile=128x256x3,wgmma_schedule=pingpong"});
  ASSERT_FALSE(tall.ok());
  EXPECT_NE(tall.error().message.find("bn must be at most 128, or 168"), std::string::npos) << tall.error().message;
  auto split = generate_program(linear_chain(Precision::FP32, 2048, 512, 384), {"sm_90a", "wgmma_schedule=pingpong"});
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.error().message.find("3xTF32 runs the cooperative schedule only"), std::string::npos)
      << split.error().message;
  auto mma = generate_program(ok, {"sm_90a", "mainloop=mma"});  // forced: the cp.async path
  ASSERT_TRUE(mma.ok()) << mma.error().message;
  EXPECT_NE(mma->name.find("_mma_bf16"), std::string::npos) << mma->name;
  // 3xTF32 keeps a second accumulator: at most 128 columns; and each stage holds the residual tiles.
  auto wide = generate_program(linear_chain(Precision::FP32, 64, 64, 64), {"sm_90a", "wgmma_tile=128x256x2"});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("bn must be at most 128"), std::string::npos) << wide.error().message;
  auto deep = generate_program(linear_chain(Precision::FP32, 64, 64, 64), {"sm_90a", "wgmma_tile=128x128x6"});
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("3xTF32 stages hold the operands' residual tiles too"), std::string::npos) << deep.error().message;
}

// Split-K on wgmma (wgmma_schedule.cuh): a GEMM whose tiles leave most SMs
// idle splits K into ranges, one unit of work each (the grid counts units),
// with per-range accumulators and zeroed arrival counters in scratch; the
// config can split only the tiles from split_from on (the last wave).
TEST(CodegenWgmma, SplitKForSmallGrids) {
  for (Precision p : {Precision::BF16, Precision::TF32, Precision::F16}) {
    const Program small = generate(linear_chain(p, 32, 8192, 1024, "", operand_type(p)));
    EXPECT_NE(small.name.find("_wgmma_"), std::string::npos) << small.name;
    EXPECT_NE(small.plan_text.find("tile 64x64"), std::string::npos) << small.plan_text;
    EXPECT_NE(small.plan_text.find("split-K 8"), std::string::npos) << small.plan_text;  // 16 tiles x 8 ranges
    EXPECT_EQ(small.launches.at(0).grid[0], 128u);
    EXPECT_NE(small.source.find("fj::SplitK split{kFirstSplitTile, kSplitK,"), std::string::npos);
    bool zeroed_counters = false, partials = false;
    for (const ScratchSpec& sc : small.scratch) {
      zeroed_counters = zeroed_counters || (sc.zeroed && sc.what == "split-K arrival counters (i32[16])");
      partials = partials || (sc.bytes == 16 * 8 * 64 * 64 * 4 && sc.what.find("split-K accumulators") == 0);
    }
    EXPECT_TRUE(zeroed_counters && partials) << small.plan_text;
  }
  // Short K or enough tiles: no split.
  EXPECT_EQ(generate(linear_chain(Precision::BF16, 32, 256, 1024, "", DType::BF16)).plan_text.find("split-K"),
            std::string::npos);
  EXPECT_EQ(generate(linear_chain(Precision::BF16, 4096, 8192, 4096, "", DType::BF16)).plan_text.find("split-K"),
            std::string::npos);
  // Asked for: the last wave of 344 128x128 tiles in 4 ranges (264 + 80 x 4 units); ranges never empty.
  const Graph wide = linear_chain(Precision::BF16, 512, 4096, 11008, "", DType::BF16);
  const Program last = generate(wide, "sm_90a", "wgmma_tile=128x128x5,wgmma_schedule=pingpong,split_k=4,split_from=264");
  EXPECT_NE(last.plan_text.find("ping-pong, 5 stages, raster group 8, split-K 4 from tile 264"), std::string::npos)
      << last.plan_text;
  EXPECT_EQ(last.launches.at(0).grid[0], 264u + 80u * 4u);
  const Program deep = generate(linear_chain(Precision::BF16, 64, 320, 64, "", DType::BF16), "sm_90a", "split_k=4");
  EXPECT_NE(deep.plan_text.find("split-K 3"), std::string::npos) << deep.plan_text;  // 5 k-tiles: 2 + 2 + 1
  const Program none = generate(wide, "sm_90a", "wgmma_tile=128x128x5,split_k=4,split_from=400");
  EXPECT_EQ(none.plan_text.find("split-K"), std::string::npos) << none.plan_text;
  auto bad = generate_program(wide, {"sm_90a", "split_from=-1"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("split_from must be a tile index >= 0"), std::string::npos) << bad.error().message;
}

TEST(CodegenWgmma, RowReductionsFuseUpTo256Columns) {
  Program whole = generate(linear_chain(Precision::BF16, 300, 128, 200, "logsumexp", DType::BF16));
  EXPECT_NE(whole.plan_text.find("fused into the epilogue: one tile spans N=200"), std::string::npos) << whole.plan_text;
  EXPECT_NE(whole.plan_text.find("x256,"), std::string::npos) << whole.plan_text;  // a tile as wide as N
  EXPECT_EQ(whole.launches.size(), 1u);
  Program partial = generate(linear_chain(Precision::BF16, 300, 128, 1000, "sum", DType::BF16));
  EXPECT_NE(partial.plan_text.find("partly fused"), std::string::npos) << partial.plan_text;
  EXPECT_EQ(partial.launches.size(), 2u);  // the anchor's partials, then the row finish
}

// The default configs compile without spills, and (where cuobjdump exists)
// the CUBIN holds HGMMA instructions.
TEST(CodegenWgmma, DefaultConfigsCompileWithoutSpills) {
  bool have_cuobjdump = false;
  struct Case {
    Precision p;
    int64_t m, k, n;
    std::string tail;
    std::string config = "";
    bool matmul = false;  // matmul_chain (B [K, N]) instead of linear_chain
  };
  const Case cases[] = {{Precision::BF16, 1024, 8192, 8192, ""},  {Precision::F16, 512, 4096, 11008, ""},
                        {Precision::TF32, 4096, 4096, 4096, ""},  {Precision::FP32, 4096, 4096, 4096, ""},
                        {Precision::BF16, 100, 1000, 500, ""},    {Precision::BF16, 4096, 1024, 256, "logsumexp"},
                        {Precision::FP32, 1024, 1024, 4096, "sum"},
                        // the deepest 3xTF32 ring of 128x64 the tuner tries
                        {Precision::FP32, 512, 256, 4096, "", "wgmma_tile=128x64x4x8"},
                        {Precision::BF16, 4096, 4096, 4096, "", "", true},
                        {Precision::F16, 512, 4096, 11008, "sum", "", true},
                        // 128-row ping-pong tiles: four accumulator rows per consumer thread
                        {Precision::BF16, 4096, 4096, 4096, "", "wgmma_schedule=pingpong,wgmma_tile=128x128x6x16"},
                        {Precision::TF32, 4096, 1024, 128, "logsumexp", "wgmma_schedule=pingpong,wgmma_tile=128x128x5x16"},
                        // TMA-stored outputs (two columns per shared-memory store)
                        {Precision::BF16, 4096, 4096, 4096, "", "tma_store=1"},
                        {Precision::TF32, 1000, 520, 392, "", "tma_store=1"},
                        // split-K: small grids (default), the last wave of ping-pong tiles, 3xTF32
                        {Precision::BF16, 32, 8192, 1024, ""},
                        {Precision::TF32, 256, 4096, 512, "logsumexp"},
                        {Precision::BF16, 512, 4096, 11008, "", "split_k=4,split_from=264"},
                        {Precision::FP32, 1024, 4096, 1024, "", "split_k=3"},
                        // tf32 matmul, swap-AB (B [K, N] from registers): default, split-K, 64-wide
                        {Precision::TF32, 1024, 8192, 8192, "", "", true},
                        {Precision::TF32, 300, 4096, 200, "", "wgmma_swap_ab=1,split_k=3", true},
                        {Precision::TF32, 4096, 1024, 4096, "", "wgmma_swap_ab=1,wgmma_tile=256x64x5x8", true},
                        {Precision::FP32, 1024, 8192, 8192, "", "", true}};
  for (const Case& c : cases) {
    const Graph g = c.matmul ? matmul_chain(c.p, 0, c.m, c.k, c.n, c.tail, operand_type(c.p))
                             : linear_chain(c.p, c.m, c.k, c.n, c.tail, operand_type(c.p));
    Program prog = generate(g, "sm_90a", c.config);
    const std::string label = prog.name + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                              std::to_string(c.n);
    auto cubin = compile_to_cubin(prog.source, prog.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << label << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << label << "\n" << cubin->log;
    EXPECT_EQ(cubin->log.find("C7514"), std::string::npos) << label << ": wgmma serialized\n" << cubin->log;
    // The launch's dynamic shared memory and the kernel's static (mbarriers)
    // within sm_90's 227 KiB per block, or cuFuncSetAttribute refuses it.
    const size_t smem_at = cubin->log.find(" bytes smem");
    ASSERT_NE(smem_at, std::string::npos) << cubin->log;
    const size_t digits = cubin->log.find_last_not_of("0123456789", smem_at - 1) + 1;
    const long static_smem = std::stol(cubin->log.substr(digits, smem_at - digits));
    ASSERT_FALSE(prog.launches.empty());
    EXPECT_LE(prog.launches[0].shared_bytes + static_smem, 227 * 1024) << label;
    const auto sass = test_util::sass_of(cubin->cubin, ::testing::TempDir(), prog.name);
    have_cuobjdump = sass.has_value();
    if (!sass) continue;
    EXPECT_NE(sass->find("HGMMA"), std::string::npos) << label << ": no HGMMA in the SASS";
  }
  if (!have_cuobjdump) GTEST_SKIP() << "spills checked; no cuobjdump here for the HGMMA check";
}

}  // namespace
}  // namespace fusejit
