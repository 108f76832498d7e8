// Pass: a row reduction's broadcast back over the anchor's output, in the
// epilogue (wgmma linear / matmul; row_broadcast=0 turns it off). The elementwise
// consumers over the anchor's domain that read the row's value (`h - max(h)`,
// `h * rsqrt(mean(h^2))`, `h + mean(h)`) run on the tile's accumulators once
// its rows are reduced: the anchor's output is not stored for a pointwise or
// row-finish kernel to read back.
// - fuse_row_broadcast: one tile spans N (the reduction is whole in the
//   epilogue, pass_fuse_reduction.cpp): fj::tile_row_broadcast.
// - fuse_row_cluster (after the tile is chosen; opt-in, row_cluster=1: on the
//   H200 no faster than the partials' two kernels yet): N spans 2 to 8 column tiles;
//   a cluster of that many blocks takes a row tile's column tiles together and
//   exchanges the rows' partials through distributed shared memory
//   (fj::tile_row_broadcast_cluster), instead of per-tile partials in scratch
//   and a row-finish kernel.
#include <algorithm>
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Why the anchor's one reduction tail cannot be broadcast back in the epilogue ("" if it can), or nullopt when
// it is none to consider (not an anchor on wgmma with exactly one row reduction).
std::optional<std::string> refusal(const PlanContext& ctx, const KernelPlan& kp) {
  if (kp.kind != KernelKind::Anchor || kp.mainloop != Mainloop::Wgmma || kp.tails.size() != 1) return std::nullopt;
  const FusedTail& tail = kp.tails[0];
  const Node& r = ctx.node(tail.op);
  if (tail.spatial || op_category(r.op) != OpCategory::Reduction) return std::nullopt;
  const Node& anchor = ctx.node(kp.root);
  if (anchor.op != OpKind::Linear && anchor.op != OpKind::Matmul) return "only linear and matmul anchors";
  const Shape& domain = kp.region.domain;
  if (domain.size() != 2 || analyze_anchor(ctx.g, kp.root).batch != 1) return "only a 2-D output";
  if (r.op != OpKind::Sum && r.op != OpKind::Mean && r.op != OpKind::Max && r.op != OpKind::Min)
    return "only sum, mean, max and min";
  if (r.type.shape != Shape{domain[0], 1}) return "the reduction keeps no size-1 dim to broadcast along";
  return std::string();
}

std::string label_of(const PlanContext& ctx, ValueId v) {
  return std::string(op_name(ctx.node(v).op)) + " %" + std::to_string(v);
}

// The consumers over the anchor's domain that read the tail's row value: into kp.wide. Whether there are any.
bool grow_wide(PlanContext& ctx, KernelPlan& kp) {
  const FusedTail& tail = kp.tails[0];
  std::vector<ValueId> sources = {kp.root};
  sources.insert(sources.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  sources.push_back(tail.op);
  sources.insert(sources.end(), tail.post.nodes.begin(), tail.post.nodes.end());
  kp.wide.domain = kp.region.domain;
  // What the anchor's region could compute it already holds: what grows here reads the row's value.
  grow_region(ctx, kp.wide, sources, tail.op, 0, /*allow_placed=*/false);
  // A value of them that another kernel reads (`mean(h - max(h))`: a second row stage) would go to memory at full
  // size: then none of them joins (row stages in the epilogue: not yet).
  const std::set<ValueId> wide(kp.wide.nodes.begin(), kp.wide.nodes.end());
  for (ValueId v : kp.wide.nodes)
    for (ValueId u : ctx.users[static_cast<size_t>(v)])
      if (!wide.count(u)) {
        kp.notes.push_back("row_broadcast: " + label_of(ctx, tail.op) + "'s consumers over the rows not in the " +
                           "epilogue: " + label_of(ctx, u) + " reads " + label_of(ctx, v) +
                           " in another kernel (a second row stage)");
        for (ValueId w : kp.wide.nodes) ctx.kernel_of[static_cast<size_t>(w)] = -1;
        kp.wide = Region{};
        return false;
      }
  return !kp.wide.nodes.empty();
}

std::string wide_ops(const PlanContext& ctx, const KernelPlan& kp) {
  std::string ops;
  for (ValueId v : kp.wide.nodes) ops += (ops.empty() ? "" : ", ") + label_of(ctx, v);
  return ops;
}

}  // namespace

void fuse_row_broadcast(PlanContext& ctx, Plan& plan) {
  if (!ctx.heur.row_broadcast || plan.kernels.empty()) return;
  KernelPlan& kp = plan.kernels[0];
  const auto why = refusal(ctx, kp);
  if (!why || kp.tails[0].partial) return;  // partial: fuse_row_cluster, once the tile is known
  const std::string label = label_of(ctx, kp.tails[0].op);
  if (!why->empty()) {
    kp.notes.push_back("row_broadcast: " + label + "'s consumers over the rows not in the epilogue: " + *why);
    return;
  }
  if (!grow_wide(ctx, kp)) return;
  kp.notes.push_back(label + " broadcast back over the tile's rows in the epilogue (row_broadcast): " +
                     wide_ops(ctx, kp) + " on the accumulators, the anchor's output not stored for them");
}

