// Plan helpers: tile checks, the anchor's GEMM view, shared pass helpers (the config's parsing:
// plan_heuristics.cpp).
#include <algorithm>
#include <set>
#include <sstream>

#include "compiler/passes.h"
#include "compiler/plan.h"

namespace fusejit::cg {

int64_t TileConfig::smem_floats(bool b_k_contiguous) const {
  if (gemv) return int64_t{stages} * (bm * bk + (b_k_contiguous ? bn * (bk + 4) : bk * bn));
  return 2LL * bk * (bm + bn + 8);
}

std::string TileConfig::str() const {
  std::ostringstream s;
  if (gemv) {
    s << "GEMV " << bm << "x" << bn << "x" << bk << " (" << tm << "x" << tn << " per thread, " << bm / tm
      << " k groups, " << threads() << " threads, " << stages << " stages)";
    if (split_k > 1) s << ", split-K " << split_k;
    return s.str();
  }
  s << bm << "x" << bn << "x" << bk << " (" << tm << "x" << tn << " per thread, " << threads() << " threads)";
  if (split_k > 1) s << ", split-K " << split_k;
  return s.str();
}

std::string WgmmaConfig::str() const {
  std::ostringstream s;
  if (conv_halo) {
    s << bm << "x" << bn << ", filter "
      << (conv_halo_b_stages > 0 ? "streamed (" + std::to_string(conv_halo_b_stages) + " stages)" : "resident")
      << ", input halo per patch" << (conv_halo_b_stages > 0 ? " and channel block (" : " (") << stages << " buffer"
      << (stages > 1 ? "s" : "") << ")";
    return s.str();
  }
  s << bm << "x" << bn << (pingpong ? " ping-pong" : "") << (swap_ab ? " swap-AB" : "")
    << (b_rows == 64 ? " (one box of x)" : b_rows == 128 ? " (grad's planes flattened)" : "") << ", " << stages
    << " stages, raster group " << raster_group;
  if (cluster_n > 1) s << ", clusters of " << cluster_n << " column tiles";
  if (tma_slots != 2) s << ", " << tma_slots << " TMA store slots";
  if (split_k > 1) s << ", split-K " << split_k << (split_from > 0 ? " from tile " + std::to_string(split_from) : "");
  if (cluster_m > 1) s << ", " << cluster_m << "-block clusters sharing B";
  return s.str();
}

std::string MmaConfig::str() const {
  std::ostringstream s;
  s << bm << "x" << bn << ", " << stages << " stages, " << threads() << " threads";
  if (warp_n > 0) s << " (warps " << wm() << "x" << wn() << ")";
  if (split_k > 1) s << ", split-K " << split_k;
  return s.str();
}

std::string_view mainloop_name(Mainloop m) {
  return m == Mainloop::Wgmma ? "wgmma" : m == Mainloop::Mma ? "mma" : "ffma";
}

int64_t mma_smem_bytes(const MmaConfig& t, bool fp32_kn_b) {
  constexpr int64_t kBk = 32, kPadBytes = 32;  // fp32 k-tile rows; fj::mma::kPadBytes
  return int64_t{t.stages} * (128 * (t.bm + t.bn) + (fp32_kn_b ? kBk * kPadBytes : 0));
}

int64_t sm_count_guess(const std::string& arch) { return arch.rfind("sm_90", 0) == 0 ? 132 : 108; }

int64_t sm_shared_bytes_guess(const std::string& arch) {
  if (arch.rfind("sm_90", 0) == 0) return 228 * 1024;
  return arch == "sm_80" || arch == "sm_87" ? 164 * 1024 : 100 * 1024;
}

int mma_default_min_blocks(const std::string& mma_kind, int threads, bool halo_patches) {
  // Halo patches of 128 threads (tf32 / 16-bit): 4 blocks an SM, 128 registers (ptxas: no spills on seed 3;
  // H200, the tuner's winner on seed 3: bf16 0.552 -> 0.467 ms, tf32 0.664 -> 0.590 in the same bench_conv run,
  // bench/results/bench_conv_NVIDIA_H200_20261128-211208_maxautotune_tuned.md); as the default, in one call against
  // caps of 2 and 3: bf16 0.467 vs 0.555 / 0.556, tf32 0.597 vs 0.669 / 0.665 (ab_conv_halo_nchw_H200_20261128.log).
  if (halo_patches && mma_kind != "f32x3" && threads == 128) return 4;
  return mma_kind == "f32x3" || threads > 256 ? 1 : 2;
}

int64_t mma_resident_blocks(const MmaConfig& t, const std::string& mma_kind, const std::string& arch,
                            std::optional<int> min_blocks) {
  constexpr int64_t kSmThreads = 2048, kReservedBytes = 1024;
  const int64_t by_regs = min_blocks.value_or(mma_default_min_blocks(mma_kind, t.threads()));
  const int64_t by_smem = sm_shared_bytes_guess(arch) / (mma_smem_bytes(t) + kReservedBytes);
  return std::max<int64_t>(1, std::min({by_regs, by_smem, kSmThreads / t.threads()}));
}

Status validate_mma(const MmaConfig& t) {
  auto bad = [&](const std::string& why) { return Error("invalid mma tile " + t.str() + ": " + why); };
  if (t.bm != 64 && t.bm != 128) return bad("bm must be 64 or 128");
  if (t.bn != 16 && t.bn != 32 && t.bn != 64 && t.bn != 128 && t.bn != 256)
    return bad("bn must be 16, 32, 64, 128 or 256");
  if (t.stages < 2 || t.stages > 6) return bad("stages must be in [2, 6]");
  if (t.warp_n != 0 && ((t.warp_n != 16 && t.warp_n != 32 && t.warp_n != 64) || t.bn % t.warp_n))
    return bad("a warp's columns must be 16, 32 or 64 and divide bn");
  if (mma_smem_bytes(t) > kWgmmaDynamicSmemLimit)
    return bad(std::to_string(mma_smem_bytes(t)) + " bytes of shared memory, over 226 KiB");
  return Status::success();
}

int64_t wgmma_smem_bytes(const WgmmaConfig& t, bool three_tf32) {
  if (t.conv_halo) return t.conv_halo_bytes + 1024;
  const int64_t stage = int64_t{128} * t.bm + int64_t{t.b_row_bytes} * t.b_stage_rows();  // 128-byte rows of K (B: or wider)
  return t.stages * (three_tf32 ? 2 : 1) * stage + 1024;
}

int wgmma_cluster_b_box_rows(const WgmmaConfig& t) {
  if (t.cluster_m == 1) return t.bn;
  return (t.bn / t.cluster_m) % 8 == 0 || t.bn % 24 ? t.bn / t.cluster_m : t.bn / 3;
}

int wgmma_min_epilogue_chunk(const WgmmaConfig& t) { return t.bn % 16 == 0 ? 16 : 24; }

bool wgmma_fits_with_epilogue(const WgmmaConfig& t, bool three_tf32) {
  const int64_t chunk = wgmma_min_epilogue_chunk(t);
  const int64_t epilogue = std::max<int64_t>(int64_t{t.bm} * (chunk + 8) * 4, 4096) * (t.pingpong ? 2 : 1);
  return validate_wgmma(t, three_tf32) && wgmma_smem_bytes(t, three_tf32) + epilogue <= kWgmmaDynamicSmemLimit;
}

int wgmma_max_stages(WgmmaConfig t, bool three_tf32) {
  for (t.stages = 8; t.stages > 2; --t.stages)
    if (wgmma_fits_with_epilogue(t, three_tf32)) break;
  return t.stages;
}

int64_t wgmma_store_tile_bytes(const WgmmaConfig& t) { return t.tma_slots * int64_t{t.bm} * 128; }

Status validate_wgmma(const WgmmaConfig& t, bool three_tf32) {
  auto bad = [&](const std::string& why) { return Error("invalid wgmma tile " + t.str() + ": " + why); };
  const int consumer_rows = t.swap_ab ? t.bn : t.bm, wgmma_n = t.swap_ab ? t.bm : t.bn;  // wgmma's M and N
  const bool wgrad_swap = t.swap_ab && t.b_row_bytes != 128;  // the tf32 swap-AB dW (x's rows in the ring)
  if (consumer_rows != 64 && consumer_rows != 128 && !(wgrad_swap && consumer_rows == 192 && wgmma_n <= 128))
    return bad(std::string(t.swap_ab ? "bn (swap-AB: the consumers' wgmma rows)" : "bm") +
               " must be 64 or 128 (one or two consumer warpgroups; the swap-AB dW: also 192 with bm at most 128)");
  if (t.b_rows != 0 && !(wgrad_swap && (t.b_rows == 64 || (t.b_rows == 128 && t.bn == 192))))
    return bad("a shared box of B rows: the swap-AB dW's 64 channels of x only (two boxes: flattened grad planes)");
  if (wgmma_n != 64 && wgmma_n != 128 && wgmma_n != 168 && wgmma_n != 176 && wgmma_n != 192 && wgmma_n != 256)
    return bad(std::string(t.swap_ab ? "bm" : "bn") + " must be 64, 128, 168, 176, 192 or 256");
  if (t.swap_ab && (t.pingpong || t.cluster_m > 1))
    return bad("swap-AB runs the cooperative schedule, without clusters");
  if (t.conv_halo ? t.stages < 1 || t.stages > 2 : t.stages < 2 || t.stages > 12)
    return bad(t.conv_halo ? "halo buffers must be 1 or 2" : "stages must be in [2, 12]");
  if (t.conv_halo && (t.swap_ab || t.cluster_m > 1 || t.split_k > 1 || three_tf32))
    return bad("a halo conv runs without swap-AB, clusters or split-K, not 3xTF32");
  if (t.raster_group < 1 || t.raster_group > 64) return bad("raster group must be in [1, 64]");
  if (t.split_k < 1 || t.split_k > 1024 || t.split_from < 0) return bad("split-K must be in [1, 1024] from a tile >= 0");
  if (t.tma_slots < 1 || t.tma_slots > 8) return bad("TMA store slots must be in [1, 8]");
  if (t.pingpong && t.bm == 128 && t.bn > 128 && t.bn != 168)
    return bad("ping-pong 128-row tiles keep a whole tile per consumer: bn must be at most 128, or 168 (registers)");
  if (t.pingpong && three_tf32) return bad("3xTF32 runs the cooperative schedule only");
  if (t.cluster_m != 1 && t.cluster_m != 2) return bad("clusters must have 1 or 2 blocks");
  if (t.cluster_m > 1 && (three_tf32 || t.split_k > 1)) return bad("2-block clusters run without split-K, not 3xTF32");
  if (t.cluster_m > 1 && wgmma_cluster_b_box_rows(t) % 8)  // (B's boxes: whole 8-row swizzle atoms)
    return bad("2-block clusters take tiles a multiple of 16 wide (or 168: boxes of 56 rows)");
  if (three_tf32 && wgmma_n > 128)
    return bad(std::string("3xTF32 keeps a second accumulator (one k-tile's sum): ") + (t.swap_ab ? "bm" : "bn") +
               " must be at most 128");
  if (wgmma_smem_bytes(t, three_tf32) > kWgmmaDynamicSmemLimit)
    return bad(std::to_string(wgmma_smem_bytes(t, three_tf32)) + " bytes of shared memory" +
               (three_tf32 ? " (3xTF32 stages hold the operands' residual tiles too)" : "") + ", over the 226 KiB a wgmma kernel may take on sm_90");
  return Status::success();
}

int RowConfig::group_for(int64_t row_len) const {
  if (row_len >= 2048) return threads;
  int g = 1;
  while (g < 32 && g * 4 <= row_len) g *= 2;  // about 4+ elements per thread
  return g;
}

ReduceGeometry reduce_geometry(const Graph& g, ValueId reduction) {
  const Node& r = g.node(reduction);
  const Shape& xs = g.node(r.operands[0]).type.shape;
  const std::vector<int64_t> dims = r.op == OpKind::GlobalAvgPool ? std::vector<int64_t>{2, 3} : r.attr_ints("dims");
  ReduceGeometry geo;
  geo.mean = r.op == OpKind::Mean || r.op == OpKind::GlobalAvgPool;
  for (int d = 0; d < static_cast<int>(xs.size()); ++d) {
    const bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
    (red ? geo.reduced : geo.kept).push_back(d);
    (red ? geo.reduced_shape : geo.kept_shape).push_back(xs[static_cast<size_t>(d)]);
  }
  geo.rows = numel(geo.kept_shape);
  geo.len = numel(geo.reduced_shape);
  return geo;
}

bool reduce_by_columns(const Graph& g, ValueId reduction) {
  constexpr int64_t kMinColumnRun = 32, kMinColumnBlocks = 16;  // runs of a warp's outputs, blocks for the SMs
  const Node& r = g.node(reduction);
  if (r.op == OpKind::LogSumExp) return false;
  const Shape& xs = g.node(r.operands[0]).type.shape;
  const ReduceGeometry geo = reduce_geometry(g, reduction);
  int64_t inner = 1;
  for (int d = static_cast<int>(xs.size()) - 1; d >= 0 && (geo.reduced.empty() || d > geo.reduced.back()); --d)
    inner *= xs[static_cast<size_t>(d)];
  return inner >= kMinColumnRun && geo.rows / inner * ((inner + 31) / 32) >= kMinColumnBlocks;
}

NormGeometry norm_geometry(const Graph& g, ValueId norm) {
  const Node& n = g.node(norm);
  const Shape& xs = g.node(n.operands[0]).type.shape;
  NormGeometry geo;
  if (n.op == OpKind::LayerNorm) {
    geo.len = numel(n.attr_ints("normalized_shape"));
    geo.affine_span = geo.len;
  } else {  // group / instance norm over [N, C, *]
    const int64_t inner = numel(Shape(xs.begin() + 2, xs.end()));
    const int64_t groups = n.op == OpKind::GroupNorm ? n.attr_int("num_groups") : xs[1];
    geo.len = xs[1] / groups * inner;
    geo.affine_span = xs[1] * inner;
    geo.affine_div = inner;
  }
  geo.rows = numel(xs) / geo.len;
  return geo;
}

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Anchor: return "anchor";
    case KernelKind::Pointwise: return "pointwise";
    case KernelKind::Reduce: return "reduce";
    case KernelKind::Softmax: return "softmax";
    case KernelKind::Pool2d: return "pool2d";
    case KernelKind::Pool1d: return "pool1d";
    case KernelKind::RowFinish: return "row-finish";
    case KernelKind::Norm: return "norm";
    case KernelKind::Gather: return "gather";
  }
  return "?";
}

