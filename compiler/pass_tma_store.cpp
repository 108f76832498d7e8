// Pass: TMA bulk stores for a wgmma anchor's epilogue. The cooperative
// consumers otherwise store each tile with global stores and the tensor core
// waits for them (ncu, H100, bf16 128x256: tensor pipe active 70% of the time
// at K = 2048). Here the epilogue writes its outputs from the accumulators
// into two swizzled shared-memory slots per output (BM rows x 128 bytes) and
// one thread issues a TMA store per 128-byte column chunk and output
// (fj::tile_pointwise_tma[_pairs]); the stores drain during the rest of the
// epilogue and the next tile's mainloop.
//
// With one output, inputs along N (biases) are staged per tile in shared
// memory (emit_anchor's column_loads): read per element from global memory
// they cost more than the stores (H100, bf16 4096x64x4096: 0.0372 ms with
// global bias loads, 0.0251 staged, 0.0198 without a bias).
//
// `tma_store=auto` (default): eligible epilogues of cheap ops only (see
// cheap()) whose slots fit beside the ring as chosen. H100, bias + relu,
// against staged global stores in the same run
// (bench/results/bench_gemm_*_20261124-211835_tma_cols.md): bf16 4096^3 0.190
// vs 0.202 ms, 16384x2048x2048 0.203 vs 0.225, 1024x8192x8192 0.180 vs 0.187;
// tf32 0.352 vs 0.365, 0.368 vs 0.388, 0.340 vs 0.346. `tma_store=1`: every
// eligible epilogue, the ring giving up stages (down to 3) for the slots
// unless wgmma_tile fixes them; `tma_store=0`: never.
// Eligible: the cooperative schedule, a pointwise epilogue (no fused
// reduction or pool), at most two stored values of one element size, each a
// graph output of the anchor's shape (rows flattened as the mainloop's M)
// whose rows are a multiple of 16 bytes (or such a value another kernel reads,
// held in its 16-bit type with scratch_dtype=graph).
//
// conv2d writes NCHW, whose rows are rarely 16-byte aligned: its one stored
// output takes the runs epilogue instead (choose_conv_runs below,
// conv_wgmma_store.cuh), and then ping-pong tiles.
#include "compiler/passes.h"

