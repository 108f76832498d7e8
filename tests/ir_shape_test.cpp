// Shape inference, broadcasting and structural checks of the IR.
#include <gtest/gtest.h>

#include "fusejit/builder.h"

namespace fusejit {
namespace {

Shape out_shape(const Graph& g, size_t k = 0) { return g.node(g.outputs.at(k).value).type.shape; }

TEST(Broadcast, PyTorchRules) {
  EXPECT_EQ(broadcast_shapes({128, 128, 126, 126}, {128, 1, 1}), (Shape{128, 128, 126, 126}));
  EXPECT_EQ(broadcast_shapes({1024, 8192}, {8192}), (Shape{1024, 8192}));
  EXPECT_EQ(broadcast_shapes({1024, 8192}, {1024, 1}), (Shape{1024, 8192}));
  EXPECT_EQ(broadcast_shapes({3, 1, 5}, {4, 1}), (Shape{3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}), (Shape{2, 3}));
  EXPECT_FALSE(broadcast_shapes({128, 126, 126}, {64, 1, 1}).has_value());
  EXPECT_FALSE(broadcast_shapes({4, 3}, {4}).has_value());
}

TEST(ShapeInference, SeedOneConvReluBias) {
  GraphBuilder g;
  auto y = g.conv2d(g.input("x", {128, 64, 128, 128}), g.input("w", {128, 64, 3, 3}), g.input("b", {128}))
               .relu()
               .add(g.input("bias", {128, 1, 1}));
  g.output("y", y);
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  EXPECT_EQ(out_shape(*graph), (Shape{128, 128, 126, 126}));
}

TEST(ShapeInference, ConvStridePaddingDilationGroups) {
  GraphBuilder g;
  auto y = g.conv2d(g.input("x", {2, 8, 17, 19}), g.input("w", {12, 4, 3, 5}), std::nullopt,
                    {.stride = {2, 3}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2});
  g.output("y", y.relu());
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  // H: (17 + 2 - 2*2 - 1)/2 + 1 = 8; W: (19 + 4 - 4 - 1)/3 + 1 = 7
  EXPECT_EQ(out_shape(*graph), (Shape{2, 12, 8, 7}));
}

TEST(ShapeInference, InsertZerosExtraAndCrop) {
  GraphBuilder g;
  using V = std::vector<int64_t>;
  Value x = g.input("x", {2, 3, 4, 5});
  g.output("s", g.op(OpKind::InsertZeros, {x}, {{"stride", V{2, 3}}, {"extra", V{1, 0}}}));
  g.output("c", g.op(OpKind::InsertZeros, {x}, {{"stride", V{2, 3}}, {"extra", V{1, 0}}, {"crop", V{2, 1}}}));
  g.output("k", g.op(OpKind::InsertZeros, {x}, {{"stride", V{1, 1}}, {"crop", V{1, 2}}}));
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  EXPECT_EQ(out_shape(*graph, 0), (Shape{2, 3, 8, 13}));           // (4-1)*2+1+1, (5-1)*3+1
  EXPECT_EQ(out_shape(*graph, 1), (Shape{2, 3, 8 - 4, 13 - 2}));   // minus 2*crop
  EXPECT_EQ(out_shape(*graph, 2), (Shape{2, 3, 4 - 2, 5 - 4}));    // stride 1: a plain crop
}

// The adjoints give back their gather op's operand shape.
TEST(ShapeInference, GatherAdjointsInvertTheirOps) {
  GraphBuilder g;
  using V = std::vector<int64_t>;
  Value x = g.input("x", {2, 3, 9, 11});
  const AttrMap window = {{"kernel_size", V{3, 2}}, {"stride", V{2, 3}}, {"padding", V{1, 0}}, {"dilation", V{1, 2}}};
  const Value cols = g.op(OpKind::Im2col, {x}, window);
  AttrMap with_shape = window;
  with_shape["input_shape"] = V{2, 3, 9, 11};
  g.output("cols", cols);
  g.output("col2im", g.op(OpKind::Im2colBackward, {cols}, with_shape));
  const AttrMap spread = {{"stride", V{2, 3}}, {"extra", V{1, 2}}, {"crop", V{1, 1}}};
  g.output("iz", g.op(OpKind::InsertZerosBackward, {g.op(OpKind::InsertZeros, {x}, spread)}, spread));
  const AttrMap pool = {{"kernel_size", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}, {"ceil_mode", true}};
  g.output("mp", g.op(OpKind::MaxPool2dDoubleBackward, {x, g.input("dx", {2, 3, 9, 11})}, pool));
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  // H: (9 + 2 - 3)/2 + 1 = 5; W: (11 - 2 - 1)/3 + 1 = 3 -> [3*3*2, 2*5*3]
  EXPECT_EQ(out_shape(*graph, 0), (Shape{18, 30}));
  EXPECT_EQ(out_shape(*graph, 1), (Shape{2, 3, 9, 11}));
  EXPECT_EQ(out_shape(*graph, 2), (Shape{2, 3, 9, 11}));  // spread [18, 33] cropped to [16, 31], back to [9, 11]
  EXPECT_EQ(out_shape(*graph, 3), (Shape{2, 3, 5, 6}));   // ceil((9 + 2 - 3)/2) + 1, ceil((11 + 2 - 3)/2) + 1
}

TEST(ShapeInference, LinearMatmulBatch) {
  GraphBuilder g;
  g.output("y", g.linear(g.input("x", {4, 5, 16}), g.input("w", {32, 16}), g.input("b", {32})).gelu());
  auto lin = g.build();
  ASSERT_TRUE(lin) << lin.error().str();
  EXPECT_EQ(out_shape(*lin), (Shape{4, 5, 32}));

  GraphBuilder m;
  m.output("y", m.matmul(m.input("a", {3, 1, 8, 16}), m.input("b", {5, 16, 4})).sigmoid());
  auto mm = m.build();
  ASSERT_TRUE(mm) << mm.error().str();
  EXPECT_EQ(out_shape(*mm), (Shape{3, 5, 8, 4}));
}

TEST(ShapeInference, ReductionsNormalizePool) {
  GraphBuilder g;
  auto a = g.linear(g.input("x", {8, 64}), g.input("w", {32, 64}));
  g.output("s", a.sum({-1}, true));
  g.output("m", a.max({0, 1}));
  g.output("sm", a.softmax(-1).mul(2.0));
  g.output("p", a.max_pool1d({.kernel = 4}));
  g.output("q", a.avg_pool1d({.kernel = 3, .stride = 2, .padding = 1}));
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  EXPECT_EQ(out_shape(*graph, 0), (Shape{8, 1}));
  EXPECT_EQ(out_shape(*graph, 1), (Shape{}));
  EXPECT_EQ(out_shape(*graph, 2), (Shape{8, 32}));
  EXPECT_EQ(out_shape(*graph, 3), (Shape{8, 8}));
  EXPECT_EQ(out_shape(*graph, 4), (Shape{8, 16}));  // (32 + 2 - 3)/2 + 1
  const Node& s = graph->node(graph->outputs[0].value);
  EXPECT_EQ(s.attr_ints("dims"), (std::vector<int64_t>{1}));  // -1 normalized
}

TEST(ShapeInference, Pool2dModes) {
  GraphBuilder g;
  auto c = g.conv2d(g.input("x", {1, 3, 16, 16}), g.input("w", {4, 3, 3, 3}));  // 14x14
  g.output("a", c.max_pool2d({.kernel = {4, 4}}));                               // 3x3
  g.output("b", c.max_pool2d({.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}));
  g.output("c", c.avg_pool2d({.kernel = {2, 2}, .ceil_mode = true}));
  g.output("d", c.global_avg_pool());
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  EXPECT_EQ(out_shape(*graph, 0), (Shape{1, 4, 3, 3}));
  EXPECT_EQ(out_shape(*graph, 1), (Shape{1, 4, 8, 8}));  // ceil((14+2-3)/2)+1 = 8
  EXPECT_EQ(out_shape(*graph, 2), (Shape{1, 4, 7, 7}));
  EXPECT_EQ(out_shape(*graph, 3), (Shape{1, 4, 1, 1}));
}

TEST(ShapeInference, DtypePromotionAndScalars) {
  GraphBuilder g(Precision::BF16);
  auto a = g.linear(g.input("x", {4, 8}), g.input("w", {16, 8}));
  g.output("y", a.mul(3.0));                                              // scalar keeps bf16
  g.output("z", a.add(g.input("p", {16}, DType::F32)));                   // bf16 + f32 -> f32
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  EXPECT_EQ(graph->node(graph->outputs[0].value).type.dtype, DType::BF16);
  EXPECT_EQ(graph->node(graph->outputs[1].value).type.dtype, DType::F32);
}

struct BadCase {
  const char* what;
  std::string expect;
};

Error build_error(const std::function<void(GraphBuilder&)>& f, Precision p = Precision::FP32) {
  GraphBuilder g(p);
  f(g);
  auto r = g.build();
  EXPECT_FALSE(r) << "expected an error";
  return r ? Error("") : r.error();
}

TEST(Verifier, ClearErrors) {
  EXPECT_NE(build_error([](GraphBuilder& g) {
              auto c = g.conv2d(g.input("x", {1, 3, 8, 8}), g.input("w", {4, 3, 3, 3}));  // 6x6
              g.output("y", c.max_pool2d({.kernel = {7, 7}}).named("pool"));
            }).message.find("max_pool2d 'pool': kernel 7 is larger than the 6x6 input"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              g.output("y", g.conv2d(g.input("x", {1, 3, 8, 8}), g.input("w", {4, 5, 3, 3})));
            }).message.find("expects 5 input channels per group but x [1,3,8,8] has 3"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              auto c = g.conv2d(g.input("x", {1, 3, 8, 8}), g.input("w", {4, 3, 3, 3}));
              g.output("y", c.add(g.input("bias", {5, 1, 1})));
            }).message.find("do not broadcast"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) { g.output("y", g.input("x", {2})); })
                .message.find("a graph without an anchor op must compute each output"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              auto a = g.linear(g.input("x", {2, 4}), g.input("w", {4, 4}));
              auto b = g.linear(a, g.input("w2", {4, 4}));
              g.output("y", b);
            }).message.find("a second anchor op"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              auto a = g.linear(g.input("x", {2, 4}), g.input("w", {4, 4}));
              a.relu().named("dead");
              g.output("y", a);
            }).message.find("relu 'dead' is never used"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              g.output("y", g.linear(g.input("x", {2, 4}), g.input("w", {4, 4})).sum({2}));
            }).message.find("dim 2 is out of range"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              g.output("y", g.linear(g.input("x", {2, 4}), g.input("w", {4, 4}, DType::F32)));
            }, Precision::BF16).message.find("operand 'weight' is f32 but precision bf16 needs bf16 operands"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              g.output("y", g.linear(g.input("x", {2, 4}), g.input("w", {4, 4})).clamp(3.0, 1.0));
            }).message.find("'min' (3.0) is greater than 'max' (1.0)"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              g.output("y", g.op(OpKind::Relu, {g.linear(g.input("x", {2, 4}), g.input("w", {4, 4})),
                                                g.constant(1.0)}));
            }).message.find("relu %"),
            std::string::npos);
  EXPECT_NE(build_error([](GraphBuilder& g) {
              auto a = g.linear(g.input("x", {2, 4}), g.input("w", {4, 4}));
              g.output("y", g.op(OpKind::LeakyRelu, {a}, {{"slope", 0.1}}));
            }).message.find("unknown attribute 'slope' (it takes: negative_slope)"),
            std::string::npos);
}

