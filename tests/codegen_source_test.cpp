// Checks on the emitted CUDA source and the fusion plan (no compiler needed).
#include <gtest/gtest.h>

#include <regex>
#include <tuple>

#include "compiler/codegen.h"
#include "fusejit/spec.h"
#include "tests/random_chains.h"
#include "tests/program_util.h"

namespace fusejit {
namespace {

Graph spec(const std::string& yaml) {
  Expected<Graph> g = parse_spec(yaml, "<test>");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  return g.ok() ? g.take() : Graph{};
}

Graph example(const std::string& name) {
  Expected<Graph> g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/examples/" + name);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
  return g.ok() ? g.take() : Graph{};
}

Program emit(const Graph& g, const std::string& config = "") {
  Expected<Program> p = generate_program(g, {"sm_90a", config});
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().str());
  return p.ok() ? p.take() : Program{};
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Exactly one definition of a device function named like `prefix<id>(`.
void expect_one_function(const std::string& src, const std::string& name) {
  EXPECT_EQ(occurrences(src, "__device__ __forceinline__ float " + name + "(") +
                occurrences(src, "__device__ __forceinline__ void " + name + "("),
            1u)
      << "function " << name << " in\n"
      << src;
}

// One device function per epilogue node: the conv (adding its own bias,
// loaded per channel), relu, the (C,1,1) bias load, add, the store.
void expect_seed1_epilogue_functions(const Graph& g, const std::string& s) {
  for (ValueId v = 0; v < static_cast<ValueId>(g.nodes.size()); ++v) {
    const Node& n = g.node(v);
    if (n.op == OpKind::Relu || n.op == OpKind::Add || n.op == OpKind::Conv2d)
      expect_one_function(s, "fj_" + std::string(op_name(n.op)) + "_" + std::to_string(v));
  }
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(float fj_load_bias_\d+\(const float\* __restrict__ p, int i1\))")))
      << "the (C,1,1) bias is loaded by channel";
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(float fj_load_conv_b_\d+_dim1\(const float\* __restrict__ p, int i1\))")))
      << "the conv's own [Cout] bias is loaded along dim 1, not broadcast from the right";
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(void fj_store_y_\d+\(float\* __restrict__ p, int i0, int i1, int i2, int i3, float v\))")));
  EXPECT_NE(s.find("fj_epilogue(const Params& p, float src, int i0, int i1, int i2, int i3)"), std::string::npos);
}

// sm_90a (the default): fp32 with K = 576 and Cin = 64 runs 3xTF32 on wgmma,
// after a staging kernel that writes x in NHWC, w as [Cout][KH][KW][Cin] and
// their TF32 residuals (codegen_conv_wgmma_test.cpp).
TEST(CodegenSource, Seed1ConvReluBiasIsOneKernelWithNamedConstants) {
  Graph g = example("seed1_conv_relu_bias.yaml");
  Program p = emit(g);
  ASSERT_EQ(p.launches.size(), 2u) << p.plan_text;
  EXPECT_EQ(testing::chain_launches(p), 1u) << p.plan_text;
  EXPECT_TRUE(testing::chain_scratch(p).empty()) << p.plan_text;
  ASSERT_EQ(p.scratch.size(), 4u) << p.plan_text;  // x NHWC, w reordered, their residuals
  EXPECT_TRUE(p.launches[0].operand_staging);
  EXPECT_EQ(p.launches[0].kernel, "fj_split_tf32_conv_operands_nhwc");
  EXPECT_EQ(p.name, "fj_conv2d_wgmma_f32x3_k3_relu_add");
  EXPECT_EQ(p.launches[1].kernel, "fj_conv2d_wgmma_f32x3_k3_relu_add");
  EXPECT_FALSE(p.launches[1].operand_staging);
  EXPECT_NE(p.source.find("__launch_bounds__(384, 1) fj_conv2d_wgmma_f32x3_k3_relu_add("), std::string::npos);
  // The staging kernel's constants, then the conv's (no kGemmK: K is the taps times Cin's blocks).
  for (const char* c : {"kPixels = 16384;", "kTaps = 9;", "kBatch = 128;", "kCin = 64;", "kH = 128;", "kW = 128;",
                        "kCout = 128;", "kKH = 3;", "kOH = 126;", "kOW = 126;", "kCoutPerGroup = 128;"})
    EXPECT_NE(p.source.find(c), std::string::npos) << c;
  EXPECT_EQ(p.source.find("kGemmK"), std::string::npos);
  // OW 126 -> patches of 1 x 128 pixels: 126 per image, one column tile.
  EXPECT_NE(p.source.find("kMTiles = 16128;"), std::string::npos);
  EXPECT_NE(p.source.find("fj::PatchPixels<ConvShape, Tile::BM, 1, 128>"), std::string::npos);
  EXPECT_TRUE(p.launches[1].persistent);
  EXPECT_EQ(p.launches[1].grid[0], 128u * 126);
  // The epilogue's value per accumulator, both biases staged for the tile's channels, stored by
  // fj::tile_nchw_store (conv_wgmma_store.cuh) in runs of a channel's pixels.
  for (ValueId v = 0; v < static_cast<ValueId>(g.nodes.size()); ++v) {
    const Node& n = g.node(v);
    if (n.op == OpKind::Relu || n.op == OpKind::Add || n.op == OpKind::Conv2d)
      expect_one_function(p.source, "fj_" + std::string(op_name(n.op)) + "_" + std::to_string(v));
  }
  EXPECT_NE(p.source.find("fj_epilogue_value(const Params& p, float src, int i0, int i1, int i2, int i3, const float* "
                          "__restrict__ cols0, const float* __restrict__ cols1, int tile_col)"),
            std::string::npos);
  EXPECT_NE(p.source.find("fj::load_as_float(p.in_conv_b, n0 + c)"), std::string::npos);
  EXPECT_NE(p.source.find("fj::load_as_float(p.in_bias, n0 + c)"), std::string::npos);
  EXPECT_TRUE(std::regex_search(p.source, std::regex(R"(fj::tile_nchw_store<Pixels, (32|64|128)>\(frag, m0, n0, )"
                                                     R"(kCoutPerGroup, g \* kCoutPerGroup, p\.out_y,)")));
  EXPECT_NE(p.plan_text.find("stored in runs of a channel's pixels"), std::string::npos) << p.plan_text;
  // conv_runs=0: the fp32-staged epilogue storing element by element, loading the biases per channel.
  expect_seed1_epilogue_functions(g, emit(g, "conv_runs=0").source);
}

// sm_80 (and sm_90a with mainloop=mma): 3xTF32 on mma.sync, one kernel (one
// block per SM: the split operands' registers).
TEST(CodegenSource, Seed1ConvReluBiasOnMmaSyncIsOneKernel) {
  Graph g = example("seed1_conv_relu_bias.yaml");
  for (const auto& [arch, config] : {std::pair<const char*, const char*>{"sm_80", ""}, {"sm_90a", "mainloop=mma"}}) {
    Expected<Program> made = generate_program(g, {arch, config});
    ASSERT_TRUE(made.ok()) << arch << ": " << made.error().str();
    const Program& p = *made;
    ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
    EXPECT_TRUE(p.scratch.empty());
    EXPECT_EQ(p.name, "fj_conv2d_mma_f32x3_k3_relu_add");
    EXPECT_EQ(p.launches[0].kernel, "fj_conv2d_mma_f32x3_k3_relu_add");
    EXPECT_NE(p.source.find("extern \"C\" __global__ void __launch_bounds__(256, 1) fj_conv2d_mma_f32x3_k3_relu_add("),
              std::string::npos);
    for (const char* c : {"kBatch = 128;", "kCin = 64;", "kH = 128;", "kW = 128;", "kCout = 128;", "kKH = 3;",
                          "kOH = 126;", "kOW = 126;", "kGemmK = 576;"})
      EXPECT_NE(p.source.find(c), std::string::npos) << arch << ": " << c;
    expect_seed1_epilogue_functions(g, p.source);
    EXPECT_EQ(p.launches[0].grid[0], (128u * 126 * 126 + 127) / 128);
  }
}

TEST(CodegenSource, Seed2LinearBiasReluIsOneKernel) {
  // sm_90a's default: the wgmma mainloop, fp32 as 3xTF32 (codegen_wgmma_test.cpp).
  Program tc = emit(example("seed2_linear_bias_relu.yaml"));
  ASSERT_EQ(tc.launches.size(), 2u) << tc.plan_text;  // the operands' TF32 residuals, then the GEMM
  EXPECT_TRUE(tc.launches[0].operand_staging);
  EXPECT_EQ(tc.name, "fj_linear_wgmma_f32x3_add_relu");
  // The SIMT mainloop (any arch), asked for by name.
  Program p = emit(example("seed2_linear_bias_relu.yaml"), "mainloop=ffma");
  ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
  EXPECT_EQ(p.name, "fj_linear_add_relu");
  for (const char* c : {"kM = 1024;", "kN = 8192;", "kK = 8192;"}) EXPECT_NE(p.source.find(c), std::string::npos) << c;
  EXPECT_TRUE(std::regex_search(p.source, std::regex(R"(float fj_load_bias_\d+\(const float\* __restrict__ p, int i1\))")));
  EXPECT_EQ(p.launches[0].grid[0], 8u);   // 1024 / 128 row tiles
  EXPECT_EQ(p.launches[0].grid[1], 64u);  // 8192 / 128 column tiles
}

TEST(CodegenSource, Seed3FusesTheMaxPoolIntoTheConvEpilogue) {
  // Default (sm_90a): 3xTF32 on mma.sync from halo patches of 8 x 8 pixels (64x64 tiles, warps 32x32: whole
  // 4x4 windows in each warp's 32 rows), the next tile's halo prefetched into registers, the pool reduced in the
  // fragment's registers on the raw accumulators (the conv bias after it).
  Program halo = emit(example("seed3_conv_tanh_scale_bias_maxpool.yaml"));
  ASSERT_EQ(halo.launches.size(), 1u) << halo.plan_text;
  EXPECT_TRUE(halo.scratch.empty()) << halo.plan_text;
  EXPECT_EQ(halo.name, "fj_conv2d_mma_f32x3_halo_k3_tanh_mul_add_maxpool4");
  EXPECT_NE(halo.source.find("fj::PatchPoolPixels<ConvShape, Tile::BM, 8, 8, 4, 4>"), std::string::npos);
  EXPECT_NE(halo.source.find("fj::ConvPatchMma<Tile, Kind, float, ConvShape, 8, 8, 2, 1, true>"), std::string::npos);
  EXPECT_NE(halo.plan_text.find("tile 64x64 from halo patches, 128 threads (warps 32x32)"), std::string::npos)
      << halo.plan_text;
  EXPECT_NE(halo.plan_text.find("the next tile's loaded into registers during the MMAs"), std::string::npos);
  EXPECT_NE(halo.source.find("fj::patch_pool_in_registers<Pixels, 4, 4, true, true, true>"), std::string::npos);
  EXPECT_NE(halo.plan_text.find("the windows reduce the raw accumulators"), std::string::npos) << halo.plan_text;
  // Staged through shared memory on request: the widest patch of 64 pixels.
  Program staged = emit(example("seed3_conv_tanh_scale_bias_maxpool.yaml"), "pool_registers=0");
  EXPECT_NE(staged.plan_text.find("tile 64x64 from halo patches"), std::string::npos) << staged.plan_text;
  EXPECT_NE(staged.source.find("fj::PatchPoolPixels<ConvShape, Tile::BM, 4, 16, 4, 4>"), std::string::npos);
  EXPECT_NE(staged.source.find("fj::tile_pool<"), std::string::npos);
  // The max pool first: tanh, mul, add run once per window (on its max and min).
  EXPECT_TRUE(std::regex_search(halo.plan_text, std::regex(R"(max_pool2d %\d+ first: tanh %\d+, mul %\d+, add %\d+)")))
      << halo.plan_text;
  EXPECT_NE(halo.source.find("fj_after_max(p, v_min,"), std::string::npos);
  Program in_order = emit(example("seed3_conv_tanh_scale_bias_maxpool.yaml"), "pool_first=0");
  EXPECT_EQ(in_order.plan_text.find(" first: "), std::string::npos) << in_order.plan_text;
  EXPECT_EQ(in_order.source.find("fj_after_max"), std::string::npos);
  // The SIMT mainloop: pool-window-major rows.
  Program p = emit(example("seed3_conv_tanh_scale_bias_maxpool.yaml"), "mainloop=ffma");
  ASSERT_EQ(p.launches.size(), 1u) << p.plan_text;
  EXPECT_TRUE(p.scratch.empty()) << "the unpooled conv output must not be materialized\n" << p.plan_text;
  EXPECT_EQ(p.name, "fj_conv2d_k3_tanh_mul_add_maxpool4");
  EXPECT_NE(p.plan_text.find("max_pool2d %"), std::string::npos);
  EXPECT_NE(p.plan_text.find("fused into the conv epilogue"), std::string::npos) << p.plan_text;
  EXPECT_NE(p.source.find("fj::PoolTiledPixels<ConvShape, Tile::BM, 4, 4,"), std::string::npos);
  EXPECT_NE(p.source.find("fj::tile_pool<"), std::string::npos);
  // Only the pooled tensor is stored: (128, 64, 63, 63).
  EXPECT_TRUE(std::regex_search(p.source, std::regex(R"(fj_store_y_\d+\(p\.out_y, i0, i1, i2, i3, )")));
  EXPECT_NE(p.source.find("i0 * 254016 + i1 * 3969 + i2 * 63 + i3"), std::string::npos) << "pooled-shape offsets";
}

TEST(CodegenSource, PoolNotFusedWhenDisabledOrOverlapping) {
  Program unfused = emit(example("seed3_conv_tanh_scale_bias_maxpool.yaml"), "fuse_pool=0");
  ASSERT_EQ(unfused.launches.size(), 2u);
  ASSERT_EQ(unfused.scratch.size(), 1u);
  EXPECT_EQ(unfused.scratch[0].bytes, int64_t{128} * 64 * 254 * 254 * 4);
  EXPECT_NE(unfused.plan_text.find("fuse_pool=0"), std::string::npos);

  Program overlapping = emit(example("conv_grouped_dilated_maxpool.yaml"));
  ASSERT_EQ(overlapping.launches.size(), 2u);
  EXPECT_NE(overlapping.plan_text.find("stride differs from its kernel"), std::string::npos) << overlapping.plan_text;
}

const char* kLinearHead = R"(
name: t
precision: fp32
inputs:
  - {name: x, shape: [64, 32]}
  - {name: w, shape: [N_, 32]}
ops:
  - {name: h, op: linear, args: [x, w]}
)";

Graph linear_with(int n, const std::string& ops, const std::string& outputs) {
  std::string head = kLinearHead;
  head.replace(head.find("N_"), 2, std::to_string(n));
  return spec(head + ops + "outputs: " + outputs + "\n");
}

TEST(CodegenSource, SoftmaxAlongNFusesWholeOrInPartsElseFallsBackWithANote) {
  const std::string ops = "  - {name: s, op: softmax, args: [h], dim: -1}\n  - {name: y, op: mul, args: [s, 3.0]}\n";
  // One tile spans N: normalized in the epilogue, the consumer after it, one kernel.
  Program whole = emit(linear_with(100, ops, "[y]"), "mainloop=ffma");
  ASSERT_EQ(whole.launches.size(), 1u) << whole.plan_text;
  EXPECT_TRUE(whole.scratch.empty());
  EXPECT_NE(whole.source.find("fj::tile_row_softmax<false, false"), std::string::npos);
  EXPECT_NE(whole.plan_text.find("softmax %3 fused into the epilogue"), std::string::npos) << whole.plan_text;
  EXPECT_EQ(whole.launches[0].kernel, "fj_linear_softmax_mul");

  // Wider N: per-tile partials and exp(h - tile max) in the softmax's buffer
  // (scratch here: y is the output), scaled by a finish kernel that also runs the mul.
  Program wide = emit(linear_with(300, ops, "[y]"), "mainloop=ffma,softmax_parts=1");
  ASSERT_EQ(wide.launches.size(), 2u) << wide.plan_text;
  EXPECT_NE(wide.source.find("fj::tile_row_softmax<false, true"), std::string::npos);
  EXPECT_NE(wide.source.find("fj::softmax_finish_row<false, kTiles, kTileN"), std::string::npos);
  EXPECT_EQ(wide.launches[1].kernel, "fj_softmax_finish_mul");
  ASSERT_EQ(wide.scratch.size(), 3u) << wide.plan_text;
  EXPECT_EQ(wide.scratch[0].bytes, 3 * 64 * 4) << "3 column tiles x 64 rows";
  EXPECT_EQ(wide.scratch[2].bytes, 64 * 300 * 4) << "the scaled values' stage";
  // An output softmax is its own stage: no full-size scratch.
  Program out = emit(linear_with(300, "  - {name: s, op: log_softmax, args: [h], dim: 1}\n", "[s]"), "softmax_parts=1");
  ASSERT_EQ(testing::chain_launches(out), 2u) << out.plan_text;
  EXPECT_EQ(testing::chain_scratch(out).size(), 2u) << out.plan_text;
  EXPECT_NE(out.source.find("fj::tile_row_softmax<true, true"), std::string::npos);

  // Along another dim, disabled, or wider than a tile by default: the output
  // goes to memory and a row kernel normalizes it.
  const std::string along1 = "  - {name: s, op: softmax, args: [h], dim: 1}\n";
  for (const auto& [n, other, config] : {std::tuple<int, std::string, std::string>{100, "  - {name: s, op: softmax, args: [h], dim: 0}\n", ""},
                                         {100, along1, "fuse_reductions=0"},
                                         {300, along1, "mainloop=ffma"}}) {
    Program p = emit(linear_with(n, other, "[s]"), config);
    ASSERT_EQ(testing::chain_launches(p), 2u) << p.plan_text;
    EXPECT_EQ(testing::chain_scratch(p).size(), 1u);
    EXPECT_NE(p.plan_text.find("not fused into the epilogue"), std::string::npos) << p.plan_text;
    EXPECT_NE(p.source.find("fj::softmax_rows<"), std::string::npos);
  }
}

TEST(CodegenSource, RowReductionsFuseWholeOrAsPerTilePartials) {
  const std::string ops =
      "  - {name: r, op: logsumexp, args: [h], dims: [1]}\n"
      "  - {name: y, op: tanh, args: [r]}\n";
  Program narrow = emit(linear_with(100, ops, "[y]"), "mainloop=ffma");  // SIMT tiles: 128 wide
  ASSERT_EQ(narrow.launches.size(), 1u) << narrow.plan_text;
  EXPECT_TRUE(narrow.scratch.empty());
  EXPECT_NE(narrow.source.find("fj::tile_row_reduce<fj::LogSumExpOp"), std::string::npos);
  EXPECT_NE(narrow.plan_text.find("fused into the epilogue"), std::string::npos);
  EXPECT_EQ(narrow.launches[0].grid[1], 1u) << "one column tile spans N";

  // Wider N: each column tile stores per-row partials (and row maxima for
  // logsumexp); a second kernel combines them and runs the tanh.
  Program wide = emit(linear_with(300, ops, "[y]"), "mainloop=ffma,softmax_parts=1");
  ASSERT_EQ(wide.launches.size(), 2u) << wide.plan_text;
  EXPECT_NE(wide.plan_text.find("N=300 is wider than one tile"), std::string::npos) << wide.plan_text;
  EXPECT_NE(wide.source.find("fj::tile_row_partials<fj::LogSumExpOp"), std::string::npos);
  EXPECT_NE(wide.source.find("fj::combine_partials<fj::LogSumExpOp, kTiles>"), std::string::npos);
  EXPECT_EQ(wide.launches[1].kernel, "fj_logsumexp_finish_tanh");
  ASSERT_EQ(wide.scratch.size(), 2u);
  EXPECT_EQ(wide.scratch[0].bytes, 3 * 64 * 4) << "3 column tiles x 64 rows, not the [64, 300] input";

  // Disabled: the linear output goes to scratch and a row kernel reduces it.
  Program unfused = emit(linear_with(300, ops, "[y]"), "fuse_reductions=0");
  ASSERT_EQ(testing::chain_launches(unfused), 2u);
  EXPECT_NE(unfused.source.find("fj::reduce_rows<"), std::string::npos);
  EXPECT_EQ(testing::chain_scratch(unfused).at(0).bytes, 64 * 300 * 4);
}

TEST(CodegenSource, ValuesReadByLaterKernelsGoToScratchOrOutputs) {
  // h is an output and also reduced by a row kernel: stored once, to the output. (A logsumexp over the rows: a
  // sum's column partials would come from the epilogue, pass_fuse_spatial.cpp.)
  Program p = emit(linear_with(300, "  - {name: r, op: logsumexp, args: [h], dims: [0]}\n", "[h, r]"));
  ASSERT_EQ(testing::chain_launches(p), 2u) << p.plan_text;
  EXPECT_TRUE(testing::chain_scratch(p).empty()) << p.plan_text;
  const LaunchSpec& row_kernel = p.launches.back();
  ASSERT_EQ(row_kernel.args.size(), 2u);
  EXPECT_EQ(row_kernel.args[0], (BufferRef{BufferKind::Output, 0}));
  EXPECT_EQ(row_kernel.args[1], (BufferRef{BufferKind::Output, 1}));
}

TEST(CodegenSource, LeafExpressionsAreRecomputedOrWrittenWhenARowKernelReadsThem) {
  // b * 2 feeds the epilogue directly and a softmax: both compute it where
  // they read it (the softmax through fj_operand_<v>), no kernel writes it.
  const std::string text = R"(
name: t
precision: fp32
inputs:
  - {name: x, shape: [8, 4]}
  - {name: w, shape: [16, 4]}
  - {name: b, shape: [16]}
ops:
  - {name: h, op: linear, args: [x, w]}
  - {name: b2, op: mul, args: [b, 2.0]}
  - {name: y, op: add, args: [h, b2]}
)";
  Graph g = spec(text + "  - {name: s, op: softmax, args: [b2], dim: 0}\n"
                        "  - {name: z, op: mul, args: [y, s]}\noutputs: [y, z]\n");
  Program p = emit(g, "mainloop=ffma");
  ASSERT_EQ(p.launches.size(), 3u) << p.plan_text;
  EXPECT_EQ(p.launches[0].kernel, "fj_linear_add") << p.plan_text;
  const std::string k0 = p.source.substr(0, p.source.find("namespace k1"));
  EXPECT_TRUE(std::regex_search(k0, std::regex(R"(float fj_mul_\d+\(float a, float b\))"))) << k0;
  EXPECT_NE(p.plan_text.find("is computed from the inputs where softmax"), std::string::npos) << p.plan_text;
  EXPECT_EQ(p.launches[1].kernel, "fj_softmax");
  EXPECT_NE(p.source.find("fj_operand_"), std::string::npos);
  EXPECT_EQ(p.launches[2].kernel, "fj_pointwise_mul");
  // A view of it (a reshape that moves elements between dims) reads a buffer: a small kernel writes it first.
  Graph viewed = spec(text + "  - {name: r, op: reshape, args: [b2], shape: [4, 4]}\n"
                             "  - {name: s, op: softmax, args: [r], dim: 1}\n"
                             "  - {name: s16, op: reshape, args: [s], shape: [16]}\n"
                             "  - {name: z, op: mul, args: [y, s16]}\noutputs: [y, z]\n");
  Program q = emit(viewed, "mainloop=ffma");
  ASSERT_EQ(q.launches.size(), 4u) << q.plan_text;
  EXPECT_NE(q.plan_text.find("computed from inputs alone"), std::string::npos) << q.plan_text;
  EXPECT_EQ(q.launches[1].kernel.rfind("fj_write_", 0), 0u) << q.launches[1].kernel;
  EXPECT_EQ(q.launches[2].kernel, "fj_softmax");
}

