// Every examples/*.yaml parses and prepares, and together the examples cover
// the whole op table (so coverage cannot silently rot when ops are added).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fusejit/ir.h"
#include "fusejit/spec.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> example_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(FUSEJIT_SOURCE_DIR) / "examples"))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::map<std::string, Graph> load_all() {
  std::map<std::string, Graph> graphs;
  for (const fs::path& file : example_files()) {
    auto g = load_spec_file(file.string());
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str());
    if (g.ok()) graphs.emplace(file.filename().string(), g.take());
  }
  return graphs;
}

TEST(Examples, EveryExampleParsesAndVerifies) {
  std::vector<fs::path> files = example_files();
  EXPECT_GE(files.size(), 10u);
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    auto g = load_spec_file(file.string());
    ASSERT_TRUE(g.ok()) << g.error().str();
    Status verified = verify_graph(*g);
    EXPECT_TRUE(verified.ok()) << verified.error().str();
    EXPECT_EQ(g->name + ".yaml", file.filename().string()) << "the spec's name should match its file";
  }
}

TEST(Examples, SeedShapesMatchTheSeedProblems) {
  auto graphs = load_all();
  // Output shapes stated in shared/seed-problems.md.
  const std::map<std::string, Shape> expected = {
      {"seed1_conv_relu_bias.yaml", {128, 128, 126, 126}},
      {"seed2_linear_bias_relu.yaml", {1024, 8192}},
      {"seed3_conv_tanh_scale_bias_maxpool.yaml", {128, 64, 63, 63}},
  };
  for (const auto& [file, shape] : expected) {
    ASSERT_TRUE(graphs.count(file)) << file;
    const Graph& g = graphs.at(file);
    EXPECT_EQ(g.precision, Precision::FP32) << file;
    ASSERT_EQ(g.outputs.size(), 1u) << file;
    EXPECT_EQ(g.node(g.outputs[0].value).type, (TensorType{DType::F32, shape})) << file;
  }
}

TEST(Examples, CoverEveryOpOfTheOpTable) {
  std::set<OpKind> used;
  for (const auto& [file, g] : load_all())
    for (const Node& n : g.nodes) used.insert(n.op);
  for (const OpInfo& info : all_ops())
    EXPECT_TRUE(used.count(info.op)) << "no example uses op '" << info.name << "'";
}

TEST(Examples, CoverPrecisionsAndReductionForms) {
  std::set<Precision> precisions;
  std::set<std::pair<OpKind, bool>> reduction_forms;  // (op, keepdim)
  bool batched_matmul = false, grouped_conv = false, dilated_conv = false, strided_conv = false;
  bool padded_strided_pool2d[2] = {false, false};  // max, avg: padding > 0 and stride != kernel
  bool value_used_twice = false, anchor_residual = false;
  for (const auto& [file, g] : load_all()) {
    precisions.insert(g.precision);
    auto users = g.users();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (op_category(n.op) == OpCategory::Reduction) reduction_forms.insert({n.op, n.attr_bool("keepdim")});
      if (n.op == OpKind::Matmul && g.node(n.operands[0]).type.rank() > 2) batched_matmul = true;
      if (n.op == OpKind::Conv2d) {
        grouped_conv |= n.attr_int("groups") > 1;
        dilated_conv |= n.attr_ints("dilation") != std::vector<int64_t>{1, 1};
        strided_conv |= n.attr_ints("stride") != std::vector<int64_t>{1, 1};
      }
      if (n.op == OpKind::MaxPool2d || n.op == OpKind::AvgPool2d) {
        bool padded = n.attr_ints("padding") != std::vector<int64_t>{0, 0};
        bool strided = n.attr_ints("stride") != n.attr_ints("kernel_size");
        padded_strided_pool2d[n.op == OpKind::AvgPool2d] |= padded && strided;
      }
      // One elementwise op reading the same value twice, directly or via
      // another op (h * sigmoid(h)), and an add that reads the anchor output.
      if (n.op == OpKind::Mul)
        for (ValueId a : n.operands)
          for (ValueId b : n.operands)
            if (a != b && g.node(b).operands.size() == 1 && g.node(b).operands[0] == a) value_used_twice = true;
      if (n.op == OpKind::Add)
        for (ValueId a : n.operands) anchor_residual |= is_anchor(g.node(a).op) && users[a].size() > 1;
    }
  }
  EXPECT_EQ(precisions.size(), 4u) << "fp32, tf32, bf16 and f16 should each have an example";
  for (OpKind op : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::LogSumExp})
    for (bool keep : {false, true})
      EXPECT_TRUE(reduction_forms.count({op, keep})) << op_name(op) << " keepdim=" << keep;
  EXPECT_TRUE(batched_matmul);
  EXPECT_TRUE(grouped_conv);
  EXPECT_TRUE(dilated_conv);
  EXPECT_TRUE(strided_conv);
  EXPECT_TRUE(padded_strided_pool2d[0]) << "max_pool2d with padding and stride != kernel";
  EXPECT_TRUE(padded_strided_pool2d[1]) << "avg_pool2d with padding and stride != kernel";
  EXPECT_TRUE(value_used_twice) << "x * f(x)";
  EXPECT_TRUE(anchor_residual) << "a residual add of the anchor output";
}

// docs/spec.md documents every op and attribute of the op table, and its
// complete example specs parse.
std::string read_doc() {
  std::ifstream in(std::string(FUSEJIT_SOURCE_DIR) + "/docs/spec.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Examples, DocsDescribeEveryOpAndAttribute) {
  const std::string doc = read_doc();
  ASSERT_FALSE(doc.empty()) << "docs/spec.md is missing";
  for (const OpInfo& info : all_ops()) {
    if (info.category == OpCategory::Leaf) continue;  // inputs and numbers have sections of their own
    EXPECT_NE(doc.find("| `" + info.name + "` |"), std::string::npos) << "no table row for op " << info.name;
    EXPECT_NE(doc.find("op: " + info.name + ","), std::string::npos) << "no example of op " << info.name;
    for (const AttrSpec& attr : info.attrs)
      EXPECT_NE(doc.find("`" + attr.name + "`"), std::string::npos) << info.name << "." << attr.name;
  }
}

TEST(Examples, DocSpecsParse) {
  const std::string doc = read_doc();
  int complete = 0;
  for (size_t pos = doc.find("```yaml\n"); pos != std::string::npos; pos = doc.find("```yaml\n", pos)) {
    pos += 8;
    const std::string block = doc.substr(pos, doc.find("```", pos) - pos);
    if (block.find("outputs:") == std::string::npos) continue;  // a fragment
    ++complete;
    auto g = parse_spec(block, "docs/spec.md");
    EXPECT_TRUE(g.ok()) << g.error().str() << "\n" << block;
  }
  EXPECT_GE(complete, 1);
}

}  // namespace
}  // namespace fusejit
