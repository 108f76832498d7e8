#include "runtime/kernel_check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "runtime/cuda_driver.h"

namespace fusejit {

double anchor_macs(const Graph& g) {
  auto a = g.anchor();
  if (!a) return 0;
  const Node& n = g.node(*a);
  const Shape& w = g.node(n.operands[1]).type.shape;
  double out = static_cast<double>(n.type.numel());
  switch (n.op) {
    case OpKind::Linear: return out * static_cast<double>(w[1]);
    case OpKind::Matmul: return out * static_cast<double>(w[w.size() - 2]);
    case OpKind::Conv2d: return out * static_cast<double>(w[1] * w[2] * w[3]);
    case OpKind::Conv2dWeightGrad: return out * static_cast<double>(w[0] * w[2] * w[3]);  // w: grad [N, Cout, Ho, Wo]
    default: return 0;
  }
}

namespace {

bool dense_reference_ok(const Graph& g, const CheckOptions& opts) {
  if (anchor_macs(g) > opts.dense_limit_macs) return false;
  for (const Node& n : g.nodes)
    if (n.type.numel() > opts.dense_limit_elems) return false;
  return true;
}

std::vector<OutputCheck> compare_all(const Graph& g, const ReferenceData& ref, const std::vector<HostTensor>& outs) {
  std::vector<OutputCheck> checks;
  for (size_t k = 0; k < outs.size(); ++k) {
    const ReferenceData::OutputRef& r = ref.outputs[k];
    Comparison cmp = r.sampled ? compare_outputs(outs[k].data.data(), r.values.data(), r.indices, g.precision)
                               : compare_outputs(outs[k].data.data(), r.values.data(), outs[k].type.numel(), g.precision);
    checks.push_back({g.outputs[k].name, r.sampled, cmp});
  }
  return checks;
}

TimingStats stats_of(std::vector<double> ms) {
  TimingStats st;
  st.iters = static_cast<int>(ms.size());
  if (ms.empty()) return st;
  std::sort(ms.begin(), ms.end());
  st.median_ms = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  st.min_ms = ms.front();
  st.max_ms = ms.back();
  for (double v : ms) st.mean_ms += v / static_cast<double>(ms.size());
  return st;
}

// The work recorded before `done` finished, or an error after opts.launch_timeout_s: the device is then
// abandoned (later calls fail rather than block behind the hung kernel).
Status wait_for_launch(const CudaEvent& done, const std::string& what, const CheckOptions& opts) {
  auto finished = done.wait_for(opts.launch_timeout_s);
  if (!finished) return finished.error();
  if (*finished) return Status::success();
  abandon_device(what);
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", opts.launch_timeout_s);
  return Error("cuda: " + what + " has not finished after " + limit + " s (a hang?)");
}

Status wait_for_launch(const CompiledKernel& kernel, const CheckOptions& opts) {
  auto done = CudaEvent::create(false, kernel.device());
  if (!done) return done.error();
  if (Status s = done->record(nullptr); !s) return s;
  return wait_for_launch(*done, "kernel " + kernel.name(), opts);
}

Expected<TimingStats> time_kernel(const CompiledKernel& kernel, const std::vector<DevicePtr>& in,
                                  const std::vector<DevicePtr>& out, const CheckOptions& opts) {
  auto flush = DeviceBuffer::allocate(opts.l2_flush_bytes, kernel.device());
  if (!flush) return flush.error();
  auto start = CudaEvent::create(true, kernel.device());
  auto stop = CudaEvent::create(true, kernel.device());
  if (!start) return start.error();
  if (!stop) return stop.error();
  for (int i = 0; i < opts.warmup; ++i)
    if (Status s = kernel.launch(in, out); !s) return s.error();
  std::vector<double> ms;
  for (int i = 0; i < opts.iters; ++i) {
    if (Status s = flush->fill_bytes(static_cast<unsigned char>(i)); !s) return s.error();
    if (Status s = start->record(nullptr); !s) return s.error();
    if (Status s = kernel.launch(in, out); !s) return s.error();
    if (Status s = stop->record(nullptr); !s) return s.error();
    if (Status s = wait_for_launch(*stop, "kernel " + kernel.name() + " (timed)", opts); !s) return s.error();
    auto t = elapsed_ms(*start, *stop);
    if (!t) return t.error();
    ms.push_back(*t);
  }
  return stats_of(std::move(ms));
}

// The CPU backend: host buffers, a wall-clock timing per trial (launch is
// synchronous there), the caches flushed by writing a buffer before each.
Expected<CheckResult> check_kernel_host(const CompiledKernel& kernel, const Graph& g, const ReferenceData& ref,
                                        const CheckOptions& opts) {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<DevicePtr> in_ptrs, out_ptrs;
  for (const HostTensor& t : ref.inputs) bufs.push_back(to_device_bytes(t));
  std::vector<TensorType> out_types;
  for (const Output& o : g.outputs) out_types.push_back(g.node(o.value).type);
  for (const TensorType& t : out_types)  // NaN poison: unwritten elements fail
    bufs.emplace_back(static_cast<size_t>(t.numel()) * static_cast<size_t>(dtype_size(t.dtype)), uint8_t{0xFF});
  for (size_t i = 0; i < bufs.size(); ++i)
    (i < ref.inputs.size() ? in_ptrs : out_ptrs).push_back(reinterpret_cast<DevicePtr>(bufs[i].data()));
  if (Status s = kernel.launch(in_ptrs, out_ptrs); !s) return s.error();
  std::vector<HostTensor> outs;
  for (size_t k = 0; k < out_types.size(); ++k)
    outs.push_back(from_device_bytes(out_types[k], bufs[ref.inputs.size() + k].data()));
  CheckResult r;
  r.outputs = compare_all(g, ref, outs);
  r.pass = std::all_of(r.outputs.begin(), r.outputs.end(), [](const OutputCheck& c) { return c.cmp.pass; });
  if (!opts.time) return r;
  std::vector<uint8_t> flush(std::min<size_t>(opts.l2_flush_bytes, size_t{64} << 20));
  for (int i = 0; i < opts.warmup; ++i)
    if (Status s = kernel.launch(in_ptrs, out_ptrs); !s) return s.error();
  std::vector<double> ms;
  for (int i = 0; i < opts.iters; ++i) {
    std::memset(flush.data(), i, flush.size());
    const auto t0 = std::chrono::steady_clock::now();
    if (Status s = kernel.launch(in_ptrs, out_ptrs); !s) return s.error();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.timing = stats_of(std::move(ms));
  return r;
}

}  // namespace

Expected<ReferenceData> make_reference_data(const Graph& g, const CheckOptions& opts) {
  ReferenceData data;
  data.inputs = make_random_inputs(g, opts.seed);
  if (dense_reference_ok(g, opts)) {
    auto ref = evaluate_reference(g, data.inputs);
    if (!ref) return ref.error();
    for (auto& values : *ref) data.outputs.push_back({false, {}, std::move(values)});
    return data;
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    int64_t numel = g.node(g.outputs[k].value).type.numel();
    auto idx = pick_samples(numel, opts.samples, opts.seed + 7919 * (k + 1));
    auto values = evaluate_reference_at(g, data.inputs, static_cast<int>(k), idx);
    if (!values) return values.error();
    data.outputs.push_back({static_cast<int64_t>(idx.size()) < numel, std::move(idx), values.take()});
  }
  return data;
}

Expected<CheckResult> check_kernel(const CompiledKernel& kernel, const Graph& g, const CheckOptions& opts) {
  auto ref = make_reference_data(g, opts);
  if (!ref) return ref.error();
  return check_kernel(kernel, g, *ref, opts);
}

Expected<CheckResult> check_kernel(const CompiledKernel& kernel, const Graph& g, const ReferenceData& ref,
                                   const CheckOptions& opts) {
  if (kernel.backend() == Backend::Cpu) return check_kernel_host(kernel, g, ref, opts);
  const std::vector<HostTensor>& inputs = ref.inputs;
  std::vector<DeviceBuffer> bufs;
  std::vector<DevicePtr> in_ptrs, out_ptrs;
  for (const HostTensor& t : inputs) {
    std::vector<uint8_t> bytes = to_device_bytes(t);
    auto b = DeviceBuffer::allocate(bytes.size(), kernel.device());
    if (!b) return b.error();
    if (Status s = b->upload(bytes.data(), bytes.size()); !s) return s.error();
    in_ptrs.push_back(b->ptr());
    bufs.push_back(std::move(*b));
  }
  std::vector<TensorType> out_types;
  for (const Output& o : g.outputs) out_types.push_back(g.node(o.value).type);
  for (const TensorType& t : out_types) {
    size_t bytes = static_cast<size_t>(t.numel()) * static_cast<size_t>(dtype_size(t.dtype));
    auto b = DeviceBuffer::allocate(bytes, kernel.device());
    if (!b) return b.error();
    if (Status s = b->fill_bytes(0xFF); !s) return s.error();  // NaN poison: unwritten elements fail
    out_ptrs.push_back(b->ptr());
    bufs.push_back(std::move(*b));
  }
  if (Status s = kernel.launch(in_ptrs, out_ptrs); !s) return s.error();
  if (Status s = wait_for_launch(kernel, opts); !s) return s.error();
  if (Status s = device_synchronize(kernel.device()); !s) return s.error();

  std::vector<HostTensor> outs;
  for (size_t k = 0; k < out_types.size(); ++k) {
    const TensorType& t = out_types[k];
    std::vector<uint8_t> bytes(static_cast<size_t>(t.numel()) * static_cast<size_t>(dtype_size(t.dtype)));
    if (Status s = bufs[inputs.size() + k].download(bytes.data(), bytes.size()); !s) return s.error();
    outs.push_back(from_device_bytes(t, bytes.data()));
  }
  CheckResult r;
  r.outputs = compare_all(g, ref, outs);
  r.pass = std::all_of(r.outputs.begin(), r.outputs.end(), [](const OutputCheck& c) { return c.cmp.pass; });
  if (opts.time) {
    auto t = time_kernel(kernel, in_ptrs, out_ptrs, opts);
    if (!t) return t.error();
    r.timing = *t;
  }
  return r;
}

std::string CheckResult::summary() const {
  std::string s;
  for (const OutputCheck& o : outputs)
    s += "  output '" + o.name + "' (" + (o.sampled ? "sampled" : "dense") + " fp64 reference): " + o.cmp.summary() + "\n";
  if (timing.iters) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  time: median %.4f ms (min %.4f, max %.4f, %d trials, L2 flushed)\n",
                  timing.median_ms, timing.min_ms, timing.max_ms, timing.iters);
    s += buf;
  }
  s += pass ? "PASS\n" : "FAIL\n";
  return s;
}

}  // namespace fusejit