Status validate_tile(const TileConfig& t) {
  auto bad = [&](const std::string& why) { return Error("invalid tile " + t.str() + ": " + why); };
  if (t.bm < 1 || t.bn < 1 || t.tm < 1 || t.tn < 1 || t.bk < 1) return bad("sizes must be positive");
  if (t.split_k < 1 || t.split_k > 1024) return bad("split-K must be in [1, 1024]");
  if (t.gemv) {  // GemvTile's static_asserts
    const int groups = t.bm / t.tm;
    if (t.bm > 32 || t.bm % t.tm) return bad("GEMV rows: at most 32, split evenly over the k groups (bm / tm)");
    if (t.bn % t.tn || (t.bn / t.tn) % 32 || t.threads() > 1024) return bad("GEMV columns: whole warps of tn columns each");
    if (t.bk % (8 * groups) || (t.bn * t.bk / 4) % t.threads())
      return bad("GEMV k-tiles: whole 4-k steps a k group, split evenly in 16-byte chunks");
    if (t.stages < 2 || t.smem_floats(true) * 4 > 226 * 1024) return bad("GEMV ring: at least 2 stages within 226 KiB");
    if (groups > 1 && t.smem_floats(false) < int64_t{groups} * t.bm * t.bn)
      return bad("GEMV ring: too small for the k groups' sums");
    return Status::success();
  }
  if (t.bm % t.tm || t.bn % t.tn) return bad("bm must be a multiple of tm and bn of tn");
  if ((t.tm > 4 && t.tm % 4) || (t.tn > 4 && t.tn % 4)) return bad("tm and tn must be at most 4 or multiples of 4");
  if (t.tm > 16 || t.tn > 16) return bad("tm and tn must be at most 16");
  if (t.bm % 4 || t.bn % 4) return bad("bm and bn must be multiples of 4");
  if (t.threads() % 32 || t.threads() > 1024) return bad("threads must be a multiple of 32, at most 1024");
  if (2 * t.bk * (t.bm + t.bn + 8) * 4 > 48 * 1024) return bad("shared memory over 48 KiB");
  return Status::success();
}

