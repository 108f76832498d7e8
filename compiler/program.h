// compiler/program.h — what codegen hands to the runtime: one CUDA source
// (compiled to one module) and the ordered launches that run it.
//
// Kernel ABI: every kernel parameter is a device pointer (BufferRef). Graph
// inputs are contiguous tensors of their declared dtype, in declaration order;
// outputs likewise in Graph::outputs order; scratch buffers are intermediates
// the plan could not keep in registers (allocated by the runtime, owned by the
// loaded program). Kernels are `extern "C" __global__` so their names read the
// same in Nsight as in the source.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fusejit {

enum class BufferKind : uint8_t { Input, Output, Scratch };

struct BufferRef {
  BufferKind kind;
  int index;  // into the graph's inputs, outputs, or Program::scratch
  bool operator==(const BufferRef&) const = default;
};

// A TMA tensor map (sm_90) over a buffer, passed by value as a
// __grid_constant__ kernel parameter after the buffer parameters. The runtime
// encodes it at each launch from the buffer's address: a row-major 2-D view
// of `rows` x `cols` elements, tiles of box_rows x box_cols, 128-byte swizzle
// (operand tiles) or none (the dense output tiles of TMA stores); elements
// outside the view read as zero, and stores clip to it.
struct TensorMapSpec {
  BufferRef buffer;
  int elem_bytes = 4;    // 2: bf16 / f16 (see `bf16`), 4: f32
  bool bf16 = false;     // 2-byte elements: bf16 rather than f16
  int64_t rows = 0, cols = 0;
  int box_rows = 0, box_cols = 0;
  bool swizzle128 = true;
  // conv2d's NHWC input (conv_wgmma.cuh): where image[0] > 0, a dense 4-D
  // view of {C, W, H, N} elements (C contiguous) in boxes of image_box
  // {C, W, H, 1} replaces the 2-D view (rows, cols and boxes unused).
  std::array<int64_t, 4> image{};
  std::array<int, 4> image_box{};
  // Where image_extent[d] > 0: TMA sees the first image_extent[d] elements of dim d only (zeros past them), the
  // strides staying the dense image's (the wgmma dW's per-kernel-column views of x).
  std::array<int64_t, 4> image_extent{};
  bool operator==(const TensorMapSpec&) const = default;
};

// A buffer the kernel reads with vector copies: its address must be a
// multiple of `bytes` (the runtime checks before launching).
struct AlignedBuffer {
  BufferRef buffer;
  int bytes = 1;
  bool operator==(const AlignedBuffer&) const = default;
};

struct LaunchSpec {
  std::string kernel;                     // __global__ name in Program::source
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  unsigned shared_bytes = 0;              // dynamic shared memory per block
  std::vector<BufferRef> args;            // parameters, in order
  std::vector<TensorMapSpec> tensor_maps; // parameters after `args`, in order
  std::vector<AlignedBuffer> aligned;     // alignment the kernel's loads need
  bool persistent = false;                // grid[0] counts tiles; the runtime launches
                                          // min(grid[0], SMs) blocks that loop over them
  int cluster = 1;                        // blocks per cluster along x (compiled in with
                                          // __cluster_dims__; persistent grids stay a multiple;
                                          // over 8 the runtime allows the non-portable size)
  bool operand_staging = false;           // prepares the next launch's operands (3xTF32's
                                          // residuals); computes no graph value
};

struct ScratchSpec {
  int64_t bytes = 0;
  std::string what;  // e.g. "conv2d output before max_pool2d (f32[...])"
  bool zeroed = false;  // zero when allocated; kernels leave it zero after each launch
};

struct Program {
  std::string name;                  // descriptive, e.g. "fj_conv2d_k3_relu_add"
  std::string source;                // CUDA C++; may #include "fusejit/<x>.cuh"
  std::vector<LaunchSpec> launches;  // run in this order on one stream
  std::vector<ScratchSpec> scratch;
  std::string plan_text;             // the fusion plan: what fused, what did not, why
};

}  // namespace fusejit
