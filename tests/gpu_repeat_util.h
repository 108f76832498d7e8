// tests/gpu_repeat_util.h — for the GPU split-K tests: a kernel launched
// `runs` times on the same random inputs (its output poisoned with 0xFF bytes
// before each launch) gives bitwise the same first output every time.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "fusejit/engine.h"
#include "fusejit/reference.h"
#include "runtime/cuda_driver.h"

namespace fusejit::testing {

inline void expect_bitwise_repeatable(CompiledKernel& kernel, const Graph& g, int runs = 4, uint64_t seed = 5) {
  std::vector<DeviceBuffer> buffers;
  std::vector<DevicePtr> in;
  for (const HostTensor& t : make_random_inputs(g, seed)) {
    std::vector<uint8_t> bytes = to_device_bytes(t);
    auto buf = DeviceBuffer::allocate(bytes.size());
    ASSERT_TRUE(buf.ok() && buf->upload(bytes.data(), bytes.size()).ok());
    in.push_back(buf->ptr());
    buffers.push_back(buf.take());
  }
  const TensorType& type = g.node(g.outputs[0].value).type;
  auto y = DeviceBuffer::allocate(static_cast<size_t>(type.numel()) * dtype_size(type.dtype));
  ASSERT_TRUE(y.ok());
  std::vector<uint8_t> first;
  for (int run = 0; run < runs; ++run) {
    ASSERT_TRUE(y->fill_bytes(0xFF).ok());
    ASSERT_TRUE(kernel.launch(in, {y->ptr()}).ok());
    ASSERT_TRUE(device_synchronize().ok());
    std::vector<uint8_t> bytes(y->size());
    ASSERT_TRUE(y->download(bytes.data(), bytes.size()).ok());
    if (run == 0) first = bytes;
    else EXPECT_EQ(bytes, first) << "launch " << run << " differs (kernel " << kernel.name() << ")";
  }
}

}  // namespace fusejit::testing