AnchorGeometry analyze_anchor(const Graph& g, ValueId anchor) {
  const Node& a = g.node(anchor);
  AnchorGeometry geo;
  geo.op = a.op;
  geo.node = anchor;
  geo.out = a.type.shape;
  const Shape& x = g.node(a.operands[0]).type.shape;
  const Shape& w = g.node(a.operands[1]).type.shape;
  if (a.op == OpKind::Linear) {
    geo.k = x.back();
    geo.n = w[0];
    geo.m = numel(x) / geo.k;
  } else if (a.op == OpKind::Matmul) {
    geo.m = x[x.size() - 2];
    geo.k = x.back();
    geo.n = w.back();
    geo.batch = numel(geo.out) / (geo.m * geo.n);
    geo.b_batched = w.size() > 2;
  } else if (a.op == OpKind::Conv2dWeightGrad) {  // x = the conv's input, w = grad [N, Cout, Ho, Wo]
    const auto& ks = a.attr_ints("kernel_size");
    const auto& st = a.attr_ints("stride");
    const auto& pd = a.attr_ints("padding");
    const auto& dl = a.attr_ints("dilation");
    geo.batch_n = x[0], geo.cin = x[1], geo.h = x[2], geo.w = x[3];
    geo.cout = w[1], geo.oh = w[2], geo.ow = w[3], geo.kh = ks[0], geo.kw = ks[1];
    geo.sh = st[0], geo.sw = st[1], geo.ph = pd[0], geo.pw = pd[1], geo.dh = dl[0], geo.dw = dl[1];
    geo.groups = a.attr_int("groups");
    geo.m = geo.cout / geo.groups;                     // grad's channels of a group
    geo.n = (geo.cin / geo.groups) * geo.kh * geo.kw;  // im2col rows (ci, kh, kw) of a group
    geo.k = geo.batch_n * geo.oh * geo.ow;             // every output pixel
    geo.batch = geo.groups;
  } else {
    geo.batch_n = x[0];
    geo.cin = x[1];
    geo.h = x[2];
    geo.w = x[3];
    geo.cout = w[0];
    geo.kh = w[2];
    geo.kw = w[3];
    geo.oh = geo.out[2];
    geo.ow = geo.out[3];
    const auto& st = a.attr_ints("stride");
    const auto& pd = a.attr_ints("padding");
    const auto& dl = a.attr_ints("dilation");
    geo.sh = st[0];
    geo.sw = st[1];
    geo.ph = pd[0];
    geo.pw = pd[1];
    geo.dh = dl[0];
    geo.dw = dl[1];
    geo.groups = a.attr_int("groups");
    geo.m = geo.batch_n * geo.oh * geo.ow;
    geo.n = geo.cout / geo.groups;
    geo.k = (geo.cin / geo.groups) * geo.kh * geo.kw;
  }
  return geo;
}

