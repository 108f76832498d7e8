// Dense reference: every node, every element, in fp64, node by node in
// topological order; buffers are freed after their last use.
#include <algorithm>
#include <cstdio>

#include "fusejit/reference.h"
#include "reference/eval_node.h"
#include "reference/parallel.h"

namespace fusejit {
namespace {

using ref::NodePlan;
using ref::RowStats;

struct DenseCtx {
  const std::vector<NodePlan>& plans;
  std::vector<const float*> inputs;           // by ValueId (Input nodes)
  std::vector<std::vector<double>> buffers;   // by ValueId (computed nodes)
  std::vector<std::vector<RowStats>> stats;   // by ValueId (softmax and norm nodes)

  double value(ValueId v, int64_t idx) const {
    const NodePlan& p = plans[static_cast<size_t>(v)];
    if (p.op == OpKind::Input) return inputs[static_cast<size_t>(v)][idx];
    if (p.op == OpKind::Constant) return p.constant;
    return buffers[static_cast<size_t>(v)][static_cast<size_t>(idx)];
  }
  RowStats row_stats(ValueId v, int64_t row) const { return stats[static_cast<size_t>(v)][static_cast<size_t>(row)]; }
  const float* input_data(ValueId v) const { return inputs[static_cast<size_t>(v)]; }
};


std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
  return buf;
}

// Peak bytes of live fp64 buffers when nodes are evaluated in order and freed after their last use.
int64_t peak_bytes(const Graph& g, const std::vector<NodePlan>& plans, const std::vector<size_t>& last_use) {
  int64_t live = 0, peak = 0;
  std::vector<bool> freed(plans.size(), false);
  for (size_t i = 0; i < plans.size(); ++i) {
    const NodePlan& p = plans[i];
    if (p.category == OpCategory::Leaf) continue;
    int64_t stats = ref::has_row_stats(p) ? ref::stats_rows(p) * int64_t{sizeof(RowStats)} : 0;
    live += p.numel * 8;
    peak = std::max(peak, live + stats);
    for (ValueId o : p.operands) {
      auto u = static_cast<size_t>(o);
      if (plans[u].category != OpCategory::Leaf && last_use[u] == i && !freed[u]) {
        live -= plans[u].numel * 8;
        freed[u] = true;
      }
    }
  }
  for (const Output& out : g.outputs)  // outputs that are leaves get a copy
    if (plans[static_cast<size_t>(out.value)].category == OpCategory::Leaf)
      peak += plans[static_cast<size_t>(out.value)].numel * 8;
  return peak;
}

}  // namespace

Expected<std::vector<std::vector<double>>> evaluate_reference(const Graph& g, const std::vector<HostTensor>& inputs,
                                                              const ReferenceOptions& opts) {
  if (Status s = ref::check_inputs(g, inputs); !s) return s.error();
  auto plans_or = ref::build_plans(g);
  if (!plans_or) return plans_or.error();
  const std::vector<NodePlan>& plans = *plans_or;
  size_t count = plans.size();

  // Last use of every value; outputs live to the end.
  std::vector<size_t> last_use(count, 0);
  for (size_t i = 0; i < count; ++i)
    for (ValueId o : plans[i].operands) last_use[static_cast<size_t>(o)] = i;
  for (const Output& out : g.outputs) {
    if (out.value < 0 || static_cast<size_t>(out.value) >= count) return Error("reference: output refers to no value");
    last_use[static_cast<size_t>(out.value)] = SIZE_MAX - 1;
  }
  int64_t need = peak_bytes(g, plans, last_use);
  if (need > opts.max_dense_bytes)
    return Error("reference: the dense evaluation needs " + gib(need) + " of fp64 buffers, over the budget of " +
                 gib(opts.max_dense_bytes) + "; use the sampled reference (evaluate_reference_at)");

  DenseCtx ctx{plans, std::vector<const float*>(count, nullptr), std::vector<std::vector<double>>(count),
               std::vector<std::vector<RowStats>>(count)};
  std::vector<ValueId> ids = g.inputs();
  for (size_t j = 0; j < ids.size(); ++j) ctx.inputs[static_cast<size_t>(ids[j])] = inputs[j].data.data();

  int threads = ref::thread_count(opts.threads);
  for (size_t i = 0; i < count; ++i) {
    const NodePlan& p = plans[i];
    if (p.category == OpCategory::Leaf) continue;
    ValueId id = static_cast<ValueId>(i);
    // Anchors cost a dot product an element; the rest are cheap.
    int64_t grain = p.category == OpCategory::Anchor ? 64 : 1 << 14;
    if (ref::has_row_stats(p)) {
      int64_t rows = ref::stats_rows(p);
      ctx.stats[i].resize(static_cast<size_t>(rows));
      ref::parallel_chunks(rows, ref::balanced_grain(rows, threads, 256), threads, [&](int, int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) ctx.stats[i][static_cast<size_t>(r)] = ref::compute_row_stats(p, r, ctx);
      });
    }
    std::vector<double>& out = ctx.buffers[i];
    out.resize(static_cast<size_t>(p.numel));
    ref::parallel_chunks(p.numel, ref::balanced_grain(p.numel, threads, grain), threads,
                         [&](int, int64_t b, int64_t e) {
                           for (int64_t k = b; k < e; ++k) out[static_cast<size_t>(k)] = ref::eval_at(p, id, k, ctx);
                         });
    ctx.stats[i] = {};
    for (ValueId o : p.operands)
      if (last_use[static_cast<size_t>(o)] == i) ctx.buffers[static_cast<size_t>(o)] = {};
  }

  std::vector<std::vector<double>> result;
  std::vector<int> first_output(count, -1);  // a value listed twice is copied
  for (const Output& out : g.outputs) {
    auto v = static_cast<size_t>(out.value);
    const NodePlan& p = plans[v];
    if (first_output[v] >= 0) {
      result.push_back(result[static_cast<size_t>(first_output[v])]);
      continue;
    }
    first_output[v] = static_cast<int>(result.size());
    if (p.category != OpCategory::Leaf) {
      result.push_back(std::move(ctx.buffers[v]));
      continue;
    }
    std::vector<double> copy(static_cast<size_t>(p.numel));
    for (int64_t k = 0; k < p.numel; ++k) copy[static_cast<size_t>(k)] = ctx.value(out.value, k);
    result.push_back(std::move(copy));
  }
  return result;
}

}  // namespace fusejit
