// Sampled reference: one output at chosen flat indices, evaluated lazily per
// (node, element) with memoization, so a softmax row, a reduction or an
// overlapping pool window is computed once per worker thread.
#include <algorithm>
#include <numeric>

#include "fusejit/reference.h"
#include "reference/eval_node.h"
#include "reference/flat_cache.h"
#include "reference/parallel.h"

namespace fusejit {
namespace {

using ref::NodePlan;
using ref::RowStats;

// Per-worker caches are dropped between samples once they hold this many entries.
constexpr size_t kMaxCachedEntries = size_t{1} << 20;

struct SharedState {
  const std::vector<NodePlan>& plans;
  std::vector<const float*> inputs;  // by ValueId (Input nodes)
  std::vector<bool> cached;          // by ValueId: worth memoizing
};

class LazyCtx {
 public:
  explicit LazyCtx(const SharedState& s) : s_(s), values_(s.plans.size()), stats_(s.plans.size()) {}

  double value(ValueId v, int64_t idx) {
    auto u = static_cast<size_t>(v);
    const NodePlan& p = s_.plans[u];
    if (p.op == OpKind::Input) return s_.inputs[u][idx];
    if (p.op == OpKind::Constant) return p.constant;
    if (!s_.cached[u]) return ref::eval_at(p, v, idx, *this);
    if (const double* hit = values_[u].find(idx)) return *hit;
    double r = ref::eval_at(p, v, idx, *this);
    values_[u].insert(idx, r);
    ++entries_;
    return r;
  }

  RowStats row_stats(ValueId v, int64_t row) {
    auto u = static_cast<size_t>(v);
    if (const RowStats* hit = stats_[u].find(row)) return *hit;
    RowStats r = ref::compute_row_stats(s_.plans[u], row, *this);
    stats_[u].insert(row, r);
    ++entries_;
    return r;
  }

  const float* input_data(ValueId v) const { return s_.inputs[static_cast<size_t>(v)]; }

  void trim() {
    if (entries_ < kMaxCachedEntries) return;
    for (auto& m : values_) m.clear();
    for (auto& m : stats_) m.clear();
    entries_ = 0;
  }

 private:
  const SharedState& s_;
  std::vector<ref::FlatCache<double>> values_;
  std::vector<ref::FlatCache<RowStats>> stats_;
  size_t entries_ = 0;
};

// Whether `user` reads each element of its operand at most once while
// computing each of its own elements once: same-shape elementwise ops,
// single-pass reductions and pools whose windows do not overlap.
bool reads_each_element_once(const NodePlan& user, const NodePlan& operand) {
  if (is_elementwise(user.op)) return user.numel == operand.numel;
  switch (user.op) {
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::GlobalAvgPool: return true;
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d:
    case OpKind::MaxPool1d:
    case OpKind::AvgPool1d: {
      const ref::PoolPlan& q = user.pool;
      return q.sh >= (q.kh - 1) * q.dh + 1 && q.sw >= (q.kw - 1) * q.dw + 1;
    }
    default: return false;
  }
}

// A value is memoized unless it cannot be asked for twice: its single use
// reads each element once (and the user is memoized or asked once itself).
std::vector<bool> memoized_values(const std::vector<NodePlan>& plans) {
  std::vector<int> uses(plans.size(), 0);
  std::vector<ValueId> user(plans.size(), -1);
  for (size_t i = 0; i < plans.size(); ++i)
    for (ValueId o : plans[i].operands) {
      ++uses[static_cast<size_t>(o)];
      user[static_cast<size_t>(o)] = static_cast<ValueId>(i);
    }
  std::vector<bool> cached(plans.size(), false);
  for (size_t v = 0; v < plans.size(); ++v) {
    if (plans[v].category == OpCategory::Leaf) continue;
    bool once = uses[v] == 1 && reads_each_element_once(plans[static_cast<size_t>(user[v])], plans[v]);
    cached[v] = !once;
  }
  return cached;
}

}  // namespace

Expected<std::vector<double>> evaluate_reference_at(const Graph& g, const std::vector<HostTensor>& inputs,
                                                    int output_index, const std::vector<int64_t>& flat_indices,
                                                    const ReferenceOptions& opts) {
  if (Status s = ref::check_inputs(g, inputs); !s) return s.error();
  if (output_index < 0 || static_cast<size_t>(output_index) >= g.outputs.size())
    return Error("reference: output index " + std::to_string(output_index) + " out of range (the graph has " +
                 std::to_string(g.outputs.size()) + " outputs)");
  auto plans_or = ref::build_plans(g);
  if (!plans_or) return plans_or.error();
  const std::vector<NodePlan>& plans = *plans_or;
  ValueId target = g.outputs[static_cast<size_t>(output_index)].value;
  if (target < 0 || static_cast<size_t>(target) >= plans.size()) return Error("reference: output refers to no value");
  int64_t numel = plans[static_cast<size_t>(target)].numel;
  for (int64_t idx : flat_indices)
    if (idx < 0 || idx >= numel)
      return Error("reference: sample index " + std::to_string(idx) + " out of range for " +
                   std::to_string(numel) + " elements");

  SharedState shared{plans, std::vector<const float*>(plans.size(), nullptr), memoized_values(plans)};
  std::vector<ValueId> ids = g.inputs();
  for (size_t j = 0; j < ids.size(); ++j) shared.inputs[static_cast<size_t>(ids[j])] = inputs[j].data.data();

  // Neighbouring samples on one worker share rows and windows: visit them sorted.
  auto n = static_cast<int64_t>(flat_indices.size());
  std::vector<int64_t> order(flat_indices.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return flat_indices[static_cast<size_t>(a)] < flat_indices[static_cast<size_t>(b)];
  });

  int threads = ref::thread_count(opts.threads);
  std::vector<LazyCtx> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) workers.emplace_back(shared);
  std::vector<double> result(flat_indices.size());
  ref::parallel_chunks(n, ref::balanced_grain(n, threads, 16), threads, [&](int w, int64_t b, int64_t e) {
    LazyCtx& ctx = workers[static_cast<size_t>(w)];
    for (int64_t s = b; s < e; ++s) {
      auto pos = static_cast<size_t>(order[static_cast<size_t>(s)]);
      result[pos] = ctx.value(target, flat_indices[pos]);
      ctx.trim();
    }
  });
  return result;
}

}  // namespace fusejit