AnchorGeometry flatten_batch_rows(AnchorGeometry geo) {
  if (geo.op == OpKind::Matmul && !geo.b_batched) {
    geo.m *= geo.batch;
    geo.batch = 1;
  }
  return geo;
}

PlanContext::PlanContext(const Graph& graph, Heuristics h, std::string target_arch)
    : g(graph),
      heur(std::move(h)),
      arch(std::move(target_arch)),
      users(graph.users()),
      leaf_expr(graph.nodes.size(), false),
      kernel_of(graph.nodes.size(), -1),
      mapped_reshape(graph.nodes.size(), false),
      written_by(graph.nodes.size(), -1) {}

bool PlanContext::pointwise(ValueId v) const {
  const OpKind op = g.node(v).op;
  return is_elementwise(op) || op == OpKind::Expand || op == OpKind::Transpose ||
         (op == OpKind::Reshape && mapped_reshape[static_cast<size_t>(v)]);
}

bool PlanContext::recomputes_operand(ValueId user, ValueId v) const {
  const Node& n = g.node(user);
  switch (op_category(n.op)) {
    case OpCategory::Reduction:
    case OpCategory::Pool:
    case OpCategory::Normalize:
    case OpCategory::Gather: return true;
    case OpCategory::Norm:  // x, not weight / bias
      return std::count(n.operands.begin(), n.operands.end(), v) == 1 && n.operands[0] == v;
    default: return false;
  }
}

