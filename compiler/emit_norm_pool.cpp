// Emitters of the group / instance / layer norm kernels (a pool of their
// result included: pass_fuse_norm_pool.cpp) and of the 2-D / 1-D pool
// kernels over materialized tensors.
#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {
namespace {

// The PoolShape struct of 2-D pool `pool` over input planes `xs` (fj::pool2d_window's shape concept).
CudaStruct pool2d_shape_struct(const Node& pool, const Shape& xs) {
  const bool is_max = pool.op == OpKind::MaxPool2d;
  const auto& k = pool.attr_ints("kernel_size");
  const auto& st = pool.attr_ints("stride");
  const auto& pd = pool.attr_ints("padding");
  const std::vector<int64_t> dl = is_max ? pool.attr_ints("dilation") : std::vector<int64_t>{1, 1};
  CudaStruct ps;
  ps.name = "PoolShape";
  const size_t h = xs.size() - 2;
  for (const auto& [n, v] : std::vector<std::pair<const char*, int64_t>>{
           {"kH", xs[h]}, {"kW", xs[h + 1]}, {"kKH", k[0]}, {"kKW", k[1]}, {"kSH", st[0]}, {"kSW", st[1]},
           {"kPH", pd[0]}, {"kPW", pd[1]}, {"kDH", dl[0]}, {"kDW", dl[1]}})
    ps.members.push_back("static constexpr int " + std::string(n) + " = " + int_literal(v) + ";");
  return ps;
}

// fj::pool2d_window's template arguments for 2-D pool `pool`: <PoolShape, max, count_include_pad>.
std::string pool2d_window_args(const Node& pool) {
  const bool is_max = pool.op == OpKind::MaxPool2d;
  return std::string("PoolShape, ") + (is_max ? "true" : "false") + ", " +
         (!is_max && pool.attr_bool("count_include_pad") ? "true" : "false");
}

// Dynamic shared memory a norm kernel's block may take for its rows' copies
// (fj::norm_rows' kCached, norm_cache=1): 3 such blocks fit an H100's SM.
constexpr int64_t kNormRowCacheBytes = 64 * 1024;

}  // namespace

// group / instance / layer norm: one row per (sample, group), normalized by
// fj::norm_rows (the row read once where a copy fits shared memory); the
// store applies weight and bias, then the fused consumers. With a pool tail
// (pass_fuse_norm_pool.cpp) the last pass goes over the row's pooled outputs
// instead: each window normalizes the elements it reads and runs the ops
// before the pool on them.
Expected<EmittedKernel> emit_norm(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const NormGeometry geo = norm_geometry(g, kp.root);
  if (geo.len > kIntMax) return Error("codegen: a norm row longer than 2^31");
  const RowConfig& cfg = ctx.heur.row;
  int group = cfg.group_for(geo.len);
  if (group > 32) group = cfg.threads;
  const FusedTail* pool = kp.tails.empty() ? nullptr : &kp.tails[0];
  const int64_t cache_bytes = cfg.threads / group * geo.len * 4;
  const bool cached = ctx.heur.norm_cache && cache_bytes <= kNormRowCacheBytes;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root) + " of " + g.node(x).type.str() + ", rows of " +
              std::to_string(geo.len) + ", " + std::to_string(group) + " threads per row" +
              (cached ? ", each row's copy in shared memory" : "") + (pool ? ", then " + g.describe(pool->op) : "");
  s.constants.push_back({"kRows", geo.rows, "rows (sample x group)"});
  s.constants.push_back({"kLen", geo.len, "elements per row (contiguous)"});
  const bool affine = r.operands.size() > 1;
  if (affine) {
    s.constants.push_back({"kAffineSpan", geo.affine_span, "elements per sample covered by weight/bias"});
    s.constants.push_back({"kAffineDiv", geo.affine_div, "elements per weight/bias entry"});
  }
  const std::string element = em.operand_at(x, "b + r");
  std::vector<std::string> affine_params;
  for (size_t k = 1; k < r.operands.size(); ++k) affine_params.push_back(em.load_param(r.operands[k]));
  const bool wide = numel(xs) > kIntMax;
  const std::string I = wide ? "long long" : "int";
  const int rank = static_cast<int>(xs.size());
  // v = the normalized element at flat offset `off` of x, weight and bias applied
  std::vector<std::string> normalized;
  if (affine) {
    normalized.push_back("const int a = (int)(off % kAffineSpan / kAffineDiv);");
    std::string v = "v * fj::load_as_float(" + affine_params[0] + ", a)";
    if (affine_params.size() > 1) v += " + fj::load_as_float(" + affine_params[1] + ", a)";
    normalized.push_back("v = " + v + ";");
  }
  const std::string head = "fj::norm_rows<" + std::to_string(group) + ", " + std::to_string(cfg.threads) + ", " +
                           (cached ? "true" : "false") + ">(";
  const std::string finish = "[&](long long o, long long b, int q, float mean, float rstd, const auto& at) {";
  std::vector<std::string> run;
  if (!pool) {
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                          "the result and its fused consumers, at output coordinates");
    run = {head, "    kRows, kLen, kLen, " + float_literal(r.attr_float("eps")) + ",",
           "[&](long long o) -> long long { return o * kLen; },",
           "[&](long long b, int r) -> float { return " + element + "; },", finish,
           "float v = (at(q) - mean) * rstd;", "const " + I + " off = (" + I + ")(b + q);"};
    append(run, normalized);
    append(run, decompose_index("off", xs, "i", I));
    run.push_back(post_call(post, "v", rank));
    run.push_back("});");
  } else {
    const Node& pn = g.node(pool->op);
    const Shape& os = pn.type.shape;
    const int64_t pooled = geo.len / (xs[2] * xs[3]) * os[2] * os[3];
    s.structs.push_back(pool2d_shape_struct(pn, xs));
    s.constants.push_back({"kPooledLen", pooled, "pooled outputs per row (whole planes)"});
    const std::string pre =
        pn.operands[0] == kp.root
            ? std::string()
            : em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, pn.operands[0], false), "fj_pre_pool",
                           "the ops between the norm and the pool, at each window element");
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, pool->post, pool->op, -1, true), "fj_post",
                                          "the pooled value and its fused consumers, at output coordinates");
    run = {head, "    kRows, kLen, kPooledLen, " + float_literal(r.attr_float("eps")) + ",",
           "[&](long long o) -> long long { return o * kLen; },",
           "[&](long long b, int r) -> float { return " + element + "; },",
           finish, "const " + I + " e = (" + I + ")(o * kPooledLen + q);"};
    append(run, decompose_index("e", os, "i", I));
    run.push_back("const " + I + " plane = (" + I + ")(e / " + int_literal(os[2] * os[3]) + ") * " +
                  int_literal(xs[2] * xs[3]) + ";");
    // group / instance norm: one weight / bias entry per channel, so per window (its plane)
    const bool per_plane = affine && geo.affine_div % (xs[2] * xs[3]) == 0;
    if (per_plane) {
      run.push_back("const int a = (int)(plane % kAffineSpan / kAffineDiv);  // the window's channel");
      run.push_back("const float scale = rstd * fj::load_as_float(" + affine_params[0] + ", a);");
      run.push_back("const float shift = " +
                    (affine_params.size() > 1 ? "fj::load_as_float(" + affine_params[1] + ", a)" : std::string("0.f")) +
                    " - mean * scale;");
    }
    run.push_back("const float pooled = fj::pool2d_window<" + pool2d_window_args(pn) + ">(i2, i3, [&](int ih, int iw) {");
    run.push_back("const " + I + " off = plane + ih * PoolShape::kW + iw;");
    run.push_back("const float xv = at((int)(off - b));");
    if (per_plane) {
      run.push_back("float v = xv * scale + shift;");
    } else {
      run.push_back("float v = (xv - mean) * rstd;");
      append(run, normalized);
    }
    if (!pre.empty()) {
      append(run, decompose_index("off", xs, "j", I));
      run.push_back("return " + pre + "(p, v, " + coord_args(rank, "j") + ");");
    } else {
      run.push_back("return v;");
    }
    run.push_back("});");
    run.push_back(post_call(post, "pooled", static_cast<int>(os.size())));
    run.push_back("});");
  }
  const unsigned grid = grid_for(geo.rows, cfg.threads / group, kIntMax);
  Expected<EmittedKernel> out = finish_kernel(em, kp, run, {grid, 1, 1}, cfg.threads);
  if (out && cached) out->launch.shared_bytes = static_cast<unsigned>(cache_bytes);
  return out;
}

