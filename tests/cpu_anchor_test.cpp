// CPU backend: the anchor kernel (packed, register-blocked GEMM; conv2d as an
// implicit GEMM) with its fused epilogue, against the fp64 reference. Ragged
// M/N/K (tiles and micro-tiles hanging over every edge, several k panels),
// linear with leading dims, matmul with broadcast batch dims, conv2d with
// stride / padding / dilation / groups, bf16 and f16 tensors, broadcasting
// epilogue loads and several outputs; outputs poisoned with NaN before a run.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "compiler/cpu_program.h"
#include "fusejit/builder.h"
#include "fusejit/reference.h"
#include "runtime/cpu/cpu_executable.h"

namespace fusejit {
namespace {

size_t element_bytes(DType dt) { return dt == DType::F32 ? 4 : 2; }

// Where a test puts each input: next to an inaccessible page (before its
// first byte or after its last), so that a kernel reading outside the
// tensor faults instead of reading a neighbour.
enum class Guard { None, Before, After };

class GuardedBuffer {
 public:
  GuardedBuffer(const std::vector<uint8_t>& bytes, Guard guard) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes.size() + page - 1) / page;
    size_ = (data_pages + 1) * page;
    base_ = static_cast<char*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    if (guard == Guard::After) {
      EXPECT_EQ(mprotect(base_ + data_pages * page, page, PROT_NONE), 0);
      data_ = base_ + data_pages * page - bytes.size();
    } else {
      EXPECT_EQ(mprotect(base_, page, PROT_NONE), 0);
      data_ = base_ + page;
    }
    std::memcpy(data_, bytes.data(), bytes.size());
  }
  ~GuardedBuffer() { munmap(base_, size_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  void* data() const { return data_; }

 private:
  char* base_ = nullptr;
  char* data_ = nullptr;
  size_t size_ = 0;
};

// Generates, compiles and runs `g` on seeded inputs; every output must match
// the fp64 reference at the precision's tolerance. Returns the anchor's `what`.
std::string check_graph(const Expected<Graph>& built, const std::string& label, const std::string& config = "",
                        Guard guard = Guard::None) {
  EXPECT_TRUE(built) << label << ": " << (built ? "" : built.error().str());
  if (!built) return "";
  const Graph& g = *built;
  CpuCodegenOptions opts;
  opts.config = config;
  Expected<CpuProgram> program = generate_cpu_program(g, opts);
  EXPECT_TRUE(program) << label << ": " << (program ? "" : program.error().str());
  if (!program) return "";
  auto shared = std::make_shared<const CpuProgram>(std::move(*program));
  Expected<std::vector<char>> object = cpu::compile_object(*shared);
  EXPECT_TRUE(object) << label << ": " << (object ? "" : object.error().str());
  if (!object) return "";
  auto exe = cpu::CpuExecutable::load(shared, std::move(*object));
  EXPECT_TRUE(exe) << label << ": " << (exe ? "" : exe.error().str());
  if (!exe) return "";

  const std::vector<HostTensor> inputs = make_random_inputs(g, 1234);
  std::vector<std::vector<uint8_t>> in_bytes;
  std::vector<void*> in_ptrs;
  for (const HostTensor& t : inputs) in_bytes.push_back(to_device_bytes(t));
  std::vector<std::unique_ptr<GuardedBuffer>> guarded;
  for (auto& b : in_bytes) {
    if (guard != Guard::None) guarded.push_back(std::make_unique<GuardedBuffer>(b, guard));
    in_ptrs.push_back(guard == Guard::None ? b.data() : guarded.back()->data());
  }
  std::vector<std::vector<uint8_t>> out_bytes;
  std::vector<void*> out_ptrs;
  for (const Output& o : g.outputs) {
    const TensorType& t = g.node(o.value).type;
    out_bytes.emplace_back(static_cast<size_t>(t.numel()) * element_bytes(t.dtype), uint8_t{0xFF});  // NaN
  }
  for (auto& b : out_bytes) out_ptrs.push_back(b.data());
  Status ran = (*exe)->run(in_ptrs, out_ptrs);
  EXPECT_TRUE(ran) << label << ": " << (ran ? "" : ran.error().str());

  auto ref = evaluate_reference(g, inputs);
  EXPECT_TRUE(ref) << label << ": " << (ref ? "" : ref.error().str());
  if (!ref) return "";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorType& t = g.node(g.outputs[i].value).type;
    const HostTensor out = from_device_bytes(t, out_bytes[i].data());
    const Comparison c = compare_outputs(out.data.data(), (*ref)[i].data(), t.numel(), g.precision);
    EXPECT_TRUE(c.pass) << label << " output '" << g.outputs[i].name << "': " << c.summary();
  }
  return shared->launches.empty() ? "" : shared->launches[0].what;
}

// ---- linear -------------------------------------------------------------------

Expected<Graph> linear(Precision p, int64_t m, int64_t k, int64_t n, bool bias, const std::string& tail) {
  GraphBuilder g(p, "cpu_linear");
  auto x = g.input("x", {m, k});
  auto w = g.input("w", {n, k});
  Value y = bias ? g.linear(x, w, g.input("b", {n})) : g.linear(x, w);
  if (tail == "relu") y = y.relu();
  if (tail == "gelu") y = y.gelu();
  g.output("y", y);
  return g.build();
}

TEST(CpuAnchor, LinearRaggedShapes) {
  const int64_t shapes[][3] = {{1, 1, 1}, {37, 19, 53}, {100, 500, 1000}, {13, 300, 17}, {64, 64, 64}, {5, 700, 3}};
  int i = 0;
  for (const auto& s : shapes) {
    const bool bias = i % 2 == 0;
    const std::string tail = i % 3 == 0 ? "relu" : i % 3 == 1 ? "gelu" : "";
    const std::string label = "linear " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" +
                              std::to_string(s[2]) + (bias ? " +bias " : " ") + tail;
    check_graph(linear(Precision::FP32, s[0], s[1], s[2], bias, tail), label);
    ++i;
  }
}

TEST(CpuAnchor, LinearForcedTiles) {
  // Small k panels (several per tile, a ragged last one) and other micro-tiles.
  for (const char* config : {"cpu_tile=6x16,cpu_kc=7", "cpu_tile=4x48,cpu_kc=5", "cpu_tile=14x32,cpu_kc=64",
                             "cpu_tile=4x16,cpu_mc=9,cpu_nc=40"})
    check_graph(linear(Precision::FP32, 37, 131, 53, true, "relu"), std::string("linear 37x131x53 ") + config, config);
}

TEST(CpuAnchor, LinearDescribesItsTiles) {
  const std::string what = check_graph(linear(Precision::FP32, 64, 32, 96, true, ""), "linear 64x32x96");
  EXPECT_NE(what.find("micro-tiles"), std::string::npos) << what;
}

TEST(CpuAnchor, LinearLeadingDimsAndBroadcastEpilogue) {
  GraphBuilder g(Precision::FP32, "cpu_linear_bcast");
  auto x = g.input("x", {3, 7, 45});
  auto w = g.input("w", {29, 45});
  auto b = g.input("b", {29});
  auto col_scale = g.input("col_scale", {29});
  auto row_shift = g.input("row_shift", {3, 7, 1});
  auto residual = g.input("residual", {3, 7, 29});
  auto y = g.linear(x, w, b);
  auto z = (y * col_scale + row_shift).sigmoid() + residual;
  g.output("y", y);
  g.output("z", z * 0.5);
  check_graph(g.build(), "linear [3,7,45] broadcast epilogue, two outputs");
}

TEST(CpuAnchor, LinearHalfPrecisions) {
  for (Precision p : {Precision::BF16, Precision::F16}) {
    const std::string name(precision_name(p));
    check_graph(linear(p, 37, 150, 53, true, "relu"), "linear 37x150x53 " + name);
    check_graph(linear(p, 1, 9, 100, false, "gelu"), "linear 1x9x100 " + name);
  }
}

// ---- matmul -------------------------------------------------------------------

Expected<Graph> matmul(Precision p, Shape a_shape, Shape b_shape, bool tail) {
  GraphBuilder g(p, "cpu_matmul");
  auto a = g.input("a", std::move(a_shape));
  auto b = g.input("b", std::move(b_shape));
  auto y = g.matmul(a, b);
  if (tail) y = (y * 0.125).tanh();
  g.output("y", y);
  return g.build();
}

TEST(CpuAnchor, MatmulBatchBroadcast) {
  check_graph(matmul(Precision::FP32, {2, 3, 17, 29}, {3, 29, 23}, true), "matmul [2,3,17,29] @ [3,29,23]");
  check_graph(matmul(Precision::FP32, {4, 33, 70}, {70, 41}, false), "matmul [4,33,70] @ [70,41]");
  check_graph(matmul(Precision::FP32, {1, 5, 8}, {3, 8, 50}, true), "matmul [1,5,8] @ [3,8,50]");
  check_graph(matmul(Precision::FP32, {2, 1, 9, 300}, {1, 3, 300, 35}, false), "matmul [2,1,9,300] @ [1,3,300,35]");
  check_graph(matmul(Precision::BF16, {2, 40, 24}, {2, 24, 33}, true), "matmul bf16 [2,40,24] @ [2,24,33]");
  check_graph(matmul(Precision::F16, {3, 8, 16}, {16, 65}, false), "matmul f16 [3,8,16] @ [16,65]");
}

// ---- conv2d -------------------------------------------------------------------

struct ConvCase {
  Shape x, w;
  Conv2dOptions o;
  bool bias = true;
  Precision p = Precision::FP32;
};

Expected<Graph> conv(const ConvCase& c) {
  GraphBuilder g(c.p, "cpu_conv");
  auto x = g.input("x", c.x);
  auto w = g.input("w", c.w);
  auto y = c.bias ? g.conv2d(x, w, g.input("b", {c.w[0]}), c.o) : g.conv2d(x, w, std::nullopt, c.o);
  auto chan = g.input("chan_scale", {c.w[0], 1, 1});
  g.output("y", (y * chan).relu());
  return g.build();
}

TEST(CpuAnchor, Conv2dGeometry) {
  std::vector<ConvCase> cases = {
      {{2, 3, 9, 11}, {5, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},           // same padding
      {{2, 6, 11, 13}, {8, 3, 3, 3}, {{2, 2}, {1, 1}, {2, 2}, 2}},          // stride, dilation, groups
      {{1, 4, 9, 10}, {4, 1, 3, 3}, {{1, 2}, {2, 0}, {1, 1}, 4}, false},    // depthwise, odd padding
      {{3, 16, 7, 7}, {33, 16, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}},         // 1x1
      {{1, 5, 20, 17}, {7, 5, 5, 3}, {{3, 2}, {3, 1}, {1, 3}, 1}, false},   // rectangular everything
      {{2, 64, 12, 12}, {40, 64, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},       // K = 576: several k panels
      {{1, 2, 3, 3}, {1, 2, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},            // a 1x1 output
  };
  for (size_t i = 0; i < cases.size(); ++i)
    check_graph(conv(cases[i]), "conv case " + std::to_string(i));
  check_graph(conv(cases[1]), "conv case 1, 6x16 tiles kc 5", "cpu_tile=6x16,cpu_kc=5");
}

// Output rows at least one panel wide (OW >= NR): panels that straddle two
// output rows take the two-row masked-load im2col path (per-tap tables of
// runs and masks; per k beyond 64 taps).
TEST(CpuAnchor, Conv2dWideRows) {
  std::vector<ConvCase> cases = {
      {{1, 3, 9, 40}, {6, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},          // OW 40, same padding
      {{2, 2, 7, 37}, {5, 2, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}, false},   // OW 35, no padding
      {{1, 3, 11, 50}, {4, 3, 3, 3}, {{2, 1}, {1, 1}, {1, 1}, 1}},         // stride 2 along h only
      {{1, 4, 12, 34}, {6, 2, 3, 3}, {{1, 1}, {2, 0}, {2, 1}, 2}},         // dilation along h, groups
      {{1, 3, 5, 64}, {4, 3, 5, 5}, {{1, 1}, {2, 2}, {1, 1}, 1}},          // OW 64: exactly two panels
      {{1, 2, 12, 60}, {3, 2, 9, 9}, {{1, 1}, {4, 4}, {1, 1}, 1}},         // 81 taps: runs per k, no tables
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    check_graph(conv(cases[i]), "wide conv case " + std::to_string(i));
    check_graph(conv(cases[i]), "wide conv case " + std::to_string(i) + ", 6x16 tiles kc 7", "cpu_tile=6x16,cpu_kc=7");
  }
  for (Precision p : {Precision::BF16, Precision::F16}) {
    ConvCase c = cases[0];
    c.p = p;
    check_graph(conv(c), std::string("wide conv ") + std::string(precision_name(p)));
  }
}

// Unpadded convs with output rows at least one panel wide read the input
// with plain (unmasked) vector loads blended at the panel's row split: every
// load must stay inside the input, checked with an inaccessible page right
// before and right after each input tensor.
TEST(CpuAnchor, Conv2dUnpaddedRowsStayInsideTheInput) {
  std::vector<ConvCase> cases = {
      {{1, 3, 9, 52}, {4, 3, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},          // OW 50
      {{2, 2, 11, 60}, {5, 2, 3, 3}, {{2, 1}, {0, 0}, {2, 1}, 1}, false},  // stride and dilation along h
      {{1, 8, 4, 64}, {8, 8, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}},          // 1x1: OW == W
      {{2, 4, 6, 100}, {6, 2, 2, 5}, {{1, 1}, {0, 0}, {1, 1}, 2}},         // groups, 2x5 taps
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (Guard guard : {Guard::Before, Guard::After})
      for (const char* config : {"", "cpu_tile=6x16,cpu_kc=7"}) {
        const std::string label = "unpadded conv case " + std::to_string(i) + (guard == Guard::After ? ", page after" : ", page before") + " " + config;
        check_graph(conv(cases[i]), label, config, guard);
      }
  for (Precision p : {Precision::BF16, Precision::F16}) {
    ConvCase c = cases[0];
    c.p = p;
    check_graph(conv(c), std::string("unpadded conv ") + std::string(precision_name(p)), "", Guard::After);
  }
}

TEST(CpuAnchor, Conv2dHalfPrecisions) {
  for (Precision p : {Precision::BF16, Precision::F16}) {
    ConvCase c{{2, 6, 10, 9}, {12, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}, true, p};
    check_graph(conv(c), std::string("conv ") + std::string(precision_name(p)));
  }
}

}  // namespace
}  // namespace fusejit