std::vector<ValueId> row_stage_wide_stores(const Graph& g, const FusedTail& stage) {
  std::vector<ValueId> out;
  for (ValueId v : stage.post.stores)
    if (g.node(v).type.shape == stage.post.domain) out.push_back(v);
  return out;
}

Region row_stage_row_stores(const Graph& g, const KernelPlan& kp, size_t i) {
  Region r;
  r.domain = kp.region.domain;
  r.nodes = kp.region.nodes;
  for (size_t s = 0; s <= i; ++s)
    for (ValueId v : kp.row_stages[s].post.nodes)
      if (g.node(v).type.shape != kp.row_stages[s].post.domain) r.nodes.push_back(v);
  for (ValueId v : kp.row_stages[i].post.stores)
    if (g.node(v).type.shape != kp.row_stages[i].post.domain) r.stores.push_back(v);
  return r;
}

ValueId PlanContext::view_root(ValueId v) const {
  while (is_view(v)) v = g.node(v).operands[0];
  return v;
}

bool PlanContext::stored_through_view(ValueId v) const {
  const OpKind root = g.node(view_root(v)).op;
  return is_view(v) && root != OpKind::Input && root != OpKind::Constant;
}

int PlanContext::memory_kernel(ValueId v) const {
  const auto i = static_cast<size_t>(v);
  return written_by[i] >= 0 ? written_by[i] : kernel_of[i];
}

