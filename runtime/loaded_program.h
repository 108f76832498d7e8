// runtime/loaded_program.h — a Program's CUBIN loaded as a module on one
// device: its kernels in Program::launches order and its scratch buffers.
//
// Scratch and concurrency: the scratch buffers are allocated once and shared
// by every run. run() holds a mutex while it enqueues, makes the caller's
// stream wait for the previous run's "scratch free" event, and records that
// event after its last launch. Runs on different streams therefore never use
// scratch at the same time on the GPU, and the host never blocks. Programs
// without scratch take neither the lock nor the event.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "compiler/program.h"
#include "fusejit/error.h"
#include "runtime/cuda_driver.h"

namespace fusejit {

class LoadedProgram {
 public:
  // Loads `cubin` (compiled from `program`) on `device`. `num_inputs` and
  // `num_outputs` are the graph's counts; every BufferRef must be in range.
  static Expected<std::shared_ptr<LoadedProgram>> load(const Program& program,
                                                       const std::vector<char>& cubin,
                                                       int num_inputs, int num_outputs,
                                                       int device = 0);

  // Enqueues every launch on `stream` (0 = the default stream). Pointer counts
  // must match and no pointer may be 0; failures are Errors.
  Status run(const std::vector<CUdeviceptr>& inputs, const std::vector<CUdeviceptr>& outputs,
             CUstream stream);

  int device() const { return device_; }
  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return num_outputs_; }

 private:
  struct Launch {
    CUfunction function = nullptr;
    std::array<unsigned, 3> grid{}, block{};
    unsigned shared_bytes = 0;
    std::vector<BufferRef> args;
    std::vector<TensorMapSpec> tensor_maps;
    std::vector<AlignedBuffer> aligned;
  };
  LoadedProgram() = default;
  Status enqueue(const std::vector<CUdeviceptr>& inputs, const std::vector<CUdeviceptr>& outputs,
                 CUstream stream);

  CudaModule module_;
  std::vector<Launch> launches_;
  std::vector<DeviceBuffer> scratch_;
  std::mutex scratch_mutex_;  // held by run() while enqueueing, if scratch_ is not empty
  CudaEvent scratch_free_;    // recorded after each run that uses scratch
  int num_inputs_ = 0, num_outputs_ = 0, device_ = 0;
};

}  // namespace fusejit
