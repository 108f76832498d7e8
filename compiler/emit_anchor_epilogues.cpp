// Epilogue pieces of the anchor emitter (see emit_anchor_parts.h): epilogue
// lambdas, the conv epilogues (runs of pixels, fused pools) and the wgmma
// epilogue that takes two adjacent columns a call.
#include "compiler/emit_anchor_parts.h"

#include <algorithm>

#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

std::vector<std::string> epilogue_lambda(const std::string& head, const std::vector<std::string>& coords,
                                         const std::string& call) {
  std::vector<std::string> out = {head};
  const bool returns_float = head.find("-> float") != std::string::npos;
  for (const std::string& c : coords)  // rows that compute nothing
    out.push_back(returns_float && c == "if (!px.ok) return;" ? "if (!px.ok) return 0.f;" : c);
  out.push_back(call);
  out.push_back("});");
  return out;
}

std::vector<std::string> conv_runs_epilogue(const PlanContext& ctx, const Plan& plan, const KernelPlan& kp,
                                            KernelEmitter& em, const AnchorGeometry& geo, const AnchorShape& shape,
                                            const std::string& coord_call, int64_t room, int64_t& smem_floats) {
  const Graph& g = ctx.g;
  const WgmmaConfig& wt = kp.wgmma;
  std::vector<std::string> run;
  // Per-channel inputs (biases) of every output's tree, staged once for the tile's channels after the staged
  // chunk (read by the chunks' value phases, which the chunks' barriers keep apart from the next tile's staging).
  std::vector<EpilogueTree> trees;
  int64_t elem = 0;
  std::vector<BufferRef> cols;
  for (ValueId v : kp.conv_runs) {
    trees.push_back(build_epilogue_tree(ctx, plan, kp.region, kp.root, v, false));
    elem = std::max<int64_t>(elem, static_cast<int64_t>(dtype_size(g.node(v).type.dtype)));
    if (geo.groups != 1) continue;
    for (const BufferRef& b : column_loads(g, trees.back(), 2, 1))
      if (cols.size() < 2 && std::find(cols.begin(), cols.end(), b) == cols.end()) cols.push_back(b);
  }
  const int64_t cols_floats = static_cast<int64_t>(cols.size()) * wt.bn;
  int chunk = wt.bn;  // channels staged at a time: the tile's, or a half, ... of them within the room
  while (chunk > 16 && int64_t{wt.bm} * chunk * elem + cols_floats * 4 > room) chunk /= 2;
  const int64_t staging = int64_t{wt.bm} * chunk * elem / 4;
  smem_floats = std::max<int64_t>(smem_floats, staging + cols_floats);
  const ColumnStaging staged = stage_columns(em, cols, staging, wt.bn, shape.cols);
  append(run, staged.lines);
  std::vector<std::string> coords;  // every pixel computed (PatchPixels: in-bounds coordinates), no branch
  for (const std::string& c : shape.coords)
    if (c != "if (!px.ok) return;") coords.push_back(c);
  for (size_t k = 0; k < kp.conv_runs.size(); ++k) {  // one output after the other through the same staging
    const ValueId v = kp.conv_runs[k];
    const std::string name = kp.conv_runs.size() == 1 ? "fj_epilogue_value" : "fj_epilogue_value_" + std::to_string(k);
    const std::string fn =
        em.emit_tree(trees[k], name, "the value stored to " + g.describe(v) + ", at output coordinates", {}, cols);
    run.push_back("fj::tile_nchw_store<Pixels, " + std::to_string(chunk) + ">(frag, m0, n0, " + shape.cols +
                  ", g * kCoutPerGroup, " + em.buffer_param(plan.buffer.at(v), true) + ", reinterpret_cast<char*>(smem),");
    append(run, epilogue_lambda("[&](float acc, int m, int n) -> float {", coords,
                                "return " + fn + "(p, acc, " + coord_call + staged.args + ");"));
  }
  return run;
}

