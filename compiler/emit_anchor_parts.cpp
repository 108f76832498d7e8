// Pieces of the anchor emitter (see emit_anchor_parts.h).
#include "compiler/emit_anchor_parts.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "compiler/emitters.h"

namespace fusejit::cg::anchor {

std::string tile_alias(const TileConfig& t, bool b_k_contiguous) {
  std::string sizes;  // "BM, BN, BK, TM, TN, "
  for (int v : {t.bm, t.bn, t.bk, t.tm, t.tn}) sizes += std::to_string(v) + ", ";
  if (t.gemv)
    return "using Tile = fj::GemvTile<" + sizes + std::to_string(t.stages) +
           (b_k_contiguous ? ", true>;  // every row of 16-byte k runs of W [N, K]" : ", false>;  // B [K, N]");
  return "using Tile = fj::SimtTile<" + sizes + (t.warp_along_m ? "true" : "false") + ">;";
}

// The template's name for an MMA kind ("bf16" -> "BF16", "f32x3" -> "F32x3").
std::string kind_enum(const std::string& kind) {
  return kind == "bf16" ? "BF16" : kind == "f16" ? "F16" : kind == "tf32" ? "TF32" : "F32x3";
}

std::string wgmma_alias(const WgmmaConfig& t, const std::string& kind, bool b_n_major, bool overlapping_tiles) {
  // a halo conv's buffers are fj::ConvHalo's; its Tile's (unused) ring takes the least stages
  std::string args = std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " +
                     std::to_string(t.conv_halo ? 2 : t.stages) +
                     ", fj::MmaKind::" + kind_enum(kind);
  if (t.cluster_n > 1)  // every parameter up to kClusterN (no swap-AB or M clusters with it)
    args += std::string(", /*kBNMajor=*/") + (b_n_major ? "true" : "false") + ", /*kPingPong=*/" +
            (t.pingpong ? "true" : "false") +
            ", /*kClusterM=*/1, /*kSwapAB=*/false, /*kBRowBytes=*/128, /*kBRows=*/0, /*kClusterN=*/" +
            std::to_string(t.cluster_n);
  else if (t.swap_ab)
    args += ", /*kBNMajor=*/false, /*kPingPong=*/false, /*kClusterM=*/1, /*kSwapAB=*/true" +
            (t.b_row_bytes != 128 ? ", /*kBRowBytes=*/" + std::to_string(t.b_row_bytes) : std::string()) +
            (t.b_rows != 0 ? ", /*kBRows=*/" + std::to_string(t.b_rows) : std::string());
  else if (b_n_major || t.pingpong || t.cluster_m > 1)
    args += std::string(", /*kBNMajor=*/") + (b_n_major ? "true" : "false") + ", /*kPingPong=*/" +
            (t.pingpong ? "true" : "false");
  if (t.cluster_m > 1) args += ", /*kClusterM=*/" + std::to_string(t.cluster_m);
  if (overlapping_tiles)
    return "struct Tile : fj::WgmmaTile<" + args + "> {  // column tiles kColumnStep apart (1-D pools' windows)\n"
           "  static constexpr int kNStep = kColumnStep;\n};";
  return "using Tile = fj::WgmmaTile<" + args + ">;" +
         (t.swap_ab && t.b_row_bytes != 128 ? "  // x's rows as wgmma's register operand (the swap-AB dW)"
          : t.swap_ab                         ? "  // B [K, N] as wgmma's register operand: C^T = B^T A^T"
          : b_n_major                         ? "  // B [K, N]"
                                              : "");
}

void add_mma_aliases(const MmaConfig& t, const std::string& kind, std::vector<std::string>& out) {
  const int elem = kind == "bf16" || kind == "f16" ? 2 : 4;
  out.push_back("using Tile = fj::MmaTile<" + std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " +
                std::to_string(t.bk(elem)) + ", " + std::to_string(t.wm()) + ", " + std::to_string(t.wn()) + ", " +
                std::to_string(t.stages) + ">;");
  out.push_back("using Kind = fj::mma::" + kind_enum(kind) + ";");
}

// The widest copy fj::mma::copy_tile makes from rows of `ld` elements: the
// alignment the operand's base address needs.
int mma_copy_bytes(int64_t ld, int elem_bytes) {
  return (ld * elem_bytes) % 16 == 0 ? 16 : (ld * elem_bytes) % 4 == 0 ? 4 : elem_bytes;
}

// Columns the wgmma epilogue stages at a time: the widest that fits in the
// shared memory the ring leaves (at least 16; ping-pong: half of it each).
int64_t wgmma_epilogue_room(const WgmmaConfig& t, bool three_tf32, int64_t reserved) {
  return (kWgmmaDynamicSmemLimit - wgmma_smem_bytes(t, three_tf32) - reserved) / (t.pingpong ? 2 : 1);
}

int wgmma_epilogue_chunk(const WgmmaConfig& t, bool three_tf32, int64_t reserved) {
  const int64_t left = wgmma_epilogue_room(t, three_tf32, reserved);
  // Chunks of 8-column groups that divide the tile's columns and its elements among the consumer threads (the
  // swap-AB dW's 192 columns over 384 threads: 48 or 24; thirds only where the threads or the tile need them:
  // a 168-column tile, 8 x 21, without room for 56).
  const int threads = 128 * t.consumers() / (t.pingpong ? 2 : 1);
  const int narrowest = wgmma_min_epilogue_chunk(t);
  for (int chunk : {64, 56, 48, 32, 24, 16}) {  // 56: a 168-column tile
    if (chunk % 3 == 0 && threads % 3 && t.bn % 16 == 0) continue;
    if (t.bn % chunk || int64_t{t.bm} * chunk % threads) continue;
    if (chunk == narrowest || int64_t{t.bm} * (chunk + 8) * 4 <= left) return chunk;
  }
  return narrowest;
}

std::vector<TensorMapSpec> gemm_tensor_maps(const Graph& g, const Plan& plan, const KernelPlan& kp,
                                            const AnchorGeometry& geo, int64_t rows) {
  const WgmmaConfig& wt = kp.wgmma;
  const Node& a = g.node(kp.root);
  const DType dt = g.node(a.operands[0]).type.dtype;
  const int elem = dt == DType::F32 ? 4 : 2, bk = 128 / elem;
  auto view = [&](ValueId v, int64_t view_rows, int64_t view_cols, int box_rows, int box_cols) {
    return TensorMapSpec{plan.buffer.at(v), elem, dt == DType::BF16, view_rows, view_cols, box_rows, box_cols};
  };
  const int b_rows = wgmma_cluster_b_box_rows(wt);  // a cluster's blocks load a share of B's tile each
  std::vector<TensorMapSpec> maps = {
      view(a.operands[0], rows, geo.k, wt.bm, bk),
      kp.b_transposed >= 0 ? TensorMapSpec{{BufferKind::Scratch, kp.b_transposed}, 4, false, geo.n, geo.k, b_rows,
                                           bk}  // B^T [N, K] from the staging kernel
      : wt.swap_ab ? view(a.operands[1], geo.k, geo.n, bk, 32)  // B [K, N]: 32-wide columns (wgmma_swap_ab.cuh)
      : geo.op == OpKind::Matmul ? view(a.operands[1], geo.k, geo.n, bk, 64)  // B [K, N]: 64-wide columns
                                 : view(a.operands[1], geo.n, geo.k, b_rows, bk)};
  if (needs_tf32_split(kp)) {  // 3xTF32: the operands' residuals, tiled like them
    maps.push_back(TensorMapSpec{{BufferKind::Scratch, kp.residual_a}, 4, false, rows, geo.k, wt.bm, bk});
    maps.push_back(wt.swap_ab ? TensorMapSpec{{BufferKind::Scratch, kp.residual_b}, 4, false, geo.k, geo.n, bk, 32}
                              : TensorMapSpec{{BufferKind::Scratch, kp.residual_b}, 4, false, geo.n, geo.k, wt.bn, bk});
  }
  for (ValueId v : kp.tma_stores) {  // the outputs: boxes of BM rows x a chunk (128 bytes swizzled, or fewer plain)
    const DType ot = g.node(v).type.dtype;
    const int eb = static_cast<int>(dtype_size(ot));
    const int chunk = kp.tma_store_chunk_cols;
    maps.push_back(TensorMapSpec{plan.buffer.at(v), eb, ot == DType::BF16, rows, geo.n, wt.bm, chunk, chunk * eb == 128});
  }
  return maps;
}

std::string conv_wgmma_call(const WgmmaConfig& wt, const ConvPatch& patch, KernelSource& s, const std::string& nchw_x,
                            const std::string& elem_type, int lookahead) {
  if (!nchw_x.empty() && !wt.conv_halo)  // the producer's threads read NCHW x (conv_nchw=1|2)
    return "fj::wgmma_mainloop<Tile>(fj::ConvNchwOperands<Tile, ConvShape, Pixels, " + elem_type +
           (lookahead == 2 ? ", 2" : "") + ">{maps, " + nchw_x + "}, order, split, ring, ";
  if (!wt.conv_halo)
    return "fj::wgmma_mainloop<Tile>(fj::ConvOperands<Tile, ConvShape, Pixels>{maps}, order, split, ring, ";
  const bool nchw = !nchw_x.empty();
  const bool streamed = wt.conv_halo_b_stages > 0;
  s.aliases.push_back("using Halo = fj::ConvHalo<Tile, ConvShape, Pixels, " + std::to_string(patch.bh) + ", " +
                      std::to_string(patch.bw) + ", " + std::to_string(wt.stages) +
                      (streamed ? std::string(nchw ? ", true, " : ", false, ") + std::to_string(wt.conv_halo_b_stages)
                                : std::string(nchw ? ", true" : "")) +
                      ">;  // the filter " + (streamed ? "streamed" : "resident") +
                      (nchw ? ", each patch's halo written from NCHW x" : ", a halo box per patch"));
  return "fj::conv_halo_mainloop<Tile, Halo, " + elem_type + ">(maps, order, ring, " + (nchw ? nchw_x : "nullptr") +
         ", ";
}

Expected<std::vector<std::string>> halo_patch_loop(const PlanContext& /*ctx*/, const AnchorGeometry& geo,
                                                   const ConvPatch& patch, const MmaConfig& mt, bool prefetch,
                                                   bool pipeline, int elem_bytes, const std::string& T, const std::string& x,
                                                   const std::string& w, KernelSource& s, int image_cluster) {
  // prefetch (KernelPlan::halo_prefetch): the next tile's halo loaded into registers during this tile's MMAs (by
  // vectors: 4-byte elements too, the template's VF). The scheduler checked it applies to the same patches.
  if (const std::string why = conv_patch_prefetch_blocker(geo, patch, mt.threads(), elem_bytes);
      prefetch && !why.empty())
    return Error("codegen: halo prefetch planned, but " + why + " (the scheduler's patches differ from the kernel's)");
  const bool pipelined = conv_patch_pipelined(geo, elem_bytes, pipeline);
  s.aliases.push_back("using Conv = fj::ConvPatchMma<Tile, Kind, " + T + ", ConvShape, " + std::to_string(patch.bh) +
                      ", " + std::to_string(patch.bw) + ", " + std::to_string(conv_patch_block_chunks(geo, elem_bytes)) +
                      (prefetch && elem_bytes == 4 ? ", 1, true" : pipelined ? ", 2" : "") +
                      ">;  // operands from shared-memory copies, channel chunks in the halo at a time");
  std::vector<std::string> run = {
      "const int n0 = blockIdx.y * Tile::BN;", "const int g = blockIdx.z;  // group",
      "const Conv conv{" + x + ", " + w + ", g, n0, smem_raw};",
      "[[maybe_unused]] float* smem = reinterpret_cast<float*>(smem_raw + Conv::kSmemBytes);  // the epilogue's"};
  // Every block strides over all tiles, or a cluster's blocks over one image's (emit_spatial_tail.cpp).
  const PixelTileRange r = pixel_tile_range(s, image_cluster);
  append(run, r.head);
  if (prefetch)
    append(run, {"Conv::HaloRegs halo;  // the next tile's input halo, loaded during this tile's MMAs",
                 "conv.prefetch_halo<Pixels>(" + r.first_loaded + ", halo);"});
  append(run, {"#pragma unroll 1",
               "for (int pixel_tile = " + r.first + "; pixel_tile < " + r.end + "; pixel_tile += " + r.stride + ") {",
               "const int m0 = pixel_tile * Tile::BM;", "Frag frag;",
               prefetch ? "conv.accumulate_prefetched<Pixels>(pixel_tile, " + r.next + ", halo, frag);"
                        : "conv.accumulate<Pixels>(pixel_tile, frag);"});
  return run;
}

WgmmaMapParams wgmma_map_params(const KernelPlan& kp, int x_cols) {
  WgmmaMapParams m;
  m.params = {"const __grid_constant__ fj::TmaDescriptor tma_a", "const __grid_constant__ fj::TmaDescriptor tma_b"};
  m.operands = "&tma_a, &tma_b";  // fj::GemmMaps
  if (kp.conv_nchw) {  // B's map alone: the producer's threads read NCHW x
    m.params.erase(m.params.begin());
    m.operands = "nullptr, &tma_b";
  }
  if (needs_tf32_split(kp)) {
    if (!kp.conv_nchw) m.params.push_back("const __grid_constant__ fj::TmaDescriptor tma_a_lo");
    m.params.push_back("const __grid_constant__ fj::TmaDescriptor tma_b_lo");
    m.operands += kp.conv_nchw ? ", nullptr, &tma_b_lo" : ", &tma_a_lo, &tma_b_lo";
  }
  for (int kw = 1; kw < x_cols; ++kw) {  // a wgmma dW's views of x for kernel columns 1.. (wgrad_wgmma_setup)
    m.out_maps += ", const fj::TmaDescriptor* tma_x" + std::to_string(kw);
    m.out_args += ", &tma_x" + std::to_string(kw);
    m.params.push_back("const __grid_constant__ fj::TmaDescriptor tma_x" + std::to_string(kw));
  }
  for (size_t k = 0; k < kp.tma_stores.size(); ++k) {
    m.out_maps += ", const fj::TmaDescriptor* tma_out" + std::to_string(k);
    m.out_args += ", &tma_out" + std::to_string(k);
    m.params.push_back("const __grid_constant__ fj::TmaDescriptor tma_out" + std::to_string(k));
  }
  return m;
}

Status check_map_params(const WgmmaMapParams& m, const std::vector<TensorMapSpec>& maps, const std::string& kernel) {
  if (m.params.size() == maps.size()) return Status::success();
  return Error("codegen: internal: " + std::to_string(maps.size()) + " tensor maps for " +
               std::to_string(m.params.size()) + " map parameters of " + kernel);
}

std::vector<TensorMapSpec> conv_tensor_maps(const Graph& g, const KernelPlan& kp, const AnchorGeometry& geo,
                                            const ConvPatch& patch) {
  const DType dt = g.node(g.node(kp.root).operands[0]).type.dtype;
  const bool f32 = kp.mma_kind == "tf32" || kp.mma_kind == "f32x3";
  const int elem = f32 ? 4 : 2, bk = 128 / elem;
  auto nhwc = [&](int scratch) {  // x in NHWC: {C, W, H, N}, boxes of BK channels x the patch
    TensorMapSpec m{{BufferKind::Scratch, scratch}, elem, !f32 && dt == DType::BF16};
    m.image = {geo.cin, geo.w, geo.h, geo.batch_n};
    if (kp.wgmma.conv_halo)  // the patch's input halo (conv_wgmma_halo.cuh)
      m.image_box = {bk, static_cast<int>(patch.bw + (geo.kw - 1) * geo.dw),
                     static_cast<int>(patch.bh + (geo.kh - 1) * geo.dh), 1};
    else
      m.image_box = {bk, patch.bw, patch.bh, 1};
    return m;
  };
  auto weights = [&](int scratch) {  // w as [Cout][KH*KW*Cin]; clusters: each block loads a share of B's rows
    return TensorMapSpec{{BufferKind::Scratch, scratch}, elem, !f32 && dt == DType::BF16, geo.cout, geo.k,
                         kp.wgmma.bn / kp.wgmma.cluster_m, bk};
  };
  if (kp.conv_nchw) {  // A: the producer's threads read NCHW x (and split it for 3xTF32)
    std::vector<TensorMapSpec> maps = {weights(kp.b_transposed)};
    if (needs_tf32_split(kp)) maps.push_back(weights(kp.residual_b));
    return maps;
  }
  std::vector<TensorMapSpec> maps = {nhwc(kp.a_staged), weights(kp.b_transposed)};
  if (needs_tf32_split(kp)) {
    maps.push_back(nhwc(kp.residual_a));
    maps.push_back(weights(kp.residual_b));
  }
  return maps;
}

std::string wgrad_wgmma_setup(const Graph& g, const Plan& plan, const KernelPlan& kp, const AnchorGeometry& geo,
                              KernelSource& s, AnchorShape& shape, std::vector<TensorMapSpec>& maps) {
  const Node& a = g.node(kp.root);
  CudaStruct cs = conv_shape_struct(g, a, geo);
  cs.comment = "the conv whose weight gradient this is: x " + shape_str(g.node(a.operands[0]).type.shape) + ", grad " +
               shape_str(g.node(a.operands[1]).type.shape) + " -> dW " + shape_str(geo.out);
  s.structs.push_back(cs);
  const bool bf16 = g.node(a.operands[1]).type.dtype == DType::BF16;
  // C[m][n] = dW[m][ci][kh][kw], n = (kh, kw, ci)
  auto coords = [&] {
    shape.coords = {"const int i0 = m;"};
    append(shape.coords, decompose_index("n", Shape{geo.kh, geo.kw, geo.cin}, "j", "int"));
    append(shape.coords, {"const int i1 = j2;", "const int i2 = j0;", "const int i3 = j1;"});
  };
  const BufferRef grad_buffer =
      kp.grad_padded >= 0 ? BufferRef{BufferKind::Scratch, kp.grad_padded} : plan.buffer.at(a.operands[1]);
  if (kp.wgmma.swap_ab) {  // tf32 (wgrad_swap_ab.cuh): grad's boxes of 32 pixels x BM channels, x's of 36 or 44 x 64
    TensorMapSpec grad{grad_buffer, 4, false};
    grad.image = {kp.grad_padded >= 0 ? kp.grad_pitch : geo.ow, geo.oh, geo.cout, geo.batch_n};
    grad.image_box = {32, 1, kp.wgmma.bm, 1};
    TensorMapSpec x{plan.buffer.at(a.operands[0]), 4, false};
    x.image = {geo.w, geo.h, geo.cin, geo.batch_n};
    x.image_box = {kp.wgmma.b_row_bytes / 4, 1, 64, 1};
    x.swizzle128 = false;
    if (kp.grad_flat) grad.image = {geo.oh * geo.ow, 1, geo.cout, geo.batch_n};  // planes flattened, in place
    maps = {grad, x};
    coords();
    return std::string("fj::wgmma_mainloop<Tile>(fj::") + (kp.grad_flat ? "WgradFlatSwapOperands" : "WgradSwapOperands") +
           "<Tile, ConvShape>{maps}, order, split, ring, ";
  }
  // grad {OW, OH, Cout, N}: 64 pixels of a row x BM channels; in place, or rows padded with zeros to grad_pitch
  TensorMapSpec grad{grad_buffer, 2, bf16};
  grad.image = {kp.grad_padded >= 0 ? kp.grad_pitch : geo.ow, geo.oh, geo.cout, geo.batch_n};
  grad.image_box = {64, 1, kp.wgmma.bm, 1};
  maps = {grad};
  std::string cols = "maps.b";  // kernel column kw's view of x in NHWC: 0 is GemmMaps' b, the others extra maps
  for (int64_t kw = 0; kw < geo.kw; ++kw) {  // {C, W, H, N}: 64 channels x 64 pixels of a row
    TensorMapSpec x{{BufferKind::Scratch, kp.a_staged}, 2, bf16};
    x.image = {geo.cin, geo.w, geo.h, geo.batch_n};
    x.image_box = {64, 64, 1, 1};
    x.image_extent = {0, std::min(geo.w, geo.ow + kw * geo.dw - geo.pw), 0, 0};  // to the last valid pixel's
    maps.push_back(x);
    if (kw > 0) cols += ", tma_x" + std::to_string(kw);
  }
  coords();
  return "fj::wgmma_mainloop<Tile>(fj::WgradOperands<Tile, ConvShape>{maps, {" + cols + "}}, order, split, ring, ";
}

std::string wgmma_split_k(const KernelPlan& kp, KernelEmitter& em, KernelSource& s) {
  const WgmmaConfig& t = kp.wgmma;
  if (t.split_k <= 1) return "const fj::SplitK split{};  // no split-K";
  s.constants.push_back({"kSplitK", t.split_k, "K ranges per split tile, each a unit of work"});
  s.constants.push_back({"kFirstSplitTile", t.split_from, "tiles before it: whole units"});
  return "const fj::SplitK split{kFirstSplitTile, kSplitK, " +
         em.buffer_param({BufferKind::Scratch, kp.split_k_partials}, true) + ", reinterpret_cast<int*>(" +
         em.buffer_param({BufferKind::Scratch, kp.split_k_counters}, true) + ")};";
}

std::vector<std::string> tma_store_epilogue(const Graph& g, const KernelPlan& kp, const AnchorShape& shape,
                                            const std::string& fn, bool pairs, const std::string& coord_call,
                                            const std::string& column_args) {
  std::vector<std::string> out;
  std::string slots, store = "[&](int slot, int c0) {";  // slots: the element's slot(s) and index there
  for (size_t k = 0; k < kp.tma_stores.size(); ++k) {
    const std::string ot = ctype(g.node(kp.tma_stores[k]).type.dtype), tile = "out_tile" + std::to_string(k);
    out.push_back(ot + "* const " + tile + " = reinterpret_cast<" + ot + "*>(ring + Tile::kRingBytes + kOutTile" +
                  std::to_string(k) + ");  // kOutSlots slots");
    slots += ", " + tile + " + slot * kOutSlot";
    store += " fj::sm90::tma_store_2d(tma_out" + std::to_string(k) + ", " + tile + " + slot * kOutSlot, n0 + c0, m0);";
  }
  const std::string elem = std::to_string(kp.tma_store_elem_bytes) + ", kOutSlots" +
                           (kp.tma_store_chunk_cols * kp.tma_store_elem_bytes == 128
                                ? std::string()
                                : ", " + std::to_string(kp.tma_store_chunk_cols));  // unswizzled chunks
  const std::string bounds = "(frag, m0, n0, " + shape.rows + ", " + shape.cols;
  if (pairs) {  // the value per element; two columns per store
    out.push_back("fj::tile_pointwise_tma_pairs<" + elem + ">" + bounds + ", out_tile0, kOutSlot,");
    out.push_back("[&](float acc, int m, int n) -> float {");
    append(out, shape.coords);
    out.push_back("return " + fn + "(p, acc, " + coord_call + column_args + ");");
  } else {
    out.push_back("fj::tile_pointwise_tma<" + elem + ">" + bounds + ",");
    out.push_back("[&](float acc, int m, int n, int slot, int at) {");
    append(out, shape.coords);
    out.push_back(fn + "(p, acc, " + coord_call + slots + ", at);");
  }
  out.push_back("},");  // the element lambda, then the store callback
  out.push_back(store + " });");
  return out;
}

std::vector<BufferRef> column_loads(const Graph& g, const EpilogueTree& tree, size_t max, int col_dim) {
  const int rank = static_cast<int>(tree.domain.size());
  std::vector<BufferRef> out, other;
  for (const EpiNode& n : tree.nodes) {
    if (n.kind != EpiNode::Kind::Load || rank == 0) continue;
    const Shape& shape = g.node(n.value).type.shape;
    const bool column = used_dims(shape, n.dims.empty() ? broadcast_dims(shape, rank) : n.dims) ==
                        std::vector<int>{col_dim < 0 ? rank - 1 : col_dim};
    auto& list = column ? out : other;
    if (std::find(list.begin(), list.end(), n.buffer) == list.end()) list.push_back(n.buffer);
  }
  std::vector<BufferRef> kept;
  for (const BufferRef& b : out)
    if (kept.size() < max && std::find(other.begin(), other.end(), b) == other.end()) kept.push_back(b);
  return kept;
}

ColumnStaging stage_columns(KernelEmitter& em, const std::vector<BufferRef>& cols, int64_t at, int bn,
                            const std::string& n_bound) {
  ColumnStaging out;
  for (size_t k = 0; k < cols.size(); ++k) {
    const std::string c = "cols" + std::to_string(k), param = em.buffer_param(cols[k], false);
    const int64_t offset = at + static_cast<int64_t>(k) * bn;
    out.lines.push_back("float* const " + c + " = smem" + (offset ? " + " + std::to_string(offset) : "") + ";  // " +
                        param + " at the tile's columns");
    out.lines.push_back("for (int c = frag.thread(); c < Tile::BN; c += Frag::kThreads) " + c + "[c] = n0 + c < " +
                        n_bound + " ? fj::load_as_float(" + param + ", n0 + c) : 0.f;");
    out.args += ", " + c;
  }
  if (!cols.empty()) out.args += ", n - n0";
  return out;
}

std::string reduce_op_type(OpKind op) {
  switch (op) {
    case OpKind::Max: return "fj::MaxOp";
    case OpKind::Min: return "fj::MinOp";
    case OpKind::LogSumExp: return "fj::LogSumExpOp";
    default: return "fj::SumOp";  // sum, mean
  }
}

std::vector<std::string> AnchorShape::reduced_coords(const AnchorGeometry& geo, bool keepdim) const {
  std::vector<std::string> out;
  const int rank = static_cast<int>(geo.out.size());
  if (geo.op == OpKind::Conv2d) {
    out = {"const fj::Pixel px = Pixels{}.pixel(m);", "if (!px.ok) return;"};
    if (keepdim)
      append(out, {"const int i0 = px.n;", "const int i1 = 0;", "const int i2 = px.oh;", "const int i3 = px.ow;"});
    else
      append(out, {"const int i0 = px.n;", "const int i1 = px.oh;", "const int i2 = px.ow;"});
    return out;
  }
  if (per_batch_rows) {
    // rows of one batch entry; the batch coordinates j* are in scope.
    for (int d = 0; d < rank - 2; ++d) out.push_back("const int i" + std::to_string(d) + " = j" + std::to_string(d) + ";");
    out.push_back("const int i" + std::to_string(rank - 2) + " = m;");
  } else {
    append(out, decompose_index("m", Shape(geo.out.begin(), geo.out.end() - 1), "i", "int"));
  }
  if (keepdim) out.push_back("const int i" + std::to_string(rank - 1) + " = 0;");
  return out;
}

CudaStruct conv_shape_struct(const Graph& g, const Node& conv, const AnchorGeometry& geo) {
  CudaStruct cs;
  cs.name = "ConvShape";
  cs.comment = "conv2d " + shape_str(g.node(conv.operands[0]).type.shape) + " * " +
               shape_str(g.node(conv.operands[1]).type.shape) + " -> " + shape_str(geo.out);
  const std::pair<const char*, int64_t> members[] = {
      {"kBatch", geo.batch_n}, {"kCin", geo.cin}, {"kH", geo.h},   {"kW", geo.w},   {"kCout", geo.cout},
      {"kKH", geo.kh},         {"kKW", geo.kw},   {"kSH", geo.sh}, {"kSW", geo.sw}, {"kPH", geo.ph},
      {"kPW", geo.pw},         {"kDH", geo.dh},   {"kDW", geo.dw}, {"kGroups", geo.groups},
      {"kOH", geo.oh},         {"kOW", geo.ow}};
  for (const auto& m : members)
    cs.members.push_back("static constexpr int " + std::string(m.first) + " = " + int_literal(m.second) + ";");
  return cs;
}

std::string add_conv_tap_table(const AnchorGeometry& geo, KernelSource& s) {
  // The table packs (kh*DH << 16) | kw*DW into an int and the input offset of a
  // tap into another: only when both fit (else divisions, which always work).
  const int64_t max_dh = (geo.kh - 1) * geo.dh, max_dw = (geo.kw - 1) * geo.dw;
  const bool taps_fit = max_dh < (int64_t{1} << 15) && max_dw < (int64_t{1} << 16) &&
                        (geo.cin / geo.groups) * geo.h * geo.w + max_dh * geo.w + max_dw <
                            std::numeric_limits<int>::max();
  if (geo.k > 4096 || !taps_fit) return "fj::NoTaps<ConvShape>";
  s.declarations.push_back("// per GEMM k = (ci*KH + kh)*KW + kw: {ci*H*W + kh*DH*W + kw*DW, (kh*DH << 16) | kw*DW}");
  s.declarations.push_back("__constant__ int2 kConvTaps[" + std::to_string(geo.k) + "] = {");
  std::string line;
  for (int64_t k = 0; k < geo.k; ++k) {
    const int64_t ci = k / (geo.kh * geo.kw), rs = k % (geo.kh * geo.kw);
    const int64_t dh = (rs / geo.kw) * geo.dh, dw = (rs % geo.kw) * geo.dw;
    line += "{" + std::to_string(ci * geo.h * geo.w + dh * geo.w + dw) + ", " + std::to_string((dh << 16) | dw) + "}, ";
    if (k % 8 == 7 || k + 1 == geo.k) {
      s.declarations.push_back("    " + line.substr(0, line.size() - 1));
      line.clear();
    }
  }
  s.declarations.push_back("};");
  CudaStruct ts;
  ts.name = "Taps";
  ts.comment = "kernel taps for fj::ConvA";
  CudaFunction at;
  at.prefix = "static __device__ __forceinline__ int2";
  at.name = "at";
  at.params = "int k";
  at.body = {"return kConvTaps[k];"};
  ts.methods.push_back(at);
  s.structs.push_back(ts);
  return "Taps";
}

}  // namespace fusejit::cg::anchor
