// runtime/loaded_program.cpp — module + kernels + scratch of one Program.
#include "runtime/loaded_program.h"

#include <algorithm>
#include <string>

#include "runtime/log.h"

namespace fusejit {
namespace {

constexpr unsigned kDefaultSharedLimit = 48 * 1024;  // above this, opt in per kernel

const char* kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::Input: return "input";
    case BufferKind::Output: return "output";
    case BufferKind::Scratch: return "scratch";
  }
  return "?";
}

}  // namespace

Expected<std::shared_ptr<LoadedProgram>> LoadedProgram::load(const Program& program,
                                                             const std::vector<char>& cubin,
                                                             int num_inputs, int num_outputs,
                                                             int device) {
  const std::string where = "program '" + program.name + "'";
  if (program.launches.empty()) return Error(where + " has no launches");
  if (num_inputs < 0 || num_outputs < 0) return Error(where + ": negative buffer count");

  std::shared_ptr<LoadedProgram> lp(new LoadedProgram());
  lp->num_inputs_ = num_inputs;
  lp->num_outputs_ = num_outputs;
  lp->device_ = device;
  auto module = CudaModule::load(cubin, device);
  if (!module) return Error(where + ": " + module.error().message);
  lp->module_ = module.take();

  const int num_scratch = static_cast<int>(program.scratch.size());
  for (size_t i = 0; i < program.launches.size(); ++i) {
    const LaunchSpec& spec = program.launches[i];
    const std::string launch_where = where + " launch " + std::to_string(i) + " (" + spec.kernel + ")";
    std::vector<BufferRef> refs = spec.args;
    for (const TensorMapSpec& t : spec.tensor_maps) refs.push_back(t.buffer);
    for (const BufferRef& ref : refs) {
      int limit = ref.kind == BufferKind::Input    ? num_inputs
                  : ref.kind == BufferKind::Output ? num_outputs
                                                   : num_scratch;
      if (ref.index < 0 || ref.index >= limit) {
        return Error(launch_where + ": " + kind_name(ref.kind) + " " + std::to_string(ref.index) +
                     " out of range (" + std::to_string(limit) + " available)");
      }
    }
    auto fn = lp->module_.function(spec.kernel);
    if (!fn) return Error(launch_where + ": " + fn.error().message);
    if (spec.shared_bytes > kDefaultSharedLimit) {
      if (auto s = set_max_dynamic_shared(*fn, spec.shared_bytes); !s)
        return Error(launch_where + ": cannot allow " + std::to_string(spec.shared_bytes) +
                     " bytes of shared memory: " + s.error().message);
    }
    if (spec.cluster > 8)
      if (auto s = allow_non_portable_clusters(*fn); !s)
        return Error(launch_where + ": cannot allow clusters of " + std::to_string(spec.cluster) +
                     " blocks: " + s.error().message);
    std::array<unsigned, 3> grid = spec.grid;
    if (spec.persistent) {  // one block per SM at most; each loops over its tiles
      auto info = device_info(device);
      if (!info) return Error(launch_where + ": " + info.error().message);
      unsigned blocks = static_cast<unsigned>(std::max(info->sm_count, 1));
      if (spec.cluster > 1) {  // whole clusters, as many as can be resident at once
        const auto cluster = static_cast<unsigned>(spec.cluster);
        auto resident = max_active_clusters(*fn, spec.cluster, spec.block, spec.shared_bytes);
        if (!resident) log::warn(launch_where + ": " + resident.error().message + "; assuming SMs / " + std::to_string(cluster));
        blocks = resident && *resident > 0 ? static_cast<unsigned>(*resident) * cluster : blocks / cluster * cluster;
        log::info(launch_where + ": " + std::to_string(blocks / cluster) + " clusters of " + std::to_string(cluster) +
                  " resident at once");
      }
      grid[0] = std::min<unsigned>(grid[0], std::max(blocks, static_cast<unsigned>(spec.cluster)));
    }
    lp->launches_.push_back(Launch{*fn, grid, spec.block, spec.shared_bytes, spec.args, spec.tensor_maps, spec.aligned});
  }

  for (const ScratchSpec& s : program.scratch) {
    if (s.bytes < 0) return Error(where + ": negative scratch size for " + s.what);
    auto buf = DeviceBuffer::allocate(static_cast<size_t>(s.bytes), device);
    if (!buf) return Error(where + ": scratch '" + s.what + "': " + buf.error().message);
    if (s.zeroed)
      if (Status z = buf->fill_bytes(0); !z) return Error(where + ": scratch '" + s.what + "': " + z.error().message);
    lp->scratch_.push_back(buf.take());
  }
  if (!lp->scratch_.empty()) {
    auto ev = CudaEvent::create(/*timing=*/false, device);
    if (!ev) return Error(where + ": " + ev.error().message);
    lp->scratch_free_ = ev.take();
  }
  return lp;
}

