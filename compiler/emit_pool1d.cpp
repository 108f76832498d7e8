// 1-D pools along N fused into a GEMM epilogue (pass_fuse_pool1d.cpp): one
// pool on tiles of whole windows (fj::tile_pool1d_staged), or pools on
// overlapping column tiles (KernelPlan::pool1d_overlap;
// templates/epilogue_pool1d.cuh; where they start: anchor_column_step).
#include <algorithm>

#include "compiler/emit_anchor_parts.h"
#include "compiler/passes.h"

namespace fusejit::cg::anchor {
namespace {

// The value lambda both pool epilogues start with: the epilogue up to the pooled value, at output coordinates.
std::vector<std::string> pre_pool_lambda(const PlanContext& ctx, const Plan& plan, const KernelPlan& kp,
                                         KernelEmitter& em, const AnchorShape& shape, ValueId pooled) {
  const int rank = static_cast<int>(ctx.g.node(kp.root).type.shape.size());
  const std::string pre = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, pooled, false),
                                       "fj_pre_pool", "the epilogue up to the pooled value, at output coordinates");
  std::vector<std::string> lambda = epilogue_lambda("[&](float acc, int m, int n) -> float {", shape.coords,
                                                    "return " + pre + "(p, acc, " + coord_args(rank) + ");");
  lambda.back() = "},";
  return lambda;
}

// A pooled value's coordinates: the output's, the last one (i<rank - 1>, declared last) the window's.
std::vector<std::string> pooled_coords(const AnchorShape& shape, int rank) {
  std::vector<std::string> coords = shape.coords;
  coords.back() = "const int i" + std::to_string(rank - 1) + " = w;";
  return coords;
}

}  // namespace

Expected<std::vector<std::string>> pool1d_halo_epilogue(const PlanContext& ctx, const Plan& plan,
                                                        const KernelPlan& kp, KernelEmitter& em,
                                                        const AnchorShape& shape, int tile_m, int tile_n, int chunk,
                                                        int64_t& smem_floats) {
  const Graph& g = ctx.g;
  const int overlap = kp.pool1d_overlap;
  if (anchor_column_step(g, kp, tile_n) < 1 || chunk < overlap || tile_n % chunk)
    return Error("codegen: a " + std::to_string(tile_m) + "x" + std::to_string(tile_n) + " tile cannot overlap its " +
                 "neighbours by " + std::to_string(overlap) + " columns in chunks of " + std::to_string(chunk));
  const int rank = static_cast<int>(g.node(kp.root).type.shape.size());
  const std::string coord_call = coord_args(rank);
  std::vector<std::string> run = {"fj::tile_pool1d_halo<kColumnStep, " + std::to_string(chunk) + ", " +
                                  std::to_string(overlap) + ">(frag, m0, n0, " + shape.rows + ", " + shape.cols +
                                  ", smem,"};
  append(run, pre_pool_lambda(ctx, plan, kp, em, shape, g.node(kp.tails[0].op).operands[0]));
  for (size_t i = 0; i < kp.tails.size(); ++i) {
    const FusedTail& tail = kp.tails[i];
    const Node& p = g.node(tail.op);
    const bool is_max = p.op == OpKind::MaxPool1d;
    const std::string id = std::to_string(i);
    CudaStruct ps = pool1d_shape_struct(g, tail.op, "Pool" + id);
    ps.comment = "the windows of " + g.describe(tail.op) + " (pool.cuh's 1-D shape)";
    ps.members.push_back("static constexpr int kWOut = " + int_literal(p.type.shape.back()) + ";");
    em.src().structs.push_back(ps);
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, tail.post, tail.op, -1, true),
                                          "fj_post_pool" + id, "after " + g.describe(tail.op) + ", at pooled coordinates");
    const bool cip = !is_max && p.attr_bool("count_include_pad");
    append(run, epilogue_lambda("fj::pool1d_output<Pool" + id + ", " + (is_max ? "true" : "false") + ", " +
                                    (cip ? "true" : "false") + ">([&](float v, int m, int w) {",
                                pooled_coords(shape, rank), post + "(p, v, " + coord_call + ");"));
    run.back() = i + 1 < kp.tails.size() ? "})," : "}));";
  }
  // epilogue_pool1d.cuh's pool1d_halo_floats: the halo's columns padded to 8, the chunk, 8 more a row
  smem_floats = std::max<int64_t>(smem_floats, int64_t{tile_m} * ((overlap + 7) / 8 * 8 + chunk + 8));
  return run;
}

Expected<std::vector<std::string>> pool1d_whole_windows_epilogue(const PlanContext& ctx, const Plan& plan,
                                                                 const KernelPlan& kp, KernelEmitter& em,
                                                                 const FusedTail& pool, const AnchorShape& shape,
                                                                 int tile_m, int tile_n, int chunk,
                                                                 int64_t& smem_floats) {
  const Graph& g = ctx.g;
  const Node& pn = g.node(pool.op);
  const int64_t k = pn.attr_int("kernel_size");
  if (tile_n % chunk || chunk % k)
    return Error("codegen: a " + std::to_string(tile_m) + "x" + std::to_string(tile_n) + " tile cannot hold whole " +
                 std::to_string(k) + "-column windows of " + g.describe(pool.op) +
                 " (its width and staging chunk must be multiples of the window)");
  const int rank = static_cast<int>(g.node(kp.root).type.shape.size());
  const std::string coord_call = coord_args(rank);
  std::vector<std::string> pre = pre_pool_lambda(ctx, plan, kp, em, shape, pn.operands[0]);
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, pool.post, pool.op, -1, true), "fj_post_pool",
                                        "after the pool, at pooled coordinates");
  smem_floats = std::max<int64_t>(smem_floats, int64_t{tile_m} * (chunk + 8));
  std::vector<std::string> run = {"fj::tile_pool1d_staged<" + std::to_string(chunk) + ", " + std::to_string(k) +
                                  ", " + (pn.op == OpKind::MaxPool1d ? "true" : "false") + ">(frag, m0, n0, " +
                                  shape.rows + ", " + shape.cols + ", smem,"};
  append(run, pre);
  append(run, epilogue_lambda("[&](float v, int m, int w) {", pooled_coords(shape, rank),
                              post + "(p, v, " + coord_call + ");"));
  return run;
}

}  // namespace fusejit::cg::anchor