std::vector<std::string> conv_pool_epilogue(const PlanContext& ctx, const Plan& plan, const KernelPlan& kp,
                                            KernelEmitter& em, const FusedTail& pool, int64_t pool_windows,
                                            int tile_m, int tile_n, int64_t room, int64_t& smem_floats,
                                            bool in_registers) {
  const Graph& g = ctx.g;
  std::vector<std::string> run;
  const Node& pn = g.node(pool.op);
  const auto& k = pn.attr_ints("kernel_size");
  // A max pool first (pass_fuse_pool.cpp): the windows reduce the value before pool.after_max. Where that
  // value is the conv itself, its bias (constant over a window) is added after the max too: the windows then
  // reduce the raw accumulators, with no pass over the fragment.
  const Node& conv = g.node(kp.root);
  const bool chain_first = pn.op == OpKind::MaxPool2d && ctx.heur.pool_first;
  ValueId windows_reduce = pn.operands[0];
  if (!pool.after_max.empty()) {
    windows_reduce = [&] {  // the chain's operand that the first moved op takes from the epilogue
      const Node& first = g.node(pool.after_max.front());
      for (ValueId o : first.operands)
        if (o == kp.root || std::find(kp.region.nodes.begin(), kp.region.nodes.end(), o) != kp.region.nodes.end())
          return o;
      return kp.root;
    }();
  }
  const bool bias_after = chain_first && windows_reduce == kp.root && conv.operands.size() == 3;
  const bool pool_first = !pool.after_max.empty() || bias_after;
  std::string after_max;
  if (pool_first) {
    Region moved;
    moved.domain = pn.type.shape;
    moved.nodes = pool.after_max;
    after_max = em.emit_tree(
        build_epilogue_tree(ctx, plan, moved, {windows_reduce}, pn.operands[0], false, bias_after),
        "fj_after_max", "the non-decreasing ops moved after the max pool, at pooled coordinates");
  }
  const EpilogueTree pre_tree =
      build_epilogue_tree(ctx, plan, kp.region, {kp.root}, windows_reduce, false, !bias_after && conv.operands.size() == 3);
  const bool raw_windows = pre_tree.nodes.size() == 1 && pre_tree.result == 0;  // the accumulator as it is
  const std::string pre =
      raw_windows ? "" : em.emit_tree(pre_tree, "fj_pre_pool", "the epilogue up to the pooled value, at conv coordinates");
  const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, pool.post, pool.op, -1, true),
                                        "fj_post_pool", "after the pool, at pooled coordinates");
  const std::string flags = std::string(pn.op == OpKind::MaxPool2d ? "true" : "false") + ", " +
                            (pool_first ? "true" : "false") + ", " + (raw_windows ? "true" : "false");
  if (in_registers) {
    run.push_back("fj::patch_pool_in_registers<Pixels, " + std::to_string(k[0]) + ", " + std::to_string(k[1]) + ", " +
                  flags + ">(");
    run.push_back("    frag, m0, n0, kCoutPerGroup,");
  } else {
    // Columns staged at a time: the largest split of the tile within `room` bytes.
    int chunk = tile_n;
    while (chunk > 1 && (tile_n % chunk || int64_t{tile_m + 1} * chunk * 4 > room)) chunk /= 2;
    smem_floats = std::max<int64_t>(smem_floats, int64_t{tile_m + 1} * chunk);
    run.push_back("fj::tile_pool<Pixels, " + std::to_string(k[0] * k[1]) + ", " + std::to_string(pool_windows) +
                  ", " + (pn.op == OpKind::MaxPool2d ? "true" : "false") + ", Tile::BM, Tile::BN, Frag::kThreads, " +
                  std::to_string(chunk) + ", " + (pool_first ? "true" : "false") + ", " +
                  (raw_windows ? "true" : "false") + ">(");
    run.push_back("    frag, m0, n0, kCoutPerGroup, smem,");
  }
  if (raw_windows)
    run.push_back("    [](float acc, int, int) -> float { return acc; },  // windows of the raw accumulators");
  else {
    append(run, epilogue_lambda("[&](float acc, int m, int n) -> float {", {"const fj::Pixel px = Pixels{}.pixel(m);",
                                                                    "if (!px.ok) return 0.f;"},
                       "return " + pre + "(p, acc, px.n, g * kCoutPerGroup + n, px.oh, px.ow);"));
    run.back() = "},";
  }
  if (pool_first)  // the moved ops on the window's max, and on its min: a NaN there (inf - inf) wins
    append(run, epilogue_lambda("[&](float v, float v_min, int tile_m0, int w, int n) {",
                       {"const auto win = Pixels::window(tile_m0, w);", "if (!win.ok) return;",
                        "const int c = g * kCoutPerGroup + n;",
                        "const float hi = " + after_max + "(p, v, win.n, c, win.ph, win.pw);",
                        "const float lo = " + after_max + "(p, v_min, win.n, c, win.ph, win.pw);"},
                       post + "(p, fj::is_nan(lo) ? lo : hi, win.n, c, win.ph, win.pw);"));
  else
    append(run, epilogue_lambda("[&](float v, int tile_m0, int w, int n) {",
                       {"const auto win = Pixels::window(tile_m0, w);", "if (!win.ok) return;"},
                       post + "(p, v, win.n, g * kCoutPerGroup + n, win.ph, win.pw);"));
  return run;
}

std::vector<std::string> staged_pairs_epilogue(KernelEmitter& em, const EpilogueTree& tree,
                                               const std::vector<BufferRef>& cols, int chunk, const AnchorShape& shape,
                                               const std::string& coord_call, const std::string& column_args,
                                               const std::string& fn) {
  const KernelPlan& kp = em.plan().kernels[0];
  const int threads = 128 * kp.wgmma.consumers() / (kp.wgmma.pingpong ? 2 : 1);
  if (chunk % 2 || int64_t{kp.wgmma.bm} * (chunk / 2) % threads) return {};  // (chunk 0: from the registers)
  const std::string pair =
      em.emit_tree_pair(tree, "fj_epilogue_pair", "the elementwise epilogue at columns n and n + 1 (n even)", cols);
  if (pair.empty()) return {};
  std::string aligned;  // every output takes one store of two elements at an even index
  for (const EpiNode& n : tree.nodes)
    if (n.kind == EpiNode::Kind::Store)
      aligned += std::string(aligned.empty() ? "" : " && ") + "fj::aligned_to<" +
                 std::to_string(2 * dtype_size(em.buffer_dtype(n.buffer))) + ">(" + em.buffer_param(n.buffer, true) +
                 ")";
  std::vector<std::string> out = {
      chunk ? "fj::tile_pointwise_staged_pairs<" + std::to_string(chunk) + ">(frag, m0, n0, " + shape.rows + ", " +
                  shape.cols + ", smem, " + aligned + ","
            : "fj::tile_pointwise_pairs(frag, m0, n0, " + shape.rows + ", " + shape.cols + ", " + aligned + ","};
  append(out, epilogue_lambda("[&](float acc_a, float acc_b, int m, int n) {", shape.coords,
                              pair + "(p, acc_a, acc_b, " + coord_call + column_args + ");"));
  out.back() = "},";
  append(out, epilogue_lambda("[&](float acc, int m, int n) {", shape.coords,
                              fn + "(p, acc, " + coord_call + column_args + ");"));
  return out;
}

}  // namespace fusejit::cg::anchor