TEST(CodegenSource, GenerationIsDeterministic) {
  for (uint64_t seed : {3, 17, 42}) {
    Expected<Graph> g = testing::random_chain(seed);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(emit(*g).source, emit(*g).source);
  }
}

TEST(CodegenSource, ConfigOverridesTheTileAndRejectsBadValues) {
  Program p = emit(example("seed2_linear_bias_relu.yaml"), "tile=64x32x4x4");
  EXPECT_NE(p.source.find("fj::SimtTile<64, 32, 8, 4, 4, false>"), std::string::npos);
  EXPECT_EQ(p.launches[0].block[0], 128u);
  for (const char* bad : {"tile=64x32", "tile=100x32x8x8", "bogus=1", "fuse_pool=2", "row_threads=33"}) {
    Expected<Program> r = generate_program(example("seed2_linear_bias_relu.yaml"), {"sm_90a", bad});
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(CodegenSource, UnpreparedGraphIsAnErrorNotACrash) {
  Graph g;
  g.nodes.push_back(Node{});
  Expected<Program> p = generate_program(g, {});
  EXPECT_FALSE(p.ok());
}

TEST(CodegenSource, ScalarOutputsAndLowPrecisionStores) {
  Graph g = spec(R"(
name: t
precision: bf16
inputs:
  - {name: a, shape: [2, 3, 8]}
  - {name: b, shape: [8, 5]}
ops:
  - {name: m, op: matmul, args: [a, b]}
  - {name: s, op: sum, args: [m], dims: [0, 1, 2]}
outputs: [m, s]
)");
  Program p = emit(g);
  EXPECT_NE(p.source.find("__nv_bfloat16* __restrict__ out_m"), std::string::npos) << p.source;
  EXPECT_NE(p.source.find("fj::reduce_rows<"), std::string::npos);
  EXPECT_NE(p.source.find("constexpr int kRows = 1;"), std::string::npos);
}

}  // namespace
}  // namespace fusejit