LeafEvaluation recomputed_nodes(const PlanContext& ctx, ValueId v, int kernel) {
  std::set<ValueId> ops, loaded;
  std::vector<std::pair<ValueId, bool>> stack = {{v, false}};  // (value, read at other coordinates)
  while (!stack.empty()) {
    const auto [u, remapped] = stack.back();
    stack.pop_back();
    const Node& n = ctx.node(u);
    const int written = ctx.written_by[static_cast<size_t>(u)];
    if (!ctx.leaf_expr[static_cast<size_t>(u)] || op_category(n.op) == OpCategory::Leaf) continue;
    if (remapped && written >= 0 && written < kernel && u != v) {  // as build_epilogue_tree does
      loaded.insert(u);
      continue;
    }
    if (!ops.insert(u).second || !ctx.pointwise(u)) continue;
    const bool remaps = remapped || n.op == OpKind::Transpose ||
                        (n.op == OpKind::Reshape && ctx.node(n.operands[0]).type.shape != n.type.shape);
    for (ValueId o : n.operands) stack.push_back({o, remaps});
  }
  return {{ops.begin(), ops.end()}, {loaded.begin(), loaded.end()}};
}

bool squeeze_reshape(const Shape& from, const Shape& to) {
  Shape a, b;
  for (int64_t d : from)
    if (d != 1) a.push_back(d);
  for (int64_t d : to)
    if (d != 1) b.push_back(d);
  return a == b;
}

std::vector<int> broadcast_map(const Shape& shape, int domain_rank) {
  std::vector<int> m(shape.size(), -1);
  const int off = domain_rank - static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) m[d] = off + static_cast<int>(d);
  return m;
}

