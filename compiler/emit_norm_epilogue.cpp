// Anchor epilogue of a group / layer norm done on a wgmma tile's
// accumulators (pass_fuse_norm_epilogue.cpp): fj::tile_segment_norm with the
// norm's input as its value lambda, then weight and bias at each element's
// channel and the norm's consumers, stored through shared memory.
#include <algorithm>

#include "compiler/emit_anchor_parts.h"
#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

std::vector<std::string> norm_tail_epilogue(KernelEmitter& em, const FusedTail& tail, const AnchorShape& shape,
                                            std::vector<std::string> value, int64_t& smem_floats) {
  const PlanContext& ctx = em.ctx();
  const Graph& g = ctx.g;
  const KernelPlan& kp = em.plan().kernels[0];
  const Node& n = g.node(tail.op);
  const NormGeometry geo = norm_geometry(g, tail.op);
  const int64_t tile_m = kp.tile_m(), tile_n = kp.tile_n();
  int chunk = wgmma_epilogue_chunk(kp.wgmma, kp.mma_kind == "f32x3");
  while (chunk > 8 && tile_n % chunk) chunk /= 2;
  smem_floats = std::max<int64_t>(smem_floats, tile_m * (chunk + 8));
  KernelSource& s = em.src();
  const std::string id = std::to_string(tail.op);
  s.constants.push_back({"kNormGroup" + id, geo.len, "columns a group of " + g.describe(tail.op) + " spans"});
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, em.plan(), tail.post, tail.op, -1, true),
                                        "fj_post_norm", "after " + g.describe(tail.op) + ", at output coordinates");
  std::vector<std::string> out = {"fj::tile_segment_norm<kNormGroup" + id + ", " + std::to_string(chunk) +
                                  ">(frag, m0, n0, " + shape.rows + ", " + shape.cols + ", " +
                                  float_literal(n.attr_float("eps")) + ", smem,"};
  value.back() = "},";
  append(out, value);
  out.push_back("[&](float v, int m, int n) {");
  // weight and bias: one per column (group_norm's channel, layer_norm's position along N)
  std::string affine = "v";
  if (n.operands.size() > 1) affine = "v * fj::load_as_float(" + em.load_param(n.operands[1]) + ", n)";
  if (n.operands.size() > 2) affine += " + fj::load_as_float(" + em.load_param(n.operands[2]) + ", n)";
  append(out, shape.coords);
  out.push_back(post + "(p, " + affine + ", " + coord_args(static_cast<int>(n.type.shape.size())) + ");");
  out.push_back("});");
  return out;
}

}  // namespace fusejit::cg::anchor
