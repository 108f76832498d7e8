// Pass (after the anchor's tile is chosen; norm_epilogue=0 turns it off): a
// group_norm over a wgmma linear's or matmul's [M, N] output (groups of
// N / G consecutive columns), or a layer_norm over its last dim, whose
// groups each lie inside one column tile, done in the epilogue on the
// accumulators (fj::tile_segment_norm): each group's mean and variance from
// the tile's registers, then the normalized values, weight and bias, and the
// elementwise consumers, stored. One kernel; the anchor's output is not
// stored for a norm kernel to read back.
#include <optional>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// Why `norm` cannot run in kp's epilogue ("" if it can), its groups `len` columns long. Where the chosen tile's
// width is not a multiple of len (and the config fixes no tile), `retiled` gets the narrowest tile that is and is
// at least as wide, else the widest narrower one.
std::string refusal(const PlanContext& ctx, const KernelPlan& kp, const Node& norm, int64_t len,
                    std::optional<WgmmaConfig>& retiled) {
  const Shape& domain = kp.region.domain;
  const Shape& xs = ctx.node(norm.operands[0]).type.shape;
  if (domain.size() != 2 || xs != domain) return "only over the anchor's own 2-D [M, N] output";
  if (norm.op == OpKind::LayerNorm && norm.attr_ints("normalized_shape").size() != 1)
    return "a layer_norm over more than the last dim";
  if (kp.wgmma.swap_ab) return "swap-AB tiles hold the output transposed";
  if (kp.wgmma.split_k > 1) return "split-K tiles";
  if (len % 8) return "groups of " + std::to_string(len) + " columns: not a multiple of 8";
  if (kp.tile_n() % len == 0) return "";
  const std::string why = "groups of " + std::to_string(len) + " columns do not divide the " +
                          std::to_string(kp.tile_n()) + "-column tile";
  if (ctx.heur.wgmma) return why + " (set by the config)";
  const bool three_tf32 = kp.mma_kind == "f32x3";
  for (int bn : {64, 128, 192, 256}) {
    WgmmaConfig t = kp.wgmma;
    t.bn = bn;
    t.stages = wgmma_max_stages(t, three_tf32);
    if (bn % len || !wgmma_fits_with_epilogue(t, three_tf32)) continue;
    retiled = t;
    if (bn >= kp.wgmma.bn) break;
  }
  return retiled ? "" : why + ", and no tile of " + std::to_string(len) + "'s multiples fits";
}

// The first group / layer norm over a value the epilogue computes (the anchor's or its region's), or -1.
ValueId norm_of_epilogue(const PlanContext& ctx, const std::vector<ValueId>& inside) {
  for (ValueId x : inside)
    for (ValueId u : ctx.users[static_cast<size_t>(x)]) {
      const Node& n = ctx.node(u);
      if ((n.op == OpKind::GroupNorm || n.op == OpKind::LayerNorm) && n.operands[0] == x && !ctx.placed(u)) return u;
    }
  return -1;
}

}  // namespace

void fuse_norm_epilogue(PlanContext& ctx, Plan& plan) {
  if (!ctx.heur.norm_epilogue || plan.kernels.empty()) return;
  KernelPlan& kp = plan.kernels[0];
  if (kp.kind != KernelKind::Anchor || kp.mainloop != Mainloop::Wgmma || !kp.tails.empty() ||
      !kp.wide.nodes.empty() || kp.pool1d_overlap >= 0)
    return;
  const OpKind anchor = ctx.node(kp.root).op;
  if ((anchor != OpKind::Linear && anchor != OpKind::Matmul) || analyze_anchor(ctx.g, kp.root).batch != 1) return;
  std::vector<ValueId> inside = {kp.root};
  inside.insert(inside.end(), kp.region.nodes.begin(), kp.region.nodes.end());
  const ValueId u = norm_of_epilogue(ctx, inside);
  if (u < 0) return;
  const Node& n = ctx.node(u);
  const int64_t len = norm_geometry(ctx.g, u).len;
  const std::string label = std::string(op_name(n.op)) + " %" + std::to_string(u);
  // What the epilogue computes must feed the norm alone (or be stored as an output): a residual `gn + h` would
  // make it store h and the norm for a third kernel, where the norm kernel reads h once.
  std::string why;
  for (ValueId v : inside)
    for (ValueId w : ctx.users[static_cast<size_t>(v)])
      if (w != u && ctx.kernel_of[static_cast<size_t>(w)] != 0)
        why = "%" + std::to_string(v) + " is read after the norm too (" + std::string(op_name(ctx.node(w).op)) + " %" +
              std::to_string(w) + ")";
  std::optional<WgmmaConfig> retiled;
  if (why.empty()) why = refusal(ctx, kp, n, len, retiled);
  if (!why.empty()) {
    kp.notes.push_back(label + " not done in the epilogue: " + why + "; a norm kernel reads the stored output");
    return;
  }
  if (retiled) {
    kp.notes.push_back("tile " + kp.wgmma.str() + " -> " + retiled->str() + " for " + label + "'s groups of " +
                       std::to_string(len) + " columns");
    kp.wgmma = *retiled;
  }
  FusedTail tail;
  tail.op = u;
  tail.post.domain = n.type.shape;
  ctx.kernel_of[static_cast<size_t>(u)] = 0;
  kp.tails.push_back(std::move(tail));
  grow_region(ctx, kp.tails.back().post, {u}, u, 0, /*allow_placed=*/false);
  kp.notes.push_back(label + " done in the epilogue: its groups of " + std::to_string(len) +
                     " columns lie in one column tile; each group's mean and variance from the tile's "
                     "accumulators, then the normalized values stored");
}

}  // namespace fusejit::cg