std::vector<int> operand_map(const PlanContext& ctx, ValueId v, size_t j, const std::vector<int>& map) {
  const Node& n = ctx.node(v);
  const Shape& out = n.type.shape;
  const Shape& in = ctx.node(n.operands[j]).type.shape;
  std::vector<int> m(in.size(), -1);
  if (n.op == OpKind::Transpose) {  // input dim d is output dim d with the two dims swapped
    const auto& dims = n.attr_ints("dims");
    for (size_t d = 0; d < in.size(); ++d) {
      const auto e = static_cast<size_t>(static_cast<int64_t>(d) == dims[0]   ? dims[1]
                                         : static_cast<int64_t>(d) == dims[1] ? dims[0]
                                                                              : static_cast<int64_t>(d));
      if (in[d] != 1) m[d] = map[e];
    }
  } else if (n.op == OpKind::Reshape) {  // size-1 dims added or dropped: the others pair up in order
    size_t e = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (in[d] == 1) continue;
      while (e < out.size() && out[e] == 1) ++e;
      if (e < out.size()) m[d] = map[e++];
    }
  } else {  // broadcasting: right-aligned
    const size_t off = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] != 1) m[d] = map[off + d];
  }
  return m;
}

bool PlanContext::is_output(ValueId v) const {
  for (const Output& o : g.outputs)
    if (o.value == v) return true;
  return false;
}

void grow_region(PlanContext& ctx, Region& region, const std::vector<ValueId>& sources, ValueId after,
                 int kernel, bool allow_placed) {
  std::set<ValueId> inside(sources.begin(), sources.end());
  inside.insert(region.nodes.begin(), region.nodes.end());
  const auto count = static_cast<ValueId>(ctx.g.nodes.size());
  for (ValueId v = after + 1; v < count; ++v) {
    const Node& n = ctx.node(v);
    const auto i = static_cast<size_t>(v);
    if (!ctx.pointwise(v) || ctx.leaf_expr[i] || ctx.placed(v)) continue;
    if (n.type.shape != region.domain) continue;
    // A transpose (or a reshape moving size-1 dims) reads its operand at other
    // coordinates: from memory or recomputed, never from this kernel's registers.
    const bool remaps = n.op == OpKind::Transpose ||
                        (n.op == OpKind::Reshape && ctx.node(n.operands[0]).type.shape != n.type.shape);
    bool ok = true;
    for (ValueId o : n.operands) {
      const auto oi = static_cast<size_t>(o);
      const int mk = ctx.memory_kernel(o);
      const bool earlier = allow_placed && mk >= 0 && mk < kernel;
      ok = ok && ((inside.count(o) && !remaps) || ctx.leaf_expr[oi] || earlier);
    }
    if (!ok) continue;
    region.nodes.push_back(v);
    inside.insert(v);
    ctx.kernel_of[i] = kernel;
  }
}

int64_t row_broadcast_len(const Shape& rows, const Shape& wide) {
  if (rows.size() != wide.size() || rows == wide) return 0;
  size_t j = 0;
  while (j < rows.size() && rows[j] == wide[j]) ++j;
  int64_t len = 1;
  for (size_t d = j; d < rows.size(); ++d) {
    if (rows[d] != 1) return 0;
    len *= wide[d];
  }
  return len;
}

int64_t column_broadcast_rows(const Shape& cols, const Shape& wide) {
  if (cols.empty() || wide.empty() || cols.size() > wide.size() || cols.back() != wide.back() || wide.back() < 2 ||
      numel(cols) != wide.back() || numel(wide) == numel(cols))
    return 0;
  return numel(wide) / wide.back();
}

void add_tail(PlanContext& ctx, KernelPlan& kp, ValueId v, int kernel) {
  FusedTail tail;
  tail.op = v;
  tail.post.domain = ctx.node(v).type.shape;
  ctx.kernel_of[static_cast<size_t>(v)] = kernel;
  grow_region(ctx, tail.post, {v}, v, kernel, /*allow_placed=*/true);
  kp.tails.push_back(std::move(tail));
}

std::vector<ValueId> exits_of(const PlanContext& ctx, const std::vector<ValueId>& inside) {
  std::set<ValueId> in(inside.begin(), inside.end());
  std::vector<ValueId> out;
  for (ValueId v : inside) {
    bool exit = ctx.is_output(v);
    for (ValueId u : ctx.users[static_cast<size_t>(v)]) exit = exit || !in.count(u);
    if (exit) out.push_back(v);
  }
  return out;
}

}  // namespace fusejit::cg
