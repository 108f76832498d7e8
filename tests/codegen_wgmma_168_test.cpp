// CPU: wgmma tiles 168 columns wide (512x4096x11008's default, cuBLAS's
// width there). 128x168 ping-pong tiles (a consumer holds the whole tile: 168
// accumulators a thread) compile without spills for each epilogue kind.
// TMA bulk stores of such tiles (pass_tma_store.cpp, fj::slot_at): 168 columns are not whole 128-byte chunks, so with
// tma_store=1 the outputs go out in unswizzled chunks of 56 (16-bit: 112
// bytes) or 24 (32-bit: 96 bytes) columns; tma_store=auto takes the 16-bit
// ones (timed faster) and leaves 32-bit outputs to the staged global stores. The kernels compile with NVRTC for sm_90a
// without spills and within the shared-memory limit.
#include <gtest/gtest.h>

#include "compiler/codegen.h"
#include "compiler/passes.h"
#include "fusejit/builder.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/wgmma_chains.h"

namespace fusejit {
namespace {

using test_util::generate;
using test_util::linear_chain;
using test_util::operand_type;

TEST(CodegenTmaStoreChunks, ChunkWidths) {
  EXPECT_EQ(cg::tma_store_chunk_cols(128, 2), 64);  // 128 bytes, swizzled
  EXPECT_EQ(cg::tma_store_chunk_cols(192, 2), 64);
  EXPECT_EQ(cg::tma_store_chunk_cols(256, 4), 32);
  EXPECT_EQ(cg::tma_store_chunk_cols(168, 2), 56);  // 112 bytes, 3 a tile
  EXPECT_EQ(cg::tma_store_chunk_cols(168, 4), 24);  // 96 bytes, 7 a tile
  EXPECT_EQ(cg::tma_store_chunk_cols(176, 2), 0);   // 16 columns (32 bytes) at most: not worth the barriers
  EXPECT_EQ(cg::tma_store_chunk_cols(176, 4), 0);
}

TEST(CodegenTmaStoreChunks, OddWidthTilesStoreUnswizzledChunksWhereAsked) {
  struct Case {
    Precision p;
    const char* config;
    int chunk_cols;
    const char* call;  // the epilogue's template call
  };
  const Case cases[] = {
      {Precision::BF16, "tma_store=1", 56, "fj::tile_pointwise_tma_pairs<2, kOutSlots, 56>"},
      {Precision::F16, "tma_store=1,wgmma_tile=128x168x4", 56, "fj::tile_pointwise_tma_pairs<2, kOutSlots, 56>"},
      {Precision::TF32, "tma_store=1,wgmma_tile=128x168x4", 24, "fj::tile_pointwise_tma_pairs<4, kOutSlots, 24>"},
  };
  for (const Case& c : cases) {
    const Graph g = linear_chain(c.p, 512, 4096, 11008, "", operand_type(c.p));
    const std::string label = std::string(precision_name(c.p)) + " '" + c.config + "'";
    // auto: 16-bit outputs of a 168-wide tile take the unswizzled chunks (timed), 32-bit ones the staged stores
    const Program plain = generate(g, "sm_90a", c.p == Precision::TF32 ? "wgmma_tile=128x168x4" : "");
    EXPECT_NE(plain.plan_text.find("128x168"), std::string::npos) << label << "\n" << plain.plan_text;
    EXPECT_EQ(plain.plan_text.find("TMA bulk stores") != std::string::npos, c.p != Precision::TF32)
        << label << "\n" << plain.plan_text;
    const Program prog = generate(g, "sm_90a", c.config);
    const int bytes = c.chunk_cols * (c.p == Precision::TF32 ? 4 : 2);
    EXPECT_NE(prog.plan_text.find("TMA bulk stores, " + std::to_string(bytes) + "-byte column chunks (unswizzled)"),
              std::string::npos)
        << label << "\n" << prog.plan_text;
    EXPECT_NE(prog.source.find(c.call), std::string::npos) << label << "\n" << prog.source;
    ASSERT_FALSE(prog.launches.empty());
    const auto& maps = prog.launches[0].tensor_maps;
    ASSERT_EQ(maps.size(), 3u) << label;  // A, B, the output
    EXPECT_EQ(maps[2].box_cols, c.chunk_cols) << label;
    EXPECT_EQ(maps[2].box_rows, 128) << label;
    EXPECT_FALSE(maps[2].swizzle128) << label;
    EXPECT_TRUE(maps[0].swizzle128) << label;
    auto cubin = compile_to_cubin(prog.source, prog.name, {"sm_90a", false, {"--ptxas-options=-v"}});
    ASSERT_TRUE(cubin.ok()) << label << ": " << cubin.error().str();
    EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << label << "\n" << cubin->log;
    EXPECT_LE(prog.launches[0].shared_bytes + 1024, 227 * 1024) << label;
  }
  // Two outputs (one element a store): the same chunks.
  GraphBuilder two(Precision::BF16, "two");
  auto y = two.linear(two.input("x", {512, 4096}, DType::BF16), two.input("w", {11008, 4096}, DType::BF16));
  two.output("h", y);
  two.output("r", y.relu());
  const Program both = generate(*two.build(), "sm_90a", "tma_store=1");
  EXPECT_NE(both.source.find("fj::tile_pointwise_tma<2, kOutSlots, 56>"), std::string::npos) << both.source;
  auto cubin = compile_to_cubin(both.source, both.name, {"sm_90a", false, {}});
  EXPECT_TRUE(cubin.ok()) << cubin.error().str();
  // 176 columns: no such chunks, a clear note.
  const Program wide = generate(linear_chain(Precision::BF16, 512, 4096, 4096, "", DType::BF16), "sm_90a",
                                "wgmma_tile=128x176x4,tma_store=1");
  EXPECT_NE(wide.plan_text.find("neither whole 128-byte chunks nor whole unswizzled chunks"), std::string::npos)
      << wide.plan_text;
}

TEST(CodegenWgmma168, TallPingPongTilesCompileWithoutSpills) {
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32})
    for (const char* tail : {"", "gelu", "logsumexp"}) {
      const Graph g = linear_chain(p, 512, 4096, 11008, tail, operand_type(p));
      const std::string label = std::string(precision_name(p)) + " '" + tail + "'";
      auto prog = generate_program(g, {"sm_90a", "wgmma_tile=128x168x5,wgmma_schedule=pingpong"});
      if (!prog) {  // a row reduction wider than the tile: a clear codegen error
        EXPECT_NE(prog.error().str().find("codegen"), std::string::npos) << label << ": " << prog.error().str();
        continue;
      }
      EXPECT_NE(prog->plan_text.find("tile 128x168 ping-pong, 5 stages"), std::string::npos) << label << prog->plan_text;
      auto cubin = compile_to_cubin(prog->source, prog->name, {"sm_90a", false, {"--ptxas-options=-v"}});
      ASSERT_TRUE(cubin.ok()) << label << ": " << cubin.error().str();
      EXPECT_NE(cubin->log.find(" 0 bytes spill stores"), std::string::npos) << label << "\n" << cubin->log;
      EXPECT_EQ(cubin->log.find("C7514"), std::string::npos) << label << ": wgmma serialized\n" << cubin->log;
    }
  // Wider 128-row ping-pong tiles do not fit the registers.
  auto wide = generate_program(linear_chain(Precision::BF16, 512, 4096, 11008, "", DType::BF16),
                               {"sm_90a", "wgmma_tile=128x176x4,wgmma_schedule=pingpong"});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().str().find("bn must be at most 128, or 168"), std::string::npos) << wide.error().str();
}

}  // namespace
}  // namespace fusejit
