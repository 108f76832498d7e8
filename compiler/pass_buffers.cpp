// Pass: memory. A value computed in a kernel is stored when it is a graph
// output or a node of another kernel reads it. Outputs are written to their
// output buffers (every output that names the value); other values to a
// scratch buffer, f32 (intermediates keep full precision, as they do in
// registers when fused; with scratch_dtype=graph a bf16 / f16 value is held in
// its type, rounded as PyTorch's tensor is). A view (reshape) reads its
// operand's buffer; a view that is an output has its root's stores go to its
// output buffer too (no copy kernel), unless the root is an input.
#include <set>

#include "compiler/passes.h"

namespace fusejit::cg {
namespace {

// The region of kernel `kp` that computes v.
Region& region_of(KernelPlan& kp, ValueId v) {
  for (FusedTail& t : kp.tails) {
    if (t.op == v) return t.post;
    for (ValueId n : t.post.nodes)
      if (n == v) return t.post;
  }
  for (FusedTail& t : kp.row_stages) {
    if (t.op == v) return t.post;
    for (ValueId n : t.post.nodes)
      if (n == v) return t.post;
  }
  for (ValueId n : kp.wide.nodes)
    if (n == v) return kp.wide;
  return kp.region;
}

}  // namespace

void assign_buffers(PlanContext& ctx, Plan& plan) {
  const Graph& g = ctx.g;
  if (plan.kernels.empty()) return;
  // Partial row reductions: one partial per (row, column tile).
  if (!plan.partials.empty()) {
    const KernelPlan& anchor = plan.kernels[0];
    const AnchorGeometry geo = analyze_anchor(g, anchor.root);
    for (auto& [v, pb] : plan.partials) {
      bool spatial = false;
      for (const FusedTail& t : anchor.tails) spatial = spatial || (t.op == v && t.spatial);
      // Column tiles (over N, conv groups included), a conv's pixel tiles per image, or a GEMM's row tiles.
      // (wgmma and mma.sync from halo patches: patches of output pixels, conv_patch)
      const bool patches = (anchor.mainloop == Mainloop::Wgmma || anchor.conv_patch) && geo.op == OpKind::Conv2d;
      const int halo_bytes = anchor.conv_patch && anchor.mainloop == Mainloop::Mma
                                 ? (anchor.mma_kind == "bf16" || anchor.mma_kind == "f16" ? 2 : 4)
                                 : 0;
      // A linear's / matmul's row tiles: all of them (a matmul's per batch entry, or of x's flattened rows on wgmma).
      const AnchorGeometry flat = flatten_batch_rows(geo);
      const int64_t row_tiles = anchor.mainloop == Mainloop::Wgmma
                                    ? (flat.m + anchor.tile_m() - 1) / anchor.tile_m()
                                    : geo.batch * ((geo.m + anchor.tile_m() - 1) / anchor.tile_m());
      pb.tiles = !spatial ? geo.groups * ((geo.n + anchor.tile_n() - 1) / anchor.tile_n())
                 : geo.op != OpKind::Conv2d ? row_tiles
                 : patches ? conv_patch(geo, anchor.tile_m(), 1, 1, halo_bytes,
                                        anchor.mainloop == Mainloop::Wgmma && anchor.wgmma.conv_halo)
                                 .tiles_per_image
                           : (geo.oh * geo.ow + anchor.tile_m() - 1) / anchor.tile_m();
      const bool softmax = op_category(g.node(v).op) == OpCategory::Normalize;  // rows of [.., N], not a reduction
      pb.reduced = !spatial ? geo.n * geo.groups : geo.op == OpKind::Conv2d ? geo.oh * geo.ow : geo.m * geo.batch;
      pb.rows = g.node(v).type.numel() / (softmax ? geo.n : 1);
      if (pb.atomic) pb.tiles = 1;  // pass_spatial_atomics.cpp: every tile adds into one sum a row
      const int64_t bytes = pb.tiles * pb.rows * 4;
      pb.sums = static_cast<int>(plan.scratch.size());
      if (pb.atomic)
        plan.scratch.push_back({bytes, "sums of " + g.describe(v) + ", added atomically (f32[" +
                                           std::to_string(pb.rows) + "], zeroed)", true});
      else
        plan.scratch.push_back({bytes, "per-tile partials of " + g.describe(v) + " (f32[" + std::to_string(pb.tiles) +
                                           "," + std::to_string(pb.rows) + "])"});
      if (g.node(v).op == OpKind::LogSumExp || softmax) {
        pb.maxima = static_cast<int>(plan.scratch.size());
        plan.scratch.push_back({bytes, "per-tile row maxima of " + g.describe(v)});
      }
    }
  }
  // Split-K (mma.sync, SIMT): every split's accumulators per tile, and a counter per tile.
  if (KernelPlan& kp = plan.kernels[0]; kp.root >= 0 && kp.block_split_k() > 1) {
    const int block_split = kp.block_split_k();
    const AnchorGeometry geo = analyze_anchor(g, kp.root);
    const int bm = kp.tile_m(), bn = kp.tile_n();
    const int64_t tiles = geo.batch * ((geo.m + bm - 1) / bm) * anchor_column_tiles(g, kp, geo.n, bn);
    kp.split_k_partials = static_cast<int>(plan.scratch.size());
    plan.scratch.push_back({tiles * block_split * bm * bn * 4,
                            "split-K accumulators (f32[" + std::to_string(tiles) + " tiles][" +
                                std::to_string(block_split) + " splits][" + std::to_string(bm) + "x" +
                                std::to_string(bn) + "])"});
    kp.split_k_counters = static_cast<int>(plan.scratch.size());
    plan.scratch.push_back({tiles * 4, "split-K arrival counters (i32[" + std::to_string(tiles) + "])", true});
  }
  // Row-finish kernels reducing their rows to one value in several blocks: a fold per block, an arrival counter.
  for (KernelPlan& kp : plan.kernels) {
    if (kp.kind != KernelKind::RowFinish || kp.across_blocks <= 1) continue;
    const std::string what = g.describe(kp.tails.at(0).op);
    kp.across_folds = static_cast<int>(plan.scratch.size());
    plan.scratch.push_back({kp.across_blocks * 4, "per-block folds of " + what + " (f32[" +
                                                      std::to_string(kp.across_blocks) + "])"});
    kp.across_counter = static_cast<int>(plan.scratch.size());
    plan.scratch.push_back({4, "arrival counter of the blocks folding " + what + " (i32)", true});
  }
  // Split-K on wgmma: every range's accumulators per split tile, and a counter per split tile.
  if (KernelPlan& kp = plan.kernels[0]; kp.mainloop == Mainloop::Wgmma && kp.wgmma.split_k > 1) {
    const AnchorGeometry geo = flatten_batch_rows(analyze_anchor(g, kp.root));
    const WgmmaConfig& t = kp.wgmma;
    const int64_t tiles = ((geo.m + t.bm - 1) / t.bm) * anchor_column_tiles(g, kp, geo.n, t.bn) - t.split_from;
    kp.split_k_partials = static_cast<int>(plan.scratch.size());
    plan.scratch.push_back({tiles * t.split_k * t.bm * t.bn * 4,
                            "split-K accumulators (f32[" + std::to_string(tiles) + " tiles][" +
                                std::to_string(t.split_k) + " ranges][" + std::to_string(t.bm) + "x" +
                                std::to_string(t.bn) + "])"});
    kp.split_k_counters = static_cast<int>(plan.scratch.size());
    plan.scratch.push_back({tiles * 4, "split-K arrival counters (i32[" + std::to_string(tiles) + "])", true});
  }
  // Operand staging on wgmma: conv2d's x in NHWC and w as [Cout][KH][KW][Cin];
  // an fp32 matmul's B transposed to [N, K]; for 3xTF32 each operand's TF32
  // residual. The staging kernel writes them.
  if (KernelPlan& kp = plan.kernels[0]; kp.mainloop == Mainloop::Wgmma && g.node(kp.root).op == OpKind::Conv2d) {
    const AnchorGeometry geo = analyze_anchor(g, kp.root);
    const Node& a = g.node(kp.root);
    const bool f32 = kp.mma_kind == "tf32" || kp.mma_kind == "f32x3";
    const std::string et = f32 ? "f32" : std::string(dtype_name(g.node(a.operands[0]).type.dtype));
    const int64_t x_elems = geo.batch_n * geo.h * geo.w * geo.cin, w_elems = geo.cout * geo.k;
    auto add_scratch = [&](int64_t elems, int64_t bytes, const std::string& what, const Shape& shape) {
      plan.scratch.push_back({elems * bytes, what + " (" + (bytes == 4 ? std::string("f32") : et) + shape_str(shape) + ")"});
      return static_cast<int>(plan.scratch.size()) - 1;
    };
    const int eb = f32 ? 4 : 2;
    const Shape nhwc = {geo.batch_n, geo.h, geo.w, geo.cin}, w_shape = {geo.cout, geo.kh, geo.kw, geo.cin};
    // conv_nchw=1: the producer reads x itself (no clusters; 3xTF32: it splits x too). Per-tap boxes, or with
    // conv_halo=1 one halo per patch by 16-byte loads of a channel's pixels (W a multiple of 16 bytes).
    kp.conv_nchw = ctx.heur.conv_nchw > 0 && kp.wgmma.cluster_m == 1 && !kp.wgmma.swap_ab &&
                   (!kp.wgmma.conv_halo || geo.w % (16 / eb) == 0);
    if (!kp.conv_nchw) kp.a_staged = add_scratch(x_elems, eb, "x in NHWC for wgmma: " + g.describe(a.operands[0]), nhwc);
    else
      for (std::string& note : kp.notes)  // the mainloop's note: no NHWC copy of x
        if (const size_t at = note.find("a staging kernel writes x in NHWC and w as [Cout][KH][KW][Cin] first, then "
                                        "4-D TMA boxes per kernel tap");
            at != std::string::npos)
          note.replace(at, std::string::npos,
                       "a staging kernel reorders w as [Cout][KH][KW][Cin] first; the producer warpgroup's threads "
                       "write A from NCHW x per kernel tap (no NHWC copy of x), B by TMA, warp-specialized, persistent");
        else if (const std::string box = "one TMA box of input halo per patch of "; note.find(box) != std::string::npos)
          note.replace(note.find(box), box.size(), "the producer warpgroup's threads write the input halo (from NCHW x by "
                       "16-byte loads of a channel's pixels; no NHWC copy of x) of each patch of ");
    kp.b_transposed = add_scratch(w_elems, eb, "w as [Cout][KH][KW][Cin] for wgmma: " + g.describe(a.operands[1]),
                                  w_shape);
    if (kp.mma_kind == "f32x3") {
      if (!kp.conv_nchw)  // (conv_nchw: the producer splits x in registers)
        kp.residual_a = add_scratch(x_elems, 4, "3xTF32 residual of " + g.describe(a.operands[0]) + " in NHWC", nhwc);
      kp.residual_b = add_scratch(w_elems, 4, "3xTF32 residual of " + g.describe(a.operands[1]) + " as [Cout][KH][KW][Cin]",
                                  w_shape);
    }
  } else if (KernelPlan& kp = plan.kernels[0];
             kp.mainloop == Mainloop::Wgmma && (kp.mma_kind == "f32x3" || kp.mma_kind == "tf32")) {
    const AnchorGeometry geo = flatten_batch_rows(analyze_anchor(g, kp.root));
    const Node& a = g.node(kp.root);
    auto add_scratch = [&](int64_t rows, const std::string& what) {
      plan.scratch.push_back({rows * geo.k * 4, what + " (f32[" + std::to_string(rows) + "," + std::to_string(geo.k) + "])"});
      return static_cast<int>(plan.scratch.size()) - 1;
    };
    if (a.op == OpKind::Matmul && !kp.wgmma.swap_ab) kp.b_transposed = add_scratch(geo.n, "B transposed for wgmma: " + g.describe(a.operands[1]));
    if (kp.mma_kind == "f32x3") {
      kp.residual_a = add_scratch(geo.m, "3xTF32 residual of " + g.describe(a.operands[0]));
      kp.residual_b = add_scratch(geo.n, "3xTF32 residual of " + g.describe(a.operands[1]));
    }
  }
  // conv2d_weight_grad with wgrad_nhwc (mma.sync, or wgmma's B): x in NHWC, from the staging kernel.
  if (KernelPlan& kp = plan.kernels[0];
      (kp.mainloop == Mainloop::Mma || kp.mainloop == Mainloop::Wgmma) && kp.wgrad_nhwc) {
    const AnchorGeometry geo = analyze_anchor(g, kp.root);
    const Node& x = g.node(g.node(kp.root).operands[0]);
    const std::string what = "x in NHWC for the dW gather: " + g.describe(g.node(kp.root).operands[0]) + " (" +
                             std::string(dtype_name(x.type.dtype)) + shape_str({geo.batch_n, geo.h, geo.w, geo.cin}) + ")";
    plan.scratch.push_back({x.type.numel() * dtype_size(x.type.dtype), what});
    kp.a_staged = static_cast<int>(plan.scratch.size()) - 1;
  }
  // The wgmma dW: grad's rows padded to a TMA stride where OW elements are not one.
  if (KernelPlan& kp = plan.kernels[0]; kp.mainloop == Mainloop::Wgmma && g.node(kp.root).op == OpKind::Conv2dWeightGrad) {
    const AnchorGeometry geo = analyze_anchor(g, kp.root);
    const Node& grad = g.node(g.node(kp.root).operands[1]);
    const int64_t eb = dtype_size(grad.type.dtype), per16 = 16 / eb;
    if (geo.ow % per16 && !kp.grad_flat) {  // (flattened planes: read in place)
      kp.grad_pitch = (geo.ow + per16 - 1) / per16 * per16;
      plan.scratch.push_back({grad.type.numel() / geo.ow * kp.grad_pitch * eb,
                              "grad with rows padded with zeros to " + std::to_string(kp.grad_pitch) + " elements for the TMA "
                              "boxes of the wgmma dW: " + g.describe(g.node(kp.root).operands[1]) + " (" +
                              std::string(dtype_name(grad.type.dtype)) +
                              shape_str({geo.batch_n, geo.cout, geo.oh, kp.grad_pitch}) + ")"});
      kp.grad_padded = static_cast<int>(plan.scratch.size()) - 1;
      kp.notes.push_back("operands: grad's rows of " + std::to_string(geo.ow * eb) + " bytes are not a TMA stride: "
                         "the staging kernel copies grad to rows of " + std::to_string(kp.grad_pitch) + " elements");
    }
  }
  auto add_buffer = [&](ValueId v) {
    std::vector<BufferRef> outs;  // v's outputs, then those of its views that v's stores fill (stored_through_view)
    for (size_t o = 0; o < g.outputs.size(); ++o)
      if (g.outputs[o].value == v) outs.push_back({BufferKind::Output, static_cast<int>(o)});
    for (size_t o = 0; o < g.outputs.size(); ++o)
      if (const ValueId out = g.outputs[o].value; ctx.stored_through_view(out) && ctx.view_root(out) == v)
        outs.push_back({BufferKind::Output, static_cast<int>(o)});
    if (g.node(v).op == OpKind::Input || ctx.is_view(v)) {  // read where it is; written out by a copy
      plan.store_to[v] = outs;
      return;
    }
    if (outs.empty()) {
      const Node& n = g.node(v);
      const bool narrow = ctx.heur.scratch_graph_dtype && (n.type.dtype == DType::BF16 || n.type.dtype == DType::F16);
      ScratchSpec s;
      s.bytes = n.type.numel() * (narrow ? 2 : 4);
      s.what = g.describe(v) + " (" + (narrow ? std::string(dtype_name(n.type.dtype)) : "f32") +
               shape_str(n.type.shape) + ")";
      if (narrow) plan.scratch_dtype[static_cast<int>(plan.scratch.size())] = n.type.dtype;
      plan.buffer[v] = {BufferKind::Scratch, static_cast<int>(plan.scratch.size())};
      plan.store_to[v] = {plan.buffer[v]};
      plan.scratch.push_back(std::move(s));
      return;
    }
    plan.buffer[v] = outs[0];
    plan.store_to[v] = outs;
  };

  const auto inputs = g.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) plan.buffer[inputs[i]] = {BufferKind::Input, static_cast<int>(i)};
  // Leaf expressions some kernel writes out (pass_fallback put them in stores).
  for (KernelPlan& kp : plan.kernels) {
    for (ValueId v : kp.region.stores) add_buffer(v);
    for (ValueId v : kp.streamed.stores) add_buffer(v);  // a row pass's
  }

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int k = ctx.kernel_of[i];
    if (k < 0) continue;
    const auto v = static_cast<ValueId>(i);
    bool store = ctx.is_output(v);
    for (ValueId u : ctx.users[i]) {
      const bool from_partials = plan.partials.count(u) && k == 0;  // the epilogue reduces v itself
      store = store || (ctx.kernel_of[static_cast<size_t>(u)] != k && !from_partials);
    }
    if (!store) continue;
    add_buffer(v);
    region_of(plan.kernels[static_cast<size_t>(k)], v).stores.push_back(v);
  }
  // A partly fused softmax: the epilogue's exp(y - tile max) goes to the
  // softmax's own buffer (scaled there in place), else to an f32 scratch.
  for (auto& [v, pb] : plan.partials) {
    if (op_category(g.node(v).op) != OpCategory::Normalize) continue;
    auto it = plan.buffer.find(v);
    if (it != plan.buffer.end()) {
      pb.stage = it->second;
      continue;
    }
    pb.stage = BufferRef{BufferKind::Scratch, static_cast<int>(plan.scratch.size())};
    plan.scratch.push_back({g.node(v).type.numel() * 4, g.describe(v) + " before its rows are scaled (f32)"});
  }
  // Views: the operand's buffer (contiguous, the same elements in row-major order).
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto v = static_cast<ValueId>(i);
    if (!ctx.is_view(v)) continue;
    const ValueId x = g.node(v).operands[0];
    auto it = plan.buffer.find(x);
    if (it == plan.buffer.end()) continue;
    plan.buffer[v] = it->second;
    const char* kinds[] = {"input", "output", "scratch"};
    plan.notes.push_back("reshape %" + std::to_string(v) + " " + shape_str(g.node(v).type.shape) + " is a view of %" +
                         std::to_string(x) + " " + shape_str(g.node(x).type.shape) + " (" +
                         kinds[static_cast<int>(it->second.kind)] + " " + std::to_string(it->second.index) +
                         ", read as the new shape): no kernel of its own" +
                         (ctx.is_output(v) && ctx.stored_through_view(v)
                              ? "; the kernel that stores %" + std::to_string(ctx.view_root(v)) +
                                    " writes its output buffer too (the same elements in row-major order)"
                              : ""));
  }
}

}  // namespace fusejit::cg