Expected<EmittedKernel> emit_pool(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const Shape& os = r.type.shape;
  const bool two_d = kp.kind == KernelKind::Pool2d;
  const bool is_max = r.op == OpKind::MaxPool2d || r.op == OpKind::MaxPool1d;
  const bool cip = !is_max && r.attr_bool("count_include_pad");
  const PointwiseConfig& cfg = ctx.heur.pointwise;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root) + " " + g.node(x).type.str() + " -> " + shape_str(os);
  const int rank = static_cast<int>(xs.size());
  s.structs.push_back(two_d ? pool2d_shape_struct(r, xs) : pool1d_shape_struct(g, kp.root, "PoolShape"));
  s.constants.push_back({"kNumel", numel(os), "pooled elements"});
  const std::string element = em.operand_at(x, two_d ? "base + ih * PoolShape::kW + iw" : "base + iw");
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                        "the pooled value and its fused consumers, at output coordinates");
  const std::string flags = std::string(is_max ? "true" : "false") + ", " + (cip ? "true" : "false");
  std::vector<std::string> inner;
  const std::string out_plane = two_d ? int_literal(os[2] * os[3]) : int_literal(os.back());
  const std::string in_plane = two_d ? int_literal(xs[2] * xs[3]) : int_literal(xs.back());
  inner.push_back("const long long base = (long long)(e / " + out_plane + ") * " + in_plane + ";");
  if (two_d) {
    inner.push_back("const float v = fj::pool2d_window<PoolShape, " + flags + ">(i" + std::to_string(rank - 2) + ", i" +
                    std::to_string(rank - 1) + ", [&](int ih, int iw) { return " + element + "; });");
  } else {
    inner.push_back("const float v = fj::pool1d_window<PoolShape, " + flags + ">(i" + std::to_string(rank - 1) +
                    ", [&](int iw) { return " + element + "; });");
  }
  inner.push_back(post_call(post, "v", rank));
  const unsigned grid = grid_for(numel(os), cfg.threads, cfg.max_blocks);
  return finish_kernel(em, kp, element_loop(os, cfg.threads, grid, inner), {grid, 1, 1}, cfg.threads);
}

}  // namespace fusejit::cg
