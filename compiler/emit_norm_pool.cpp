// Emitters of the group / instance / layer norm kernels (a pool or a
// reduction of their result included: pass_fuse_norm_tail.cpp) and of the
// 2-D / 1-D pool kernels over materialized tensors.
#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {
namespace {

// The PoolShape struct of 2-D pool `pool` over input planes `xs` (fj::pool2d_window's shape concept).
CudaStruct pool2d_shape_struct(const Node& pool, const Shape& xs, const std::string& name = "PoolShape") {
  const bool is_max = pool.op == OpKind::MaxPool2d;
  const auto& k = pool.attr_ints("kernel_size");
  const auto& st = pool.attr_ints("stride");
  const auto& pd = pool.attr_ints("padding");
  const std::vector<int64_t> dl = is_max ? pool.attr_ints("dilation") : std::vector<int64_t>{1, 1};
  CudaStruct ps;
  ps.name = name;
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
// A row of at most this many elements a thread is held in registers instead (fj::norm_rows_held; no tail).
constexpr int64_t kNormHeldPerThread = 16;

// What the norm kernel's passes share: x at flat offset `off` normalized (weight and bias applied), and the
// ops between the norm and its tail (a tree returning the tail's operand at coordinates j0.., or "").
struct NormParts {
  const PlanContext& ctx;
  const KernelPlan& kp;
  KernelEmitter& em;
  Shape xs;
  std::string I;                      // the index type of flat offsets
  std::vector<std::string> affine;    // weight, bias parameters (or none)
  NormGeometry geo;

  // `v = (x - mean) * rstd` at `off` from `xv`, weight and bias applied.
  std::vector<std::string> normalize(const std::string& xv) const {
    std::vector<std::string> out = {"float v = (" + xv + " - mean) * rstd;"};
    if (affine.empty()) return out;
    out.push_back("const int a = (int)(off % kAffineSpan / kAffineDiv);");
    std::string v = "v * fj::load_as_float(" + affine[0] + ", a)";
    if (affine.size() > 1) v += " + fj::load_as_float(" + affine[1] + ", a)";
    out.push_back("v = " + v + ";");
    return out;
  }
  // `return` the tail's operand from v at `off`.
  std::vector<std::string> pre_tail(ValueId operand) const {
    if (operand == kp.root) return {"return v;"};
    const std::string pre =
        em.emit_tree(build_epilogue_tree(ctx, em.plan(), kp.region, kp.root, operand, false), "fj_pre_tail",
                     "the ops between the norm and " + ctx.g.describe(kp.tails[0].op) + ", at each element it reads");
    std::vector<std::string> out = decompose_index("off", xs, "j", I);
    out.push_back("return " + pre + "(p, v, " + coord_args(static_cast<int>(xs.size()), "j") + ");");
    return out;
  }
};

// The last pass over the row's pooled outputs (a pool tail): each window normalizes what it reads.
std::vector<std::string> norm_pool_pass(const NormParts& np) {
  const Graph& g = np.ctx.g;
  const FusedTail& tail = np.kp.tails[0];
  const Node& pn = g.node(tail.op);
  const Shape& os = pn.type.shape;
  const Shape& xs = np.xs;
  const std::string& I = np.I;
  KernelSource& s = np.em.src();
  s.structs.push_back(pool2d_shape_struct(pn, xs));
  s.constants.push_back({"kOuts", np.geo.len / (xs[2] * xs[3]) * os[2] * os[3], "pooled outputs per row (whole planes)"});
  const std::string post = np.em.emit_tree(build_epilogue_tree(np.ctx, np.em.plan(), tail.post, tail.op, -1, true),
                                           "fj_post", "the pooled value and its fused consumers, at output coordinates");
  std::vector<std::string> run = {"const " + I + " e = (" + I + ")(o * kOuts + q);"};
  append(run, decompose_index("e", os, "i", I));
  run.push_back("const " + I + " plane = (" + I + ")(e / " + int_literal(os[2] * os[3]) + ") * " +
                int_literal(xs[2] * xs[3]) + ";");
  // group / instance norm: one weight / bias entry per channel, so per window (its plane)
  const bool per_plane = !np.affine.empty() && np.geo.affine_div % (xs[2] * xs[3]) == 0;
  if (per_plane) {
    run.push_back("const int a = (int)(plane % kAffineSpan / kAffineDiv);  // the window's channel");
    run.push_back("const float scale = rstd * fj::load_as_float(" + np.affine[0] + ", a);");
    run.push_back("const float shift = " +
                  (np.affine.size() > 1 ? "fj::load_as_float(" + np.affine[1] + ", a)" : std::string("0.f")) + ";");
  }
  run.push_back("const float pooled = fj::pool2d_window<" + pool2d_window_args(pn) + ">(i2, i3, [&](int ih, int iw) {");
  run.push_back("const " + I + " off = plane + ih * PoolShape::kW + iw;");
  if (per_plane)
    run.push_back("float v = (at((int)(off - b)) - mean) * scale + shift;  // x - mean first: no cancellation");
  else
    append(run, np.normalize("at((int)(off - b))"));
  append(run, np.pre_tail(pn.operands[0]));
  run.push_back("});");
  run.push_back(post_call(post, "pooled", static_cast<int>(os.size())));
  return run;
}

}  // namespace

// group / instance / layer norm: one row per (sample, group), normalized by
// fj::norm_rows (the row read once where a copy fits shared memory); the
// store applies weight and bias, then the fused consumers. With a tail
// (pass_fuse_norm_tail.cpp) the last pass goes over the row's pooled outputs
// instead, each window normalizing the elements it reads (fj::norm_rows), or
// reduces the row's runs in turn (fj::norm_rows_reduce).
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
  const FusedTail* tail = kp.tails.empty() ? nullptr : &kp.tails[0];
  const bool pool = tail && (g.node(tail->op).op == OpKind::MaxPool2d || g.node(tail->op).op == OpKind::AvgPool2d);
  const int64_t per_lane = (geo.len + group - 1) / group;
  const bool held = !tail && ctx.heur.norm_cache && per_lane <= kNormHeldPerThread;
  const int64_t cache_bytes = cfg.threads / group * geo.len * 4;
  const bool cached = !held && ctx.heur.norm_cache && cache_bytes <= kNormRowCacheBytes;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root) + " of " + g.node(x).type.str() + ", rows of " +
              std::to_string(geo.len) + ", " + std::to_string(group) + " threads per row" +
              (cached ? ", each row's copy in shared memory" : "") + (held ? ", each row held in registers" : "") +
              (tail ? ", then " + g.describe(tail->op) : "");
  s.constants.push_back({"kRows", geo.rows, "rows (sample x group)"});
  s.constants.push_back({"kLen", geo.len, "elements per row (contiguous)"});
  NormParts np{ctx, kp, em, xs, numel(xs) > kIntMax ? "long long" : "int", {}, geo};
  if (r.operands.size() > 1) {
    s.constants.push_back({"kAffineSpan", geo.affine_span, "elements per sample covered by weight/bias"});
    s.constants.push_back({"kAffineDiv", geo.affine_div, "elements per weight/bias entry"});
  }
  for (size_t k = 1; k < r.operands.size(); ++k) np.affine.push_back(em.load_param(r.operands[k]));
  const std::string& I = np.I;
  const std::string T = std::to_string(group) + ", " + std::to_string(cfg.threads) + ", " + (cached ? "true" : "false");
  const std::string args = float_literal(r.attr_float("eps")) + ",";
  const std::vector<std::string> row = {"[&](long long o) -> long long { return o * kLen; },",
                                        "[&](long long b, int r) -> float { return " + em.operand_at(x, "b + r") +
                                            "; },"};
  const std::string finish = "[&](long long o, long long b, int q, float mean, float rstd, const auto& at) {";
  std::vector<std::string> run;
  if (!tail) {
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_post",
                                          "the result and its fused consumers, at output coordinates");
    run = held ? std::vector<std::string>{"fj::norm_rows_held<" + std::to_string(group) + ", " +
                                              std::to_string(cfg.threads) + ", " + std::to_string(per_lane) + ">(",
                                          "    kRows, kLen, " + args}
               : std::vector<std::string>{"fj::norm_rows<" + T + ">(", "    kRows, kLen, kLen, " + args};
    append(run, row);
    append(run, {finish, "const " + I + " off = (" + I + ")(b + q);"});
    append(run, np.normalize("at(q)"));
    append(run, decompose_index("off", xs, "i", I));
    run.push_back(post_call(post, "v", static_cast<int>(xs.size())));
  } else if (pool) {
    run = {"fj::norm_rows<" + T + ">(", "    kRows, kLen, kOuts, " + args};
    append(run, row);
    run.push_back(finish);
    append(run, norm_pool_pass(np));
  } else {  // a reduction over trailing dims: the row's runs in turn
    const Node& rn = g.node(tail->op);
    const ReduceGeometry red = reduce_geometry(g, tail->op);
    s.constants.push_back({"kOuts", geo.len / red.len, "runs of " + std::to_string(red.len) + " reduced per row"});
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, tail->post, tail->op, -1, true), "fj_post",
                                          "the reduced value and its fused consumers, at output coordinates");
    const std::string op = rn.op == OpKind::Max ? "fj::MaxOp" : rn.op == OpKind::Min ? "fj::MinOp" : "fj::SumOp";
    run = {"fj::norm_rows_reduce<" + T + ", " + op + ">(", "    kRows, kLen, kOuts, " + args};
    append(run, row);
    append(run, {"[&](long long o, long long b, int q, float mean, float rstd, const auto& at) -> float {",
                 "const " + I + " off = (" + I + ")(b + q);"});
    append(run, np.normalize("at(q)"));
    append(run, np.pre_tail(rn.operands[0]));
    append(run, {"},", "[&](long long o, int k, float acc) {", "const " + I + " e = (" + I + ")(o * kOuts + k);"});
    append(run, decompose_index("e", rn.type.shape, "i", I));
    run.push_back(post_call(post, red.mean ? "acc / " + float_literal(static_cast<double>(red.len)) : "acc",
                            static_cast<int>(rn.type.shape.size())));
  }
  run.push_back("});");
  const unsigned grid = grid_for(geo.rows, cfg.threads / group, kIntMax);
  Expected<EmittedKernel> out = finish_kernel(em, kp, run, {grid, 1, 1}, cfg.threads);
  if (out && cached) out->launch.shared_bytes = static_cast<unsigned>(cache_bytes);
  return out;
}

