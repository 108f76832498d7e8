// Pass: a reduction over a conv's output pixels (pass_fuse_spatial.cpp)
// finished inside the conv kernel on sm_90 (opt-in: spatial_cluster=auto, or
// =N for the size): the blocks of a cluster take the pixel tiles of one image
// (for one column tile and group), each folds its tiles' per-channel partials
// in shared memory, then block 0 combines the cluster's folds in rank order
// through distributed shared memory and runs the reduction's consumers
// (tail.post) at [image, channel]. No per-tile partials, no atomic sums, no
// finish kernel: the outputs are the bytes the chain writes (issue 9's
// traffic target), in a fixed order (bitwise reproducible), max / min too.
// Not the default: on the H100 (session 52, bench_conv's gap row) the conv
// ran 1.3-1.4x the time of its per-tile loop with the atomic sums and a
// finish kernel (clusters of 4 / 8 / 16, and a persistent grid, alike).
// Halo-patch mma.sync convs only (their blocks loop over pixel tiles).
#include <algorithm>
#include <cstdlib>

#include "compiler/passes.h"

namespace fusejit::cg {

void finish_spatial_in_clusters(PlanContext& ctx, Plan& plan) {
  if (plan.kernels.empty()) return;
  KernelPlan& kp = plan.kernels[0];
  if (kp.kind != KernelKind::Anchor || kp.tails.size() != 1 || !kp.tails[0].spatial || !kp.tails[0].partial) return;
  FusedTail& tail = kp.tails[0];
  const Node& r = ctx.node(tail.op);
  const std::string label = std::string(op_name(r.op)) + " %" + std::to_string(tail.op);
  const int rank = static_cast<int>(r.type.shape.size());
  if (ctx.heur.spatial_cluster == 0) return;  // off (the default): the partials' plan, no note
  const bool sm90 = ctx.arch.rfind("sm_", 0) == 0 && std::atoi(ctx.arch.c_str() + 3) >= 90;
  std::string why;
  if (!sm90)
    why = "clusters need sm_90 (target " + ctx.arch + ")";
  else if (kp.mainloop != Mainloop::Mma || !kp.conv_patch)
    why = "only halo-patch mma.sync convs (their blocks loop over pixel tiles)";
  else if (rank != 2 && rank != 4)
    why = "its output is neither [N, C] nor [N, C, 1, 1]";
  if (!why.empty()) return kp.notes.push_back(label + " not finished in the conv kernel: " + why);
  // The cluster's size: as configured, else enough blocks an image for the grid the per-tile loop would launch
  // (an SM's threads' worth of blocks on every SM: the patches stream x and want every load in flight), at most
  // the image's tiles and 16 (over 8: a non-portable size, allowed at load time).
  const AnchorGeometry geo = analyze_anchor(ctx.g, kp.root);
  const int64_t columns = (geo.n + kp.mma.bn - 1) / kp.mma.bn * geo.groups, tiles = (geo.oh * geo.ow + kp.mma.bm - 1) / kp.mma.bm;
  const int64_t blocks = sm_count_guess(ctx.arch) * (kSmThreads / kp.mma.threads()) / columns;
  const int64_t size = ctx.heur.spatial_cluster > 0
                           ? ctx.heur.spatial_cluster
                           : std::clamp<int64_t>((blocks + geo.batch_n - 1) / geo.batch_n, 1, std::min<int64_t>(16, tiles));
  // Whole in the kernel: the reduction's consumers at [image, channel] join it (as the row-finish kernel's would).
  tail.partial = false;
  tail.post.domain = r.type.shape;
  ctx.kernel_of[static_cast<size_t>(tail.op)] = 0;
  grow_region(ctx, tail.post, {tail.op}, tail.op, 0, /*allow_placed=*/false);
  plan.partials.erase(tail.op);
  kp.spatial_cluster = static_cast<int>(size);
  kp.notes.erase(std::remove_if(kp.notes.begin(), kp.notes.end(),
                                [&](const std::string& s) { return s.rfind(label + " partly fused", 0) == 0; }),
                 kp.notes.end());
  kp.notes.push_back(label + " finished in the conv kernel: clusters of " + std::to_string(size) +
                     " blocks take one image's pixel tiles, each folds its tiles' per-channel values in shared "
                     "memory, block 0 combines the cluster's in rank order (distributed shared memory) and runs "
                     "what follows; the " + ctx.node(r.operands[0]).type.str() + " is never stored, no partials");
}

}  // namespace fusejit::cg