namespace fusejit::cg {
// Ops a few instructions long: the fully unrolled TMA epilogue inlines the
// chain once per accumulator, and with transcendental ones (gelu, sigmoid,
// exp, ...) it measured slower than the staged global stores (H100, bf16
// 4096^3 bias + gelu 0.224 vs 0.220 ms; 4096x64x4096 0.063 vs 0.054).
bool cheap_epilogue_op(OpKind op) {
  switch (op) {
    case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Hardtanh: case OpKind::Clamp: case OpKind::Abs:
    case OpKind::Neg: case OpKind::Square: case OpKind::Add: case OpKind::Sub: case OpKind::Mul:
    case OpKind::Minimum: case OpKind::Maximum: case OpKind::Hardsigmoid: case OpKind::Hardswish:
      return true;
    default:
      return is_anchor(op);
  }
}

int tma_store_chunk_cols(int bn, int elem_bytes) {
  if ((bn * elem_bytes) % 128 == 0) return 128 / elem_bytes;  // swizzled 128-byte chunks
  // Unswizzled: whole 8-column fragment groups (WgmmaFragment::col) dividing the tile, 96 to 112 bytes (fewer
  // would multiply the chunks' barriers; 16-byte multiples for TMA). A warp's writes of a row pitch of 112 or 96
  // bytes fall in distinct banks (pairs) or two ways at most.
  for (int cols = 128 / elem_bytes / 8 * 8; cols * elem_bytes >= 96; cols -= 8)
    if (bn % cols == 0 && (cols * elem_bytes) % 16 == 0) return cols;
  return 0;
}

namespace {
// A wgmma conv whose epilogue stores NCHW outputs (each of the conv's shape, in
// an output buffer; at most conv_runs of them, 2 by default: a training
// forward's y and saved conv output, H200 seed 1 bf16 1.191 -> 0.825 ms, tf32
// 1.971 -> 1.449 against the fp32-staged element stores) and reduces nothing: each computed in registers,
// staged in its type, stored in runs of a channel's pixels
// (conv_wgmma_store.cuh). Else the epilogue stages fp32 chunks and stores
// element by element.
void choose_conv_runs(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  const size_t stores = kp.region.stores.size();
  if (stores == 0 || stores > static_cast<size_t>(ctx.heur.conv_runs) || !kp.tails.empty() ||
      !kp.region.transposed.empty() || kp.wgmma.swap_ab)
    return;
  const Shape out = analyze_anchor(ctx.g, kp.root).out;
  for (ValueId v : kp.region.stores)
    if (plan.buffer.at(v).kind != BufferKind::Output || ctx.node(v).type.shape != out) return;
  kp.conv_runs = kp.region.stores;
  for (ValueId v : kp.conv_runs)
    kp.notes.push_back("epilogue: " + ctx.g.describe(v) + " computed in registers, staged as " +
                       std::string(dtype_name(ctx.node(v).type.dtype)) +
                       " in shared memory and stored in runs of a channel's pixels");
  // That epilogue is short enough to hide behind the other consumer's mainloop: 64-row ping-pong tiles (the
  // default's tile at least 128 wide, cooperative, not 3xTF32 or the halo mainloop). H200, `fusejit run`
  // medians in one call, cooperative 128xBN (4 stages) -> ping-pong 64xBN (8; BN 256: 5): seed 1 bf16
  // 0.751 -> 0.739 ms, tf32 1.340 -> 1.287; 128x256x56^2 -> 256 bf16 0.812 -> 0.783; 32x64x224^2 -> 128
  // bf16 0.536 -> 0.536 (bench/results/abrun_conv_runs_H200_20261128.log).
  WgmmaConfig& w = kp.wgmma;
  if (ctx.heur.wgmma_schedule != "auto" || ctx.heur.wgmma || kp.mma_kind == "f32x3" || w.conv_halo || w.pingpong ||
      w.bm != 128 || w.bn < 128 || w.cluster_m > 1)
    return;
  // A consumer then holds the whole 128x128 tile where it is at most 128 wide (seed 1 bf16, H200: 0.743 ->
  // 0.657 ms against 64x128; bench/results/abrun_conv_pingpong128_H200_20261128.log); wider, 64 rows.
  if (w.bn > 128) {
    w.bm = 64;
    w.raster_group *= 2;
  }
  w.pingpong = true;
  w.stages = wgmma_max_stages(w, false);
  kp.notes.push_back("ping-pong " + std::to_string(w.bm) +
                     "-row tiles: each consumer's epilogue overlaps the other's mainloop");
}
}  // namespace

void choose_tma_stores(PlanContext& ctx, Plan& plan) {
  KernelPlan& kp = plan.kernels[0];
  if (kp.kind != KernelKind::Anchor || kp.mainloop != Mainloop::Wgmma || kp.region.stores.empty()) return;
  if (ctx.node(kp.root).op == OpKind::Conv2d) choose_conv_runs(ctx, plan);
  const bool asked = ctx.heur.tma_store == 1;
  auto keep_global = [&](const std::string& why) {
    if (asked) kp.notes.push_back("epilogue: global stores, not TMA bulk stores: " + why);
  };
  if (ctx.heur.tma_store == 0) return;
  if (!asked) {  // auto: linear / matmul epilogues of cheap ops, where the slots fit beside the ring as it is
    if (kp.mma_kind == "f32x3") return;  // not measured: its ring is twice as deep
    for (ValueId v : kp.region.nodes)
      if (!cheap_epilogue_op(ctx.node(v).op)) return;
  }
  if (kp.wgmma.pingpong) return keep_global("the ping-pong schedule overlaps its epilogues already");
  if (kp.wgmma.swap_ab) return keep_global("a swap-AB tile holds columns of the output (stored from registers)");
  if (ctx.node(kp.root).op == OpKind::Conv2d) return keep_global("conv2d writes NCHW (tiles are pixel patches, not [M, N] boxes)");
  if (ctx.node(kp.root).op == OpKind::Conv2dWeightGrad)
    return keep_global("a dW's columns are (kh, kw, ci), stored as [Cout][Cin][KH][KW] (not [M, N] boxes)");
  if (!kp.tails.empty()) return keep_global("a reduction or pool is fused into the epilogue");
  if (kp.region.stores.size() > 2) return keep_global("more than two stored values");
  if (!kp.region.transposed.empty()) return keep_global("a transpose is stored at swapped coordinates");
  const Graph& g = ctx.g;
  const AnchorGeometry geo = analyze_anchor(g, kp.root);
  WgmmaConfig with_slots = kp.wgmma;
  with_slots.tma_slots = ctx.heur.tma_slots.value_or(with_slots.tma_slots);
  int64_t tiles = 0;
  int elem_bytes = 0, chunk_cols = 0;
  for (ValueId v : kp.region.stores) {
    const TensorType& t = g.node(v).type;
    const int elem = static_cast<int>(dtype_size(t.dtype));
    const BufferRef buf = plan.buffer.at(v);
    const bool typed_scratch = buf.kind == BufferKind::Scratch && plan.scratch_dtype.count(buf.index);
    if (buf.kind != BufferKind::Output && !typed_scratch)  // (f32 scratch of a 16-bit value: not the value's type)
      return keep_global(g.describe(v) + " goes to f32 scratch");
    if (t.shape != geo.out) return keep_global(g.describe(v) + " is not of the anchor's shape");
    if ((geo.n * elem) % 16)
      return keep_global("TMA needs rows of a multiple of 16 bytes and " + g.describe(v) + " has " +
                         std::to_string(geo.n * elem));
    if (elem_bytes && elem != elem_bytes) return keep_global("the outputs' elements differ in size");
    chunk_cols = tma_store_chunk_cols(kp.wgmma.bn, elem);
    if (!chunk_cols)
      return keep_global("a tile " + std::to_string(kp.wgmma.bn) + " columns wide is neither whole 128-byte chunks "
                         "nor whole unswizzled chunks of 96 to 112 bytes");
    // Unswizzled chunks by default for 16-bit outputs (H100, 512x4096x11008 128x168 bias+relu, same run as
    // cuBLAS: bf16 0.0732 -> 0.0699 ms, f16 0.0746 -> 0.0707; bench_gemm_*_20261206-080532_s49.md); 32-bit
    // ones (24-column chunks, 7 a tile) are not timed: tma_store=1 asks.
    if (chunk_cols * elem != 128 && !asked && elem != 2) return;
    elem_bytes = elem;
    tiles += wgmma_store_tile_bytes(with_slots);
  }
  const bool three_tf32 = kp.mma_kind == "f32x3";
  WgmmaConfig t = with_slots;
  auto fits = [&] { return wgmma_smem_bytes(t, three_tf32) + tiles <= kWgmmaDynamicSmemLimit; };
  while (!fits() && t.stages > 3 && !ctx.heur.wgmma && asked) --t.stages;
  if (!fits())
    return keep_global("the output tiles (" + std::to_string(tiles) + " bytes) do not fit beside a " +
                       std::to_string(t.stages) + "-stage ring");
  const int given_up = kp.wgmma.stages - t.stages;
  kp.wgmma = t;
  kp.tma_stores = kp.region.stores;
  kp.tma_store_elem_bytes = elem_bytes;
  kp.tma_store_chunk_cols = chunk_cols;
  const int chunk_bytes = chunk_cols * elem_bytes;
  kp.notes.push_back("epilogue: outputs written from the accumulators to shared-memory slots and out by TMA bulk "
                     "stores, " + std::to_string(chunk_bytes) + "-byte column chunks" +
                     (chunk_bytes == 128 ? "" : " (unswizzled)") +
                     " that overlap the rest of the epilogue and the next tile's mainloop" +
                     (given_up ? " (the ring gave up " + std::to_string(given_up) + " stage(s) for them)" : ""));
}

}  // namespace fusejit::cg
