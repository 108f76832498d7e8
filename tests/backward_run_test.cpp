// Engine::compile_backward on a device: the forward (with saved values) and
// every stage run with caller-owned buffers (saved values, temporaries and
// gradients poisoned with NaN first); each input gradient is compared with the
// program run on the fp64 reference (itself checked against finite differences
// in autodiff_test.cpp) at the precision's tolerance. CpuBackward: the LLVM
// backend (skips without LLVM); GpuBackward: CUDA (skips without a device).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "compiler/cpu_program.h"
#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "runtime/cuda_driver.h"
#include "tests/autodiff_reference.h"
#include "tests/random_chains.h"

namespace fusejit {
namespace {

// Host or device memory for the program's buffers.
struct Memory {
  Backend backend;
  std::vector<std::vector<uint8_t>> host;
  std::vector<DeviceBuffer> device;

  Expected<DevicePtr> put(const std::vector<uint8_t>& bytes) {
    if (backend == Backend::Cpu) {
      host.push_back(bytes.empty() ? std::vector<uint8_t>(1) : bytes);
      return static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(host.back().data()));
    }
    auto b = DeviceBuffer::allocate(bytes.size());
    if (!b) return b.error();
    if (Status s = b->upload(bytes.data(), bytes.size()); !s) return s.error();
    device.push_back(std::move(*b));
    return static_cast<DevicePtr>(device.back().ptr());
  }
  std::vector<uint8_t> get(DevicePtr p, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    if (backend == Backend::Cpu) {
      std::memcpy(out.data(), reinterpret_cast<const void*>(static_cast<uintptr_t>(p)), bytes);
      return out;
    }
    for (const DeviceBuffer& b : device)
      if (b.ptr() == p) EXPECT_TRUE(b.download(out.data(), bytes));
    return out;
  }
};

size_t bytes_of(const TensorType& t) { return static_cast<size_t>(t.numel()) * static_cast<size_t>(dtype_size(t.dtype)); }

// `loose_rel_l2` > 0: pass at that relative L2 too (random chains, see run_random).
void check_graph_on_device(Backend backend, const Expected<Graph>& g, const BackwardOptions& opt,
                           const std::string& config, double loose_rel_l2 = 0);

void check_on_device(Backend backend, const std::string& label, const std::string& yaml,
                     const BackwardOptions& opt = {}, const std::string& config = "") {
  SCOPED_TRACE(label);
  check_graph_on_device(backend, parse_spec(yaml, label + ".yaml"), opt, config);
}

void check_graph_on_device(Backend backend, const Expected<Graph>& g, const BackwardOptions& opt,
                           const std::string& config, double loose_rel_l2) {
  ASSERT_TRUE(g) << g.error().str();
  Engine engine;
  CompileOptions co;
  co.backend = backend;
  co.config = config;
  auto bk = engine.compile_backward(*g, opt, co);
  ASSERT_TRUE(bk) << bk.error().str();
  const BackwardProgram& p = (*bk)->program();

  auto inputs = make_random_inputs(*g, 3);
  std::vector<HostTensor> out_grads;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (const Output& o : g->outputs) {
    HostTensor t{g->node(o.value).type, {}};
    for (int64_t i = 0; i < t.type.numel(); ++i) t.data.push_back(round_to_dtype(normal(rng), t.type.dtype));
    out_grads.push_back(std::move(t));
  }
  Memory mem{backend, {}, {}};
  mem.device.reserve(64);
  std::map<std::string, DevicePtr> buffers;
  const auto ids = g->inputs();
  size_t next_grad = 0;
  for (const BackwardBuffer& b : p.buffers) {
    std::vector<uint8_t> bytes;
    if (b.role == BufferRole::ForwardInput) {
      for (size_t j = 0; j < ids.size(); ++j)
        if (g->node(ids[j]).name == b.name) bytes = to_device_bytes(inputs[j]);
    } else if (b.role == BufferRole::OutputGrad) {
      bytes = to_device_bytes(out_grads.at(next_grad++));
    } else {
      bytes.assign(bytes_of(b.type), 0xFF);  // NaN poison
    }
    auto ptr = mem.put(bytes);
    ASSERT_TRUE(ptr) << ptr.error().str();
    buffers[b.name] = *ptr;
  }
  for (const Output& o : p.forward.outputs)  // forward outputs that are not buffers of the backward
    if (!buffers.count(o.name)) {
      auto ptr = mem.put(std::vector<uint8_t>(bytes_of(p.forward.node(o.value).type), 0xFF));
      ASSERT_TRUE(ptr);
      buffers[o.name] = *ptr;
    }
  ASSERT_TRUE((*bk)->run_forward(buffers));
  Status run = (*bk)->run_backward(buffers);
  ASSERT_TRUE(run) << run.error().str();
  if (backend == Backend::Cuda) ASSERT_TRUE(device_synchronize(0));

  auto want = testing::backward_on_reference(p, inputs, out_grads, /*round=*/true);
  ASSERT_TRUE(want) << want.error().str();
  for (const auto& [input, buffer] : p.input_grads) {
    const BackwardBuffer* b = p.buffer(buffer);
    HostTensor got = from_device_bytes(b->type, mem.get(buffers.at(buffer), bytes_of(b->type)).data());
    const HostTensor& ref = want->at(input);
    std::vector<double> ref64(ref.data.begin(), ref.data.end());
    Comparison c = compare_outputs(got.data.data(), ref64.data(), static_cast<int64_t>(ref64.size()), g->precision);
    const bool loose_pass = loose_rel_l2 > 0 && c.nan_count == 0 && c.rel_l2 <= loose_rel_l2;
    EXPECT_TRUE(c.pass || loose_pass) << "grad of '" << input << "': " << c.summary() << "\n" << print_backward(p);
  }
}

std::string spec(const std::string& precision, const std::string& inputs, const std::string& ops,
                 const std::string& outputs = "[y]") {
  return "name: backward_case\nprecision: " + precision + "\ninputs:\n" + inputs + "ops:\n" + ops +
         "outputs: " + outputs + "\n";
}

void run_cases(Backend backend) {
  const std::string lin = "  - {name: x, shape: [70, 96]}\n  - {name: w, shape: [130, 96]}\n  - {name: b, shape: [130]}\n"
                          "  - {name: p, shape: [130], init: normal}\n";
  check_on_device(backend, "linear_bias_relu",
                  spec("fp32", lin, "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: s, op: mul, args: [z, p]}\n"
                                    "  - {name: y, op: relu, args: [s]}\n"));
  check_on_device(backend, "linear_gelu_softmax_two_outputs",
                  spec("fp32", lin, "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: g, op: gelu, args: [z]}\n"
                                    "  - {name: gp, op: mul, args: [g, p]}\n  - {name: y, op: softmax, args: [gp], dim: 1}\n"
                                    "  - {name: r, op: logsumexp, args: [z], dims: [1]}\n  - {name: q, op: add, args: [r, 1.0]}\n",
                       "[y, q]"));
  check_on_device(backend, "linear_sum_rows_no_grad_x",
                  spec("fp32", lin, "  - {name: z, op: linear, args: [x, w, b]}\n  - {name: t, op: tanh, args: [z]}\n"
                                    "  - {name: s, op: sum, args: [t], dims: [1], keepdim: true}\n"
                                    "  - {name: y, op: mul, args: [s, p]}\n"),
                  BackwardOptions{{"x"}});
  check_on_device(backend, "matmul_batched_residual",
                  spec("fp32", "  - {name: a, shape: [3, 40, 64]}\n  - {name: bm, shape: [64, 64]}\n",
                       "  - {name: z, op: matmul, args: [a, bm]}\n  - {name: s, op: square, args: [z]}\n"
                       "  - {name: y, op: add, args: [s, a]}\n"));
  // conv2d: dX as a conv of dZ with the flipped weight, dW as a linear over im2col; pools' backward
  const std::string conv = "  - {name: x, shape: [3, 5, 19, 23]}\n  - {name: w, shape: [12, 5, 3, 3]}\n"
                           "  - {name: b, shape: [12]}\n  - {name: p, shape: [12, 1, 1], init: normal}\n";
  check_on_device(backend, "seed1_conv_relu_bias",
                  spec("fp32", conv, "  - {name: z, op: conv2d, args: [x, w, b]}\n  - {name: r, op: relu, args: [z]}\n"
                                     "  - {name: y, op: add, args: [r, p]}\n"));
  check_on_device(backend, "seed3_conv_tanh_scale_bias_maxpool",
                  spec("fp32", conv, "  - {name: z, op: conv2d, args: [x, w, b]}\n  - {name: t, op: tanh, args: [z]}\n"
                                     "  - {name: s, op: mul, args: [t, 2.0]}\n  - {name: u, op: add, args: [s, p]}\n"
                                     "  - {name: y, op: max_pool2d, args: [u], kernel_size: 4}\n"));
  check_on_device(backend, "conv_padded_dilated_strided_avgpool",
                  spec("fp32", "  - {name: x, shape: [2, 6, 17, 20]}\n  - {name: w, shape: [8, 6, 3, 3]}\n",
                       "  - {name: z, op: conv2d, args: [x, w], padding: 2, dilation: [2, 1], stride: [1, 2]}\n"
                       "  - {name: y, op: avg_pool2d, args: [z], kernel_size: 3, stride: 2, padding: 1}\n"));
  check_on_device(backend, "grouped_conv_global_pool_dx",
                  spec("fp32", "  - {name: x, shape: [2, 8, 12, 12]}\n  - {name: w, shape: [16, 2, 3, 3]}\n",
                       "  - {name: z, op: conv2d, args: [x, w], groups: 4, padding: 1}\n"
                       "  - {name: g, op: gelu, args: [z]}\n  - {name: y, op: global_avg_pool, args: [g]}\n"),
                  BackwardOptions{{"w"}});
  // the norms: statistics recomputed from the saved Z; batch_norm's running statistics get no gradient
  const std::string conv_affine = "  - {name: x, shape: [2, 6, 13, 11]}\n  - {name: w, shape: [12, 6, 3, 3]}\n"
                                  "  - {name: b, shape: [12]}\n  - {name: gamma, shape: [12], init: normal}\n"
                                  "  - {name: beta, shape: [12], init: normal}\n";
  check_on_device(backend, "conv_group_norm_swish",
                  spec("fp32", conv_affine,
                       "  - {name: z, op: conv2d, args: [x, w, b], padding: 1}\n"
                       "  - {name: n, op: group_norm, args: [z, gamma, beta], num_groups: 4}\n"
                       "  - {name: y, op: silu, args: [n]}\n"));
  check_on_device(backend, "conv_batch_norm_relu_instance_norm",
                  spec("fp32", conv_affine + "  - {name: rm, shape: [12], init: normal}\n"
                                             "  - {name: rv, shape: [12], init: uniform01}\n",
                       "  - {name: z, op: conv2d, args: [x, w, b]}\n"
                       "  - {name: bn, op: batch_norm, args: [z, rm, rv, gamma, beta]}\n"
                       "  - {name: r, op: relu, args: [bn]}\n"
                       "  - {name: y, op: instance_norm, args: [r], eps: 1e-3}\n"));
  for (const std::string precision : {"fp32", "bf16"})
    check_on_device(backend, "linear_layer_norm_gelu_" + precision,
                    spec(precision, lin, "  - {name: z, op: linear, args: [x, w, b]}\n"
                                         "  - {name: n, op: layer_norm, args: [z, p, b], normalized_shape: [130]}\n"
                                         "  - {name: y, op: gelu, args: [n]}\n"));
  // (avg, not max, pooling: a tf32 / bf16 forward moves near-tied maxima, as a relu mask flips near 0)
  for (const std::string precision : {"tf32", "bf16"})
    check_on_device(backend, "conv_avgpool_" + precision,
                    spec(precision, "  - {name: x, shape: [2, 16, 18, 18]}\n  - {name: w, shape: [32, 16, 3, 3]}\n",
                         "  - {name: z, op: conv2d, args: [x, w]}\n  - {name: t, op: tanh, args: [z]}\n"
                         "  - {name: y, op: avg_pool2d, args: [t], kernel_size: 2}\n"));
  for (const std::string precision : {"tf32", "bf16"})
    check_on_device(backend, "linear_" + precision,
                    spec(precision, "  - {name: x, shape: [64, 128]}\n  - {name: w, shape: [96, 128]}\n",
                         "  - {name: z, op: linear, args: [x, w]}\n  - {name: y, op: silu, args: [z]}\n"));
}

// The random chains of tests/random_chains.h that have a backward (linear and matmul anchors), compiled.
// Their gradients may be ill-conditioned in fp32 the way PyTorch's are (tanh of a saturated value: 1 - t^2
// from an fp32 t, gradients of 1e-6 with 1e-3 relative error), so each passes at the precision's tolerance
// or at a relative L2 of 1e-2 (a wrong derivative or a missed write is off by O(1)).
void run_random(Backend backend, int count) {
  int run = 0;
  for (uint64_t seed = 1; run < count && seed < 500; ++seed) {
    auto g = testing::random_chain(seed);
    if (!g || !build_backward(*g)) continue;
    SCOPED_TRACE("random chain " + std::to_string(seed) + "\n" + print_graph(*g));
    check_graph_on_device(backend, g, {}, "", 1e-2);
    ++run;
  }
  EXPECT_EQ(run, count);
}

TEST(CpuBackward, RandomChainsMatchTheReferenceBackward) {
  if (!cpu_backend_available()) GTEST_SKIP() << "no LLVM in this build";
  run_random(Backend::Cpu, std::getenv("FJ_BW_N") ? std::atoi(std::getenv("FJ_BW_N")) : 30);
}

TEST(GpuBackward, RandomChainsMatchTheReferenceBackward) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  run_random(Backend::Cuda, 60);
}

TEST(CpuBackward, ChainsMatchTheReferenceBackward) {
  if (!cpu_backend_available()) GTEST_SKIP() << "no LLVM in this build";
  run_cases(Backend::Cpu);
}

TEST(GpuBackward, ChainsMatchTheReferenceBackward) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  run_cases(Backend::Cuda);
}

}  // namespace
}  // namespace fusejit