TEST(Verifier, ValuesFromAnotherBuilderAreAnError) {
  GraphBuilder a, b;
  auto x = a.input("x", {2, 4});
  b.output("y", b.linear(x, b.input("w", {4, 4})));
  auto r = b.build();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("another GraphBuilder"), std::string::npos);
}

TEST(OpTable, EveryEnumValueHasItsEntry) {
  size_t count = 0;
#define FUSEJIT_COUNT(e, n, c) ++count;
  FUSEJIT_OPS(FUSEJIT_COUNT)
#undef FUSEJIT_COUNT
  ASSERT_EQ(all_ops().size(), count);
  for (size_t i = 0; i < all_ops().size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(all_ops()[i].op), i);
    EXPECT_FALSE(all_ops()[i].name.empty());
    EXPECT_EQ(op_from_name(all_ops()[i].name), all_ops()[i].op);
  }
}

TEST(InitResolution, RolesLikeTheSeeds) {
  GraphBuilder g;
  // Inputs are kernel arguments in the order input() is called.
  auto x = g.input("x", {2, 64, 8, 8});
  auto w = g.input("w", {16, 64, 3, 3});
  auto b = g.input("b", {16});
  auto y = g.conv2d(x, w, b).add(g.input("bias", {16, 1, 1}));
  g.output("y", y);
  auto graph = g.build();
  ASSERT_TRUE(graph) << graph.error().str();
  auto in = graph->inputs();
  EXPECT_EQ(graph->node(in[0]).init, InitKind::Uniform01);
  EXPECT_EQ(graph->node(in[1]).init, InitKind::TorchWeight);
  EXPECT_EQ(graph->node(in[1]).init_fan_in, 64 * 9);
  EXPECT_EQ(graph->node(in[2]).init, InitKind::TorchBias);
  EXPECT_EQ(graph->node(in[2]).init_fan_in, 64 * 9);
  EXPECT_EQ(graph->node(in[3]).init, InitKind::Normal);
}

}  // namespace
}  // namespace fusejit