std::optional<WgmmaConfig> cluster_row_tile(const PlanContext& ctx, const KernelPlan& kp, std::string& why_not) {
  const WgmmaConfig& wt = kp.wgmma;
  const bool three_tf32 = kp.mma_kind == "f32x3";
  if (wt.swap_ab || wt.cluster_m > 1 || wt.conv_halo) {
    why_not = "the tile " + wt.str() + " takes no clusters";
    return std::nullopt;
  }
  if (ctx.heur.wgmma && (wt.split_k > 1 || (wt.pingpong && wt.bm != 64))) {
    why_not = "the configured tile " + wt.str() + " is split, or ping-pong of more than 64 rows";
    return std::nullopt;
  }
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  // The tile: as configured, else the narrowest that 8 blocks span (the most blocks for a short M), wider while
  // the grid still fills the SMs. The schedule: a configured tile's; else 64-row ping-pong tiles where the config
  // says wgmma_schedule=pingpong (an exchange per consumer), else cooperative (the ping-pong rule's 64 rows: 128).
  const bool pingpong = ctx.heur.wgmma ? wt.pingpong : ctx.heur.wgmma_schedule == "pingpong" && !three_tf32;
  WgmmaConfig t = wt;
  if (!ctx.heur.wgmma) {
    if (pingpong) {
      t.bm = 64;
    } else if (wt.pingpong && wt.bm == 64) {
      t.bm = 128;
      t.raster_group = std::max(1, t.raster_group / 2);
    }
    t.pingpong = pingpong;
  }
  const int64_t n = geo.n, m_tiles = (geo.m + t.bm - 1) / t.bm;
  t.split_k = 1;
  t.split_from = 0;
  if (!ctx.heur.wgmma) {
    std::vector<int> widths = three_tf32 ? std::vector<int>{64, 128} : std::vector<int>{64, 128, 256};
    int chosen = 0;
    for (int w : widths) {
      const int64_t c = (n + w - 1) / w;
      if (c > 8) continue;
      if (chosen == 0 || m_tiles * c >= 132) chosen = w;
    }
    if (chosen == 0) {
      why_not = "N = " + std::to_string(n) + " needs more than 8 column tiles";
      return std::nullopt;
    }
    t.bn = chosen;
    // the ring leaves the epilogue its row totals, 16-column chunks and the exchange's static shared memory
    for (t.stages = 8; t.stages > 2; --t.stages) {
      const int64_t epilogue = (int64_t{4 + 2} * t.bm + int64_t{t.bm} * (16 + 8)) * 4 * (t.pingpong ? 2 : 1);
      if (validate_wgmma(t, three_tf32) &&
          wgmma_smem_bytes(t, three_tf32) + epilogue + kRowExchangeReserve <= kWgmmaDynamicSmemLimit)
        break;
    }
  }
  const int64_t cluster = (n + t.bn - 1) / t.bn;
  if (cluster < 2 || cluster > 8) {
    why_not = "N = " + std::to_string(n) + " spans " + std::to_string(cluster) + " tiles of " + std::to_string(t.bn) +
              " columns (clusters of 2 to 8)";
    return std::nullopt;
  }
  t.cluster_n = static_cast<int>(cluster);
  return t;
}

void fuse_row_cluster(PlanContext& ctx, Plan& plan) {
  if (!ctx.heur.row_broadcast || !ctx.heur.row_cluster || plan.kernels.empty()) return;
  KernelPlan& kp = plan.kernels[0];
  const auto why = refusal(ctx, kp);
  if (!why || !kp.tails[0].partial) return;
  FusedTail& tail = kp.tails[0];
  const std::string label = label_of(ctx, tail.op);
  auto refuse = [&](const std::string& reason) {
    kp.notes.push_back("row_broadcast: " + label + " not finished across a cluster: " + reason);
  };
  if (!why->empty()) return refuse(*why);
  WgmmaConfig& wt = kp.wgmma;
  std::string why_not;
  const std::optional<WgmmaConfig> tile = cluster_row_tile(ctx, kp, why_not);
  if (!tile) return refuse(why_not);
  const WgmmaConfig t = *tile;
  const int64_t cluster = t.cluster_n;
  // The tail becomes whole in the epilogue (no partials, no row-finish kernel), its consumers with it.
  const std::vector<int> saved = ctx.kernel_of;
  tail.partial = false;
  tail.post.domain = ctx.node(tail.op).type.shape;
  ctx.kernel_of[static_cast<size_t>(tail.op)] = 0;
  grow_region(ctx, tail.post, {tail.op}, tail.op, 0, /*allow_placed=*/false);
  if (!grow_wide(ctx, kp)) {  // nothing broadcast back: the partials' plan stays
    ctx.kernel_of = saved;
    tail.partial = true;
    tail.post = Region{};
    kp.wide = Region{};
    return;
  }
  plan.partials.erase(tail.op);
  wt = t;
  kp.notes.erase(std::remove_if(kp.notes.begin(), kp.notes.end(),
                                [&](const std::string& s) { return s.rfind(label + " partly fused", 0) == 0; }),
                 kp.notes.end());
  kp.notes.push_back(label + " finished across clusters of " + std::to_string(cluster) + " column tiles (" + wt.str() +
                     "): each block's row partials exchanged through distributed shared memory, then " +
                     wide_ops(ctx, kp) + " on the accumulators (row_broadcast); the anchor's output not stored for them");
}

}  // namespace fusejit::cg