Status LoadedProgram::run(const std::vector<CUdeviceptr>& inputs,
                          const std::vector<CUdeviceptr>& outputs, CUstream stream) {
  if (static_cast<int>(inputs.size()) != num_inputs_ ||
      static_cast<int>(outputs.size()) != num_outputs_) {
    return Error("kernel expects " + std::to_string(num_inputs_) + " inputs and " +
                 std::to_string(num_outputs_) + " outputs, got " + std::to_string(inputs.size()) +
                 " and " + std::to_string(outputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i]) return Error("input " + std::to_string(i) + " is a null device pointer");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i]) return Error("output " + std::to_string(i) + " is a null device pointer");
  if (auto s = use_device(device_); !s) return s;

  if (scratch_.empty()) return enqueue(inputs, outputs, stream);
  // Under stream capture (a CUDA graph) the scratch's event can be neither waited on nor recorded: a
  // dependency across the capture's boundary is an error that ends the capture. The captured launches keep
  // the stream's order; a replay is not ordered against launches of this program on other streams.
  auto capturing = stream_is_capturing(stream);
  if (!capturing) return capturing.error();
  if (*capturing) return enqueue(inputs, outputs, stream);
  std::lock_guard<std::mutex> lock(scratch_mutex_);
  if (auto s = stream_wait_event(stream, scratch_free_); !s) return s;
  Status launched = enqueue(inputs, outputs, stream);
  Status recorded = scratch_free_.record(stream);  // even after a partial enqueue
  return launched ? recorded : launched;
}

Status LoadedProgram::enqueue(const std::vector<CUdeviceptr>& inputs,
                              const std::vector<CUdeviceptr>& outputs, CUstream stream) {
  std::vector<CUdeviceptr> values;
  std::vector<TensorMapBytes> maps;
  std::vector<void*> params;
  auto address = [&](const BufferRef& ref) {
    auto idx = static_cast<size_t>(ref.index);
    return ref.kind == BufferKind::Input    ? inputs[idx]
           : ref.kind == BufferKind::Output ? outputs[idx]
                                            : scratch_[idx].ptr();
  };
  for (size_t i = 0; i < launches_.size(); ++i)  // before anything is enqueued
    for (const AlignedBuffer& a : launches_[i].aligned)
      if (const CUdeviceptr at = address(a.buffer); at % static_cast<CUdeviceptr>(a.bytes))
        return Error(std::string(kind_name(a.buffer.kind)) + " " + std::to_string(a.buffer.index) + " at address " +
                     std::to_string(at) + " is not " + std::to_string(a.bytes) + "-byte aligned: kernel " +
                     std::to_string(i) + " copies it in " + std::to_string(a.bytes) +
                     "-byte pieces (pass a tensor whose data starts on such a boundary)");
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& l = launches_[i];
    values.clear();
    for (const BufferRef& ref : l.args) values.push_back(address(ref));
    maps.resize(l.tensor_maps.size());  // encoded per launch: they hold the buffers' addresses
    for (size_t t = 0; t < l.tensor_maps.size(); ++t) {
      const TensorMapSpec& m = l.tensor_maps[t];
      Status s = m.image[0] > 0 ? encode_tensor_map(maps[t], address(m.buffer), m.elem_bytes, m.bf16, 4,
                                                    m.image.data(), m.image_box.data(), m.swizzle128,
                                                    m.image_extent.data())
                                : encode_tensor_map_2d(maps[t], address(m.buffer), m.elem_bytes, m.bf16, m.rows,
                                                       m.cols, m.box_rows, m.box_cols, m.swizzle128);
      if (!s) return Error("launch " + std::to_string(i) + ": " + kind_name(m.buffer.kind) + " " +
                           std::to_string(m.buffer.index) + ": " + s.error().message);
    }
    params.clear();
    for (CUdeviceptr& v : values) params.push_back(&v);
    for (TensorMapBytes& m : maps) params.push_back(&m);
    Status s = launch_kernel(l.function, l.grid, l.block, l.shared_bytes, stream,
                             params.empty() ? nullptr : params.data());
    if (!s) return Error("launch " + std::to_string(i) + ": " + s.error().message);
  }
  return Status::success();
}

}  // namespace fusejit
