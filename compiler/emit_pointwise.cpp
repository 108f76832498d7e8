// compiler/emit_pointwise.cpp — pointwise kernels: the element loop, and
// lanes of consecutive elements a thread where the last dim and the buffers'
// alignment allow them (docs/codegen.md, "Pointwise kernels on lanes").
#include <algorithm>
#include <limits>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {
namespace {

// `lanes_fn` over groups of `lanes` consecutive elements where every buffer
// it accesses whole lanes of is aligned to them (a view may start anywhere),
// else the element loop `elements`.
std::vector<std::string> lanes_then_elements(KernelEmitter& em, const Shape& domain, int lanes, int64_t threads,
                                             const std::string& lanes_fn, const std::vector<BufferRef>& buffers,
                                             const std::vector<std::string>& elements) {
  KernelSource& s = em.src();
  s.constants.push_back({"kLanes", lanes, "consecutive elements a thread takes where they are aligned"});
  const std::string aligned = lanes_aligned(em, lanes, buffers);
  const int rank = static_cast<int>(domain.size());
  const bool wide = numel(domain) + threads * lanes > std::numeric_limits<int>::max();  // the loop index passes kNumel by one stride
  const std::string I = wide ? "long long" : "int";
  std::vector<std::string> out = {"if (" + aligned + ") {",
                                  "for (" + I + " e = ((" + I + ")blockIdx.x * blockDim.x + threadIdx.x) * kLanes; e < "
                                  "kNumel; e += (" + I + ")gridDim.x * blockDim.x * kLanes) {"};
  for (const std::string& line : decompose_index("e", domain, "i", I)) out.push_back(line);
  out.push_back(lanes_fn + "(p, " + coord_args(rank) + ");");
  out.push_back("}");
  out.push_back("return;");
  out.push_back("}");
  out.insert(out.end(), elements.begin(), elements.end());
  return out;
}

}  // namespace

Expected<EmittedKernel> emit_pointwise(const PlanContext& ctx, const Plan& plan, int index) {
  if (const auto tile = transpose_tile(ctx, plan, index)) return emit_tiled_transpose(ctx, plan, index, *tile);
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  KernelEmitter em(ctx, plan, index);
  const Shape& domain = kp.region.domain;
  const int rank = static_cast<int>(domain.size());
  const PointwiseConfig& cfg = ctx.heur.pointwise;
  em.src().comment = kp.name + ": elementwise over " + shape_str(domain);
  em.src().constants.push_back({"kNumel", numel(domain), "elements of " + shape_str(domain)});
  const EpilogueTree tree = build_epilogue_tree(ctx, plan, kp.region, -1, -1, true);
  const std::string fn = em.emit_tree(tree, "fj_pointwise", "every node of the kernel and its stores, at one coordinate");
  const std::string call = fn + "(p" + (rank ? ", " + coord_args(rank) : "") + ");";
  std::vector<BufferRef> lane_buffers;
  const int lanes = cfg.lanes ? tree_lanes(em, tree) : 1;
  const std::string lanes_fn =
      lanes > 1 ? em.emit_lanes(tree, "fj_pointwise_lanes", "every node of the kernel and its stores, at kLanes "
                                "consecutive coordinates along the last dim", lanes, lane_buffers)
                : "";
  // a thread a group of lanes (the element loop, for unaligned views, strides over the same grid)
  const unsigned grid = grid_for(numel(domain) / (lanes_fn.empty() ? 1 : lanes), cfg.threads, cfg.max_blocks);
  auto run = element_loop(domain, cfg.threads, grid, {call});
  if (!lanes_fn.empty())
    run = lanes_then_elements(em, domain, lanes, static_cast<int64_t>(grid) * cfg.threads, lanes_fn, lane_buffers, run);
  return finish_kernel(em, kp, run, {grid, 1, 1}, cfg.threads);
}

}  // namespace fusejit::cg