// A pool kernel: the root pool and the pools of its pool pass (kp.tails, pass_fallback.cpp: the same operand and
// output shape), each window computed by the thread of its output element, then its consumers.
Expected<EmittedKernel> emit_pool(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& r = g.node(kp.root);
  const ValueId x = r.operands[0];
  const Shape& xs = g.node(x).type.shape;
  const Shape& os = r.type.shape;
  const bool two_d = kp.kind == KernelKind::Pool2d;
  const PointwiseConfig& cfg = ctx.heur.pointwise;

  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + g.describe(kp.root);
  for (const FusedTail& t : kp.tails) s.comment += ", " + g.describe(t.op);
  s.comment += " " + g.node(x).type.str() + " -> " + shape_str(os);
  const int rank = static_cast<int>(xs.size());
  s.constants.push_back({"kNumel", numel(os), "pooled elements"});
  const std::string element = em.operand_at(x, two_d ? "base + ih * PoolShape::kW + iw" : "base + iw");
  std::vector<std::string> inner;
  const std::string out_plane = two_d ? int_literal(os[2] * os[3]) : int_literal(os.back());
  const std::string in_plane = two_d ? int_literal(xs[2] * xs[3]) : int_literal(xs.back());
  inner.push_back("const long long base = (long long)(e / " + out_plane + ") * " + in_plane + ";");
  std::vector<std::pair<ValueId, const Region*>> pools = {{kp.root, &kp.region}};
  for (const FusedTail& t : kp.tails) pools.push_back({t.op, &t.post});
  for (size_t i = 0; i < pools.size(); ++i) {
    const Node& pn = g.node(pools[i].first);
    const bool is_max = pn.op == OpKind::MaxPool2d || pn.op == OpKind::MaxPool1d;
    const bool cip = !is_max && pn.attr_bool("count_include_pad");
    const std::string id = i == 0 ? "" : std::to_string(i);
    const std::string shape = "PoolShape" + id;
    s.structs.push_back(two_d ? pool2d_shape_struct(pn, xs, shape) : pool1d_shape_struct(g, pools[i].first, shape));
    const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, *pools[i].second, pools[i].first, -1, true),
                                          "fj_post" + id, "after " + g.describe(pools[i].first) + ", at output coordinates");
    const std::string flags = std::string(is_max ? "true" : "false") + ", " + (cip ? "true" : "false");
    const std::string v = "v" + id;
    if (two_d) {
      inner.push_back("const float " + v + " = fj::pool2d_window<" + shape + ", " + flags + ">(i" +
                      std::to_string(rank - 2) + ", i" + std::to_string(rank - 1) +
                      ", [&](int ih, int iw) { return " + element + "; });");
    } else {
      inner.push_back("const float " + v + " = fj::pool1d_window<" + shape + ", " + flags + ">(i" +
                      std::to_string(rank - 1) + ", [&](int iw) { return " + element + "; });");
    }
    inner.push_back(post_call(post, v, rank));
  }
  const unsigned grid = grid_for(numel(os), cfg.threads, cfg.max_blocks);
  return finish_kernel(em, kp, element_loop(os, cfg.threads, grid, inner), {grid, 1, 1}, cfg.threads);
}

}  // namespace fusejit::cg
