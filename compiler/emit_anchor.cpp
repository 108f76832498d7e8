// Emitter for the anchor kernel: constants for every extent, the mainloop
// (SIMT: templates/gemm_simt.cuh + conv_simt.cuh; wgmma: gemm_wgmma.cuh;
// mma.sync: gemm_mma.cuh + conv_mma.cuh), and the epilogue from
// templates/epilogue.cuh calling the generated node functions.
#include <algorithm>
#include <limits>

#include "compiler/emit_anchor_parts.h"
#include "compiler/emit_common.h"
#include "compiler/emitters.h"
#include "compiler/passes.h"

namespace fusejit::cg {
using namespace anchor;  // the pieces in emit_anchor_parts.h

Expected<EmittedKernel> emit_anchor_kernel(const PlanContext& ctx, const Plan& plan, int index) {
  const Graph& g = ctx.g;
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Node& a = g.node(kp.root);
  const AnchorGeometry geo = analyze_anchor(g, kp.root);
  const TileConfig& t = kp.tile;
  const bool wgmma = kp.mainloop == Mainloop::Wgmma, mma = kp.mainloop == Mainloop::Mma, wgrad = a.op == OpKind::Conv2dWeightGrad;
  const bool halo_patches = mma && kp.conv_patch;  // conv2d from shared-memory halo patches (conv_patch.cuh)
  const WgmmaConfig& wt = kp.wgmma;
  const MmaConfig& mt = kp.mma;
  const int tile_m = kp.tile_m(), tile_n = kp.tile_n();
  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  const std::string T = ctype(g.node(a.operands[0]).type.dtype);
  const int elem_bytes = g.node(a.operands[0]).type.dtype == DType::F32 ? 4 : 2;
  const int rank = static_cast<int>(geo.out.size());
  const int64_t int_max = std::numeric_limits<int>::max();
  int64_t store_tile_bytes = 0;  // the TMA-stored outputs' shared-memory tiles
  for (size_t k = 0; k < kp.tma_stores.size(); ++k) store_tile_bytes += wgmma_store_tile_bytes(wt);
  // Bytes a staged epilogue may take (each consumer's): 32 KiB, or what the wgmma ring and the TMA store tiles
  // leave (1 KiB to align those, 128 bytes to round the scratch).
  const int64_t store_room = store_tile_bytes ? store_tile_bytes + 1024 : 0;
  const int64_t staged_room =
      std::min<int64_t>(32 * 1024, wgmma ? wgmma_epilogue_room(wt, kp.mma_kind == "f32x3", store_room) - 128 : 32 * 1024);

  const FusedTail* pool = nullptr;
  std::vector<const FusedTail*> reductions;
  for (const FusedTail& tail : kp.tails) {
    if (op_category(g.node(tail.op).op) == OpCategory::Pool && !tail.spatial) pool = &tail;  // global_avg_pool: a reduction
    else reductions.push_back(&tail);
  }

  if (wgmma) {
    const bool b_n_major = (geo.op == OpKind::Matmul && kp.b_transposed < 0) || (wgrad && !wt.swap_ab);
    s.aliases.push_back(wgmma_alias(wt, kp.mma_kind, b_n_major, kp.pool1d_overlap >= 0));
    s.aliases.push_back(wt.swap_ab ? "using Frag = fj::WgmmaSwapFragment<Tile>;  // output rows: the wgmma's columns"
                                   : "using Frag = fj::WgmmaFragment<Tile>;");
  } else if (mma) {
    add_mma_aliases(mt, kp.mma_kind, s.aliases);
    s.aliases.push_back("using Frag = fj::MmaFragment<Tile>;");
  } else {
    s.aliases.push_back(tile_alias(t, geo.op != OpKind::Matmul));
    s.aliases.push_back(t.gemv ? "using Frag = fj::GemvFragment<Tile>;" : "using Frag = fj::SimtFragment<Tile>;");
  }
  std::vector<std::string> run;  // body of run(p, smem)
  AnchorShape shape;
  LaunchSpec launch;
  int64_t m_tiles = 0;
  const bool overlapping = kp.pool1d_overlap >= 0;  // column tiles kColumnStep apart (emit_pool1d.cpp)
  const int64_t n_tiles = anchor_column_tiles(g, kp, geo.n, tile_n);
  if (overlapping)
    s.constants.push_back({"kColumnStep", anchor_column_step(g, kp, tile_n), "columns between the tiles' first"});
  const std::string n0 = overlapping ? "const int n0 = blockIdx.y * kColumnStep;" : "const int n0 = blockIdx.y * Tile::BN;";
  std::vector<TensorMapSpec> tensor_maps;  // wgmma: the operands' TMA views
  if (n_tiles > 65535) return Error("codegen: N=" + std::to_string(geo.n) + " needs more than 65535 column tiles");

  std::string wgmma_call = "fj::wgmma_gemm<Tile>(maps, kK, order, split, ring, ";  // the wgmma mainloop, up to the epilogue
  ConvPatch patch;        // wgmma conv2d, halo patches: the tiles' pixel patches
  int64_t pool_windows = 0;  // windows per tile of a pool fused into a conv epilogue
  if (geo.op == OpKind::Conv2d) {
    s.structs.push_back(conv_shape_struct(g, a, geo));
    s.constants.push_back({"kCoutPerGroup", geo.n, "GEMM N"});
    if (!wgmma && !halo_patches) s.constants.push_back({"kGemmK", geo.k, "GEMM K: (Cin / groups) * KH * KW"});
    if (geo.cin * geo.h * geo.w > int_max || geo.oh * geo.ow * geo.cout > int_max)
      return Error("codegen: one conv image exceeds 2^31 elements");
    if (wgmma || halo_patches) {  // patches of output pixels (conv_wgmma.cuh: 4-D TMA boxes; conv_patch.cuh)
      const auto& k = pool ? g.node(pool->op).attr_ints("kernel_size") : std::vector<int64_t>{1, 1};
      // A pool reduced in the fragment's registers wants patches whose warps hold whole windows.
      const int pool_warp_rows = pool && halo_patches && ctx.heur.pool_registers && k[0] > 1 ? kp.mma.wm() : 0;
      patch = conv_patch(geo, tile_m, static_cast<int>(k[0]), static_cast<int>(k[1]),
                         halo_patches ? elem_bytes : 0, wgmma && wt.conv_halo, pool_warp_rows);
      if (patch.bh == 0) return Error("codegen: no patch of " + std::to_string(tile_m) + " pixels holds whole pool windows");
      const std::string sides = std::to_string(patch.bh) + ", " + std::to_string(patch.bw);
      s.aliases.push_back(pool ? "using Pixels = fj::PatchPoolPixels<ConvShape, Tile::BM, " + sides + ", " +
                                     std::to_string(k[0]) + ", " + std::to_string(k[1]) +
                                     ">;  // patches of whole pool windows"
                               : "using Pixels = fj::PatchPixels<ConvShape, Tile::BM, " + sides +
                                     ">;  // tiles: patches of bh x bw output pixels");
      m_tiles = geo.batch_n * patch.tiles_per_image;
      pool_windows = (patch.bh / k[0]) * (patch.bw / k[1]);
    } else if (pool) {
      const auto& k = g.node(pool->op).attr_ints("kernel_size");
      const int64_t pw_out = geo.ow / k[1];
      const int64_t per_tile = std::min<int64_t>(tile_m / (k[0] * k[1]), pw_out);
      pool_windows = per_tile;
      s.aliases.push_back("using Pixels = fj::PoolTiledPixels<ConvShape, Tile::BM, " + std::to_string(k[0]) + ", " +
                          std::to_string(k[1]) + ", " + std::to_string(per_tile) + ">;  // pool-window-major rows");
      const int64_t blocks_w = (pw_out + per_tile - 1) / per_tile;
      m_tiles = geo.batch_n * (geo.oh / k[0]) * blocks_w;
    } else if (std::any_of(kp.tails.begin(), kp.tails.end(), [](const FusedTail& t) { return t.spatial; })) {
      s.aliases.push_back("using Pixels = fj::ImagePixels<ConvShape, Tile::BM>;  // tiles of one image's pixels");
      m_tiles = geo.batch_n * ((geo.oh * geo.ow + tile_m - 1) / tile_m);
    } else {
      s.aliases.push_back("using Pixels = fj::DensePixels<ConvShape>;  // row m = (n, oh, ow)");
      m_tiles = (geo.m + tile_m - 1) / tile_m;
    }
    if (m_tiles * tile_m > int_max) return Error("codegen: conv GEMM M exceeds 2^31 rows");
    // The kernel taps as a constant-memory table (each warp reads one entry
    // per load: a broadcast) instead of divisions per load, where they fit.
    const std::string taps =
        !wgmma && !halo_patches && ctx.heur.conv_tap_table ? add_conv_tap_table(geo, s) : "fj::NoTaps<ConvShape>";
    if (wgmma) {
      tensor_maps = conv_tensor_maps(g, kp, geo, patch);
      s.constants.push_back({"kMTiles", m_tiles, "pixel patches"});
      s.constants.push_back({"kNTiles", n_tiles, "column tiles"});
      s.constants.push_back({"kRasterGroup", wt.raster_group, "patches that sweep the column tiles together"});
      if (m_tiles * n_tiles > int_max) return Error("codegen: conv2d needs more than 2^31 tiles");
      if (ctx.heur.conv_nchw > 0 && !kp.conv_nchw)
        return Error("codegen config: conv_nchw=" + std::to_string(ctx.heur.conv_nchw) + ", but the producer reads "
                     "NCHW x without clusters or swap-AB, and with conv_halo=1 where W is a multiple of " +
                     std::to_string(16 / elem_bytes) + " (16-byte loads of a channel's pixels)");
      wgmma_call = conv_wgmma_call(wt, patch, s, kp.conv_nchw ? em.load_param(a.operands[0]) : "", T,
                                   ctx.heur.conv_nchw);
      if (kp.conv_nchw && wt.conv_halo)  // 16-byte loads of x's rows
        launch.aligned.push_back({plan.buffer.at(a.operands[0]), 16});
      run.push_back("constexpr int g = 0;  // one group");
      launch.grid = {static_cast<unsigned>(wt.cluster_m > 1 ? (m_tiles + 1) / 2 * n_tiles * 2 : m_tiles * n_tiles), 1, 1};
      launch.persistent = true;  // (clusters: a unit is a pair of patches, one block each, as the GEMM's)
      launch.cluster = wt.cluster_m;
    } else if (halo_patches) {  // persistent over pixel tiles: the filters are copied once per block
      if (kp.spatial_cluster)  // the fold's reduction (pass_spatial_cluster.cpp)
        s.aliases.push_back("using SpatialOp = " + reduce_op_type(g.node(kp.tails[0].op).op) + ";");
      auto head = halo_patch_loop(ctx, geo, patch, mt, kp.halo_prefetch, kp.halo_pipeline, elem_bytes, T, em.load_param(a.operands[0]),
                                  em.load_param(a.operands[1]), s, kp.spatial_cluster);
      if (!head) return head.error();
      append(run, *head);
      s.constants.push_back({"kMTiles", m_tiles, "pixel patches"});
      // Blocks loop over the pixel tiles: as many as an SM's threads hold (kSmThreads), every (column tile, group)
      // alike; the filters are copied once per block.
      const int64_t columns = n_tiles * geo.groups;
      const int64_t blocks = std::max<int64_t>(1, sm_count_guess(ctx.arch) * (kSmThreads / mt.threads()) / columns);
      launch.grid = {static_cast<unsigned>(kp.spatial_cluster ? geo.batch_n * kp.spatial_cluster  // a cluster an image
                                                              : std::min(m_tiles, blocks)),
                     static_cast<unsigned>(n_tiles), static_cast<unsigned>(geo.groups)};
    } else {
      append(run, {"const int m0 = blockIdx.x * Tile::BM;", "const int n0 = blockIdx.y * Tile::BN;",
                   "const int g = blockIdx.z;  // group"});
      const std::string gather = "fj::ConvA<" + T + ", ConvShape, Pixels, " + taps + ">{" +
                                 em.load_param(a.operands[0]) + ", Pixels{}, g * (ConvShape::kCin / ConvShape::kGroups)}";
      const std::string w = em.load_param(a.operands[1]) + " + (long long)g * kCoutPerGroup * kGemmK";
      if (mma) {
        append(run, {"const fj::MmaConvA<" + T + ", ConvShape, Pixels, " + taps + "> a{" + gather + "};",
                     "const fj::MmaNKMajorB<" + T + ", kCoutPerGroup, kGemmK, kGemmK> b{" + w + "};",
                     "Frag frag;", "fj::mma_mainloop<Tile, Kind>(a, b, m0, n0, kGemmK, frag, smem_raw);",
                     "[[maybe_unused]] float* smem = reinterpret_cast<float*>(smem_raw);  // the epilogue's: the ring is free"});
        launch.aligned.push_back({plan.buffer.at(a.operands[1]), mma_copy_bytes(geo.k, elem_bytes)});
      } else {
        append(run, {"const " + gather.substr(0, gather.find('{')) + " a" + gather.substr(gather.find('{')) + ";",
                     "const fj::NKMajorB<" + T + ", kCoutPerGroup, kGemmK, kGemmK> b{" + w + "};",
                     "Frag frag(threadIdx.x);", "fj::simt_mainloop<Tile>(a, b, m0, n0, kGemmK, frag, smem);"});
      }
      launch.grid = {static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles), static_cast<unsigned>(geo.groups)};
    }
    shape.rows = "Pixels::kRows";
    shape.cols = "kCoutPerGroup";
    shape.coords = {"const fj::Pixel px = Pixels{}.pixel(m);", "if (!px.ok) return;", "const int i0 = px.n;",
                    "const int i1 = g * kCoutPerGroup + n;", "const int i2 = px.oh;", "const int i3 = px.ow;"};
  } else {
    // wgmma: a matmul with one [K, N] B runs as one GEMM over x's flattened leading dims
    const int64_t rows = wgmma ? flatten_batch_rows(geo).m : geo.m;
    s.constants.push_back({"kM", rows, rows != geo.m || geo.op == OpKind::Linear ? "rows: x's leading dims flattened" : "rows"});
    s.constants.push_back({"kN", geo.n, geo.op == OpKind::Linear ? "out features" : "columns"});
    s.constants.push_back({"kK", geo.k, "reduction length"});
    m_tiles = (rows + tile_m - 1) / tile_m;
    if (rows > int_max || geo.n > int_max || geo.k > int_max) return Error("codegen: a GEMM extent exceeds 2^31");
    auto x = [&] { return em.load_param(a.operands[0]); };
    auto w = [&] { return em.load_param(a.operands[1]); };
    if (wgmma) {  // linear / matmul (or a dW: wgrad_wgmma_setup) on TMA + wgmma; grouped rasterization over a 1-D grid
      if (wgrad) wgmma_call = wgrad_wgmma_setup(g, plan, kp, geo, s, shape, tensor_maps);
      else tensor_maps = gemm_tensor_maps(g, plan, kp, geo, rows);
      s.constants.push_back({"kMTiles", m_tiles, "row tiles"});
      s.constants.push_back({"kNTiles", n_tiles, "column tiles"});
      s.constants.push_back({"kRasterGroup", wt.raster_group, "row tiles that sweep the column tiles together"});
      if (!wgrad) append(shape.coords, decompose_index("m", Shape(geo.out.begin(), geo.out.end() - 1), "i", "int"));
      // Units of work (one per tile, or per K range of a split tile); the runtime launches one block per SM at most.
      // Clusters: a unit is a pair of tiles (along N: cluster_n column tiles), one block each.
      const int64_t units = wt.cluster_m > 1 ? (m_tiles + 1) / 2 * n_tiles * 2
                            : wt.cluster_n > 1 ? m_tiles * ((n_tiles + wt.cluster_n - 1) / wt.cluster_n) * wt.cluster_n
                                               : wt.split_from + (m_tiles * n_tiles - wt.split_from) * wt.split_k;
      if (units > int_max) return Error("codegen: " + std::string(op_name(geo.op)) + " needs more than 2^31 units of work");
      launch.grid = {static_cast<unsigned>(units), 1, 1};
      launch.persistent = true;
      launch.cluster = wt.cluster_m * wt.cluster_n;
    } else if (geo.op == OpKind::Conv2dWeightGrad) {  // conv_wgrad.cuh: grad in place, x gathered per (ci, kh, kw)
      CudaStruct cs = conv_shape_struct(g, a, geo);
      cs.comment = "the conv whose weight gradient this is: x " + shape_str(g.node(a.operands[0]).type.shape) +
                   ", grad " + shape_str(g.node(a.operands[1]).type.shape) + " -> dW " + shape_str(geo.out);
      s.structs.push_back(cs);
      s.constants.push_back({"kMTiles", m_tiles, "row tiles of a group"});
      if (geo.cin * geo.h * geo.w > int_max || geo.oh * geo.ow * geo.cout > int_max)
        return Error("codegen: one conv image exceeds 2^31 elements");
      if (m_tiles * geo.groups > int_max) return Error("codegen: conv2d_weight_grad needs more than 2^31 row tiles");
      const std::string pre = mma ? "fj::Mma" : "fj::";
      append(run, {"const int g = blockIdx.x / kMTiles;  // group", "const int m0 = (blockIdx.x % kMTiles) * Tile::BM;",
                   "const int n0 = blockIdx.y * Tile::BN;",
                   "const " + pre + "WgradGrad<" + T + ", ConvShape> a{" + w() +
                       " + (long long)g * kM * (ConvShape::kOH * ConvShape::kOW)};  // grad, the group's channels"});
      if (kp.wgrad_nhwc) {  // B [pixels][(kh, kw, ci)] from x in NHWC (the staging kernel's)
        const std::string scratch = em.buffer_param({BufferKind::Scratch, kp.a_staged}, false);
        const std::string x_nhwc = T == "float" ? scratch : "reinterpret_cast<const " + T + "*>(" + scratch + ")";
        run.push_back("const fj::MmaWgradNhwc<" + T + ", ConvShape> b{" + x_nhwc +
                      " + g * (ConvShape::kCin / ConvShape::kGroups)};  // x in NHWC, the group's channels");
      } else {
        AnchorGeometry taps_geo = geo;  // the taps table is indexed by B's column n = (ci, kh, kw)
        taps_geo.k = geo.n;
        const std::string taps = ctx.heur.conv_tap_table ? add_conv_tap_table(taps_geo, s) : "fj::NoTaps<ConvShape>";
        run.push_back("const " + pre + "WgradCols<" + T + ", ConvShape, " + taps + "> b{" + x() +
                      " + (long long)g * (ConvShape::kCin / ConvShape::kGroups) * (ConvShape::kH * ConvShape::kW)};"
                      "  // x's im2col rows, the group's channels");
      }
      if (mma) {  // grad's planes copied in pieces of the widest width the plane size keeps aligned
        const int64_t plane = geo.oh * geo.ow * elem_bytes;
        const int copy = plane % 16 == 0 ? 16 : plane % 8 == 0 ? 8 : plane % 4 == 0 ? 4 : elem_bytes;
        launch.aligned.push_back({plan.buffer.at(a.operands[1]), copy});
      }
      // C[m][n] = dW[g * kM + m][ci][kh][kw], n = (ci, kh, kw); from x in NHWC, n = (kh, kw, ci)
      shape.coords.push_back("const int i0 = g * kM + m;");
      const int64_t cin_g = geo.cin / geo.groups;
      append(shape.coords, decompose_index("n", kp.wgrad_nhwc ? Shape{geo.kh, geo.kw, cin_g} : Shape{cin_g, geo.kh, geo.kw},
                                           "j", "int"));
      const int order[3] = {kp.wgrad_nhwc ? 2 : 0, kp.wgrad_nhwc ? 0 : 1, kp.wgrad_nhwc ? 1 : 2};  // ci, kh, kw
      for (int d = 0; d < 3; ++d)
        shape.coords.push_back("const int i" + std::to_string(d + 1) + " = j" + std::to_string(order[d]) + ";");
      launch.grid = {static_cast<unsigned>(m_tiles * geo.groups), static_cast<unsigned>(n_tiles), 1};
    } else if (geo.op == OpKind::Linear) {
      const std::string pre = mma ? "fj::Mma" : "fj::";
      append(run, {"const int m0 = blockIdx.x * Tile::BM;", n0, "[[maybe_unused]] const int n_tile = blockIdx.y;",
                   "const " + pre + "RowMajorA<" + T + ", kM, kK, kK> a{" + x() + "};",
                   "const " + pre + "NKMajorB<" + T + ", kN, kK, kK> b{" + w() + "};"});
      if (mma) {
        launch.aligned.push_back({plan.buffer.at(a.operands[0]), mma_copy_bytes(geo.k, elem_bytes)});
        launch.aligned.push_back({plan.buffer.at(a.operands[1]), mma_copy_bytes(geo.k, elem_bytes)});
      }
      append(shape.coords, decompose_index("m", Shape(geo.out.begin(), geo.out.end() - 1), "i", "int"));
      launch.grid = {static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles), 1};
    } else {
      const int nb = rank - 2;
      shape.per_batch_rows = true;
      const Shape batch(geo.out.begin(), geo.out.end() - 2);
      const Shape& as = g.node(a.operands[0]).type.shape;
      const Shape& bs = g.node(a.operands[1]).type.shape;
      const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
      s.constants.push_back({"kMTiles", m_tiles, "row tiles per batch entry"});
      if (m_tiles * geo.batch > int_max) return Error("codegen: matmul needs more than 2^31 thread blocks");
      run.push_back("const int z = blockIdx.x / kMTiles;  // batch entry");
      append(run, decompose_index("z", batch, "j", "int"));
      append(run, {"const int m0 = (blockIdx.x % kMTiles) * Tile::BM;", n0, "[[maybe_unused]] const int n_tile = blockIdx.y;",
                   "const long long a_off = (long long)(" + offset_expr(a_batch, nb, "j") + ") * ((long long)kM * kK);",
                   "const long long b_off = (long long)(" + offset_expr(b_batch, nb, "j") + ") * ((long long)kK * kN);",
                   "const " + std::string(mma ? "fj::Mma" : "fj::") + "RowMajorA<" + T + ", kM, kK, kK> a{" + x() +
                       " + a_off};",
                   "const " + std::string(mma ? "fj::Mma" : "fj::") + "KNMajorB<" + T + ", kN, kK, kN> b{" + w() +
                       " + b_off};"});
      if (mma) {  // batch offsets keep the alignment: M*K (K*N) is a multiple of the row's
        launch.aligned.push_back({plan.buffer.at(a.operands[0]), mma_copy_bytes(geo.k, elem_bytes)});
        launch.aligned.push_back({plan.buffer.at(a.operands[1]), mma_copy_bytes(geo.n, elem_bytes)});
      }
      for (int d = 0; d < nb; ++d) shape.coords.push_back("const int i" + std::to_string(d) + " = j" + std::to_string(d) + ";");
      shape.coords.push_back("const int i" + std::to_string(nb) + " = m;");
      launch.grid = {static_cast<unsigned>(m_tiles * geo.batch), static_cast<unsigned>(n_tiles), 1};
    }
    if (t.gemv && !wgmma && !mma)  // the GEMV loop's 16-byte cp.async of every row
      for (int o : {0, 1}) launch.aligned.push_back({plan.buffer.at(a.operands[o]), 16});
    const int block_splits = kp.block_split_k();
    if (block_splits > 1) {  // blockIdx.z: this block's K range; the last block of a tile runs the epilogue
      const int64_t bk = mma ? 128 / elem_bytes : t.bk;
      s.constants.push_back({"kSplitK", block_splits, "blocks per output tile, each over a K range"});
      s.constants.push_back({"kKPerSplit", (geo.k + bk * block_splits - 1) / (bk * block_splits) * bk,
                             "K range of one split: whole k tiles"});
      launch.grid[2] = static_cast<unsigned>(block_splits);
      const std::string range = "(a, b, m0, n0, split * kKPerSplit, min(kK, (split + 1) * kKPerSplit), frag, ";
      append(run, {"const int split = blockIdx.z;", mma ? "Frag frag;" : "Frag frag(threadIdx.x);",
                   mma ? "fj::mma_mainloop<Tile, Kind>" + range + "smem_raw);" : "fj::simt_mainloop<Tile>" + range + "smem);",
                   "if (!fj::split_k_gather<kSplitK>(frag, " +
                       em.buffer_param({BufferKind::Scratch, kp.split_k_partials}, true) + ", reinterpret_cast<int*>(" +
                       em.buffer_param({BufferKind::Scratch, kp.split_k_counters}, true) +
                       "), blockIdx.x + gridDim.x * blockIdx.y, split, " +
                       (mma ? "smem_raw))" : "reinterpret_cast<char*>(smem)))"),
                   "  return;  // another split finishes this tile"});
      if (mma)
        run.push_back("[[maybe_unused]] float* smem = reinterpret_cast<float*>(smem_raw);  // the epilogue's: the ring is free");
    } else if (mma) {
      append(run, {"Frag frag;", "fj::mma_mainloop<Tile, Kind>(a, b, m0, n0, kK, frag, smem_raw);",
                   "[[maybe_unused]] float* smem = reinterpret_cast<float*>(smem_raw);  // the epilogue's: the ring is free"});
    } else if (!wgmma) {
      append(run, {"Frag frag(threadIdx.x);", "fj::simt_mainloop<Tile>(a, b, m0, n0, kK, frag, smem);"});
    }
    if (geo.op != OpKind::Conv2dWeightGrad) shape.coords.push_back("const int i" + std::to_string(rank - 1) + " = n;");
    shape.rows = "kM";
    shape.cols = "kN";
  }

  if (wgmma) {  // persistent: the epilogue runs on the consumers, as a lambda
    append(run, {"const fj::TileOrder order{kMTiles, kNTiles, kRasterGroup};", wgmma_split_k(kp, em, s)});
    if (wt.pingpong && wt.cluster_n > 1)
      append(run, {"int round = 0;  // units whose rows this thread's consumer has exchanged with its cluster"});
    if (wt.pingpong)
      append(run, {"float* const epilogue_smem = reinterpret_cast<float*>(ring + kRingBytes);",
                   "// persistent, ping-pong: the two consumers take this block's tiles in turn",
                   wgmma_call + "[&](Frag& frag, int m0, int n0, int n_tile) {",
                   "[[maybe_unused]] float* const smem = epilogue_smem + frag.consumer() * kEpilogueFloats;  // its own"});
    else if (wt.cluster_n > 1)
      append(run, {"[[maybe_unused]] float* smem = reinterpret_cast<float*>(ring + kRingBytes);  // the epilogue's",
                   "int round = 0;  // units whose rows this thread's block has exchanged with its cluster",
                   "// persistent: this block's column tile of each unit's row tile; the epilogue runs on the consumers",
                   wgmma_call + "[&](Frag& frag, int m0, int n0, int n_tile) {"});
    else
      append(run, {"[[maybe_unused]] float* smem = reinterpret_cast<float*>(ring + kRingBytes);  // the epilogue's",
                   "// persistent: this block's tiles, one after another; the epilogue runs on the consumers",
                   wgmma_call + "[&](Frag& frag, int m0, int n0, int n_tile) {"});
  }

  // ---- epilogue --------------------------------------------------------------
  // SimtTile::kSmemFloats (rows padded by 4), reused by the epilogue; the
  // wgmma epilogue has shared memory of its own after the ring; mma.sync's
  // reuses the ring.
  int64_t smem_floats = wgmma || mma ? 0 : t.smem_floats(geo.op != OpKind::Matmul);
  const std::string coord_call = coord_args(rank);
  if (pool && geo.op != OpKind::Conv2d) {  // 1-D pools along N: whole windows in every staged chunk, or overlapping tiles
    // overlapping tiles: 8 more columns a row for the halo (each ping-pong consumer's)
    const int64_t halo_bytes = overlapping ? 4LL * tile_m * 8 * (wt.pingpong ? 2 : 1) : 0;
    int chunk = wgmma ? wgmma_epilogue_chunk(wt, kp.mma_kind == "f32x3", halo_bytes) : 64;
    while (chunk > 16 && (tile_n % chunk || (!wgmma && int64_t{tile_m} * (chunk + 8) * 4 > 32 * 1024))) chunk /= 2;
    Expected<std::vector<std::string>> e =
        overlapping ? pool1d_halo_epilogue(ctx, plan, kp, em, shape, tile_m, tile_n, chunk, smem_floats)
                    : pool1d_whole_windows_epilogue(ctx, plan, kp, em, *pool, shape, tile_m, tile_n, chunk, smem_floats);
    if (!e) return e.error();
    append(run, *e);
  } else if (pool) {
    const auto& pk = g.node(pool->op).attr_ints("kernel_size");
    const bool in_registers = halo_patches && ctx.heur.pool_registers &&
                              pool_registers_fit(patch, kp.mma.wm(), static_cast<int>(pk[0]), static_cast<int>(pk[1]));
    append(run, conv_pool_epilogue(ctx, plan, kp, em, *pool, pool_windows, tile_m, tile_n, staged_room, smem_floats,
                                   in_registers));
  } else {
    if (!kp.region.stores.empty()) {
      std::vector<BufferRef> tiles;  // TMA-stored outputs
      for (ValueId v : kp.tma_stores) tiles.push_back(plan.buffer.at(v));
      auto epilogue_fn = [&](const std::vector<BufferRef>& cols = {}) {
        return em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true), "fj_epilogue",
                            "the elementwise epilogue and its stores, at output coordinates", tiles, cols);
      };
      std::string fn, column_args;
      bool continue_epilogue = true;  // the call and its lambda still to emit (not the pairs form)
      if (!kp.tma_stores.empty()) {  // from the accumulators to swizzled slots, out by TMA in 128-byte columns
        const bool pairs = kp.tma_stores.size() == 1 && kp.region.stores.size() == 1;  // one output: two columns per store
        if (pairs) {  // inputs along N (biases) staged per tile in the epilogue's scratch, before the store slots
          const EpilogueTree tree = build_epilogue_tree(ctx, plan, kp.region, kp.root, kp.tma_stores[0], false);
          const int64_t room = kWgmmaDynamicSmemLimit - (wgmma_smem_bytes(wt, kp.mma_kind == "f32x3") + store_tile_bytes);
          const std::vector<BufferRef> cols = column_loads(g, tree, static_cast<size_t>(std::max<int64_t>(0, room) / (4 * wt.bn)));
          smem_floats = std::max<int64_t>(smem_floats, static_cast<int64_t>(cols.size()) * wt.bn);
          const ColumnStaging staged = stage_columns(em, cols, 0, wt.bn, shape.cols);
          append(run, staged.lines);
          column_args = staged.args;
          fn = em.emit_tree(tree, "fj_epilogue_value", "the elementwise epilogue's stored value, at output coordinates",
                            {}, cols);
        }
        append(run, tma_store_epilogue(g, kp, shape, pairs ? fn : epilogue_fn(), pairs, coord_call, column_args));
      } else if (wgmma && !kp.conv_runs.empty()) {  // conv_wgmma_store.cuh
        append(run, conv_runs_epilogue(ctx, plan, kp, em, geo, shape, coord_call, staged_room, smem_floats));
      } else {
        if (wgmma) {
          // Staged through shared memory: coalesced loads and stores. Swap-AB tiles (and epilogue_direct=1) with
          // cheap ops store from registers (swap-AB: 4 rows a warp fill whole 32-byte sectors between two stores;
          // costly ops keep the staged path's rolled loop). Inputs along N staged per tile.
          const bool direct = (wt.swap_ab || (ctx.heur.epilogue_direct && geo.op != OpKind::Conv2d)) &&
                              std::all_of(kp.region.nodes.begin(), kp.region.nodes.end(),
                                          [&](ValueId v) { return cheap_epilogue_op(g.node(v).op); });
          const EpilogueTree tree = build_epilogue_tree(ctx, plan, kp.region, kp.root, -1, true);
          const std::vector<BufferRef> cols = geo.op == OpKind::Conv2d ? std::vector<BufferRef>{} : column_loads(g, tree, 2);
          const int64_t cols_floats = static_cast<int64_t>(cols.size()) * wt.bn;
          const int chunk = direct ? 0
                                   : wgmma_epilogue_chunk(wt, kp.mma_kind == "f32x3",
                                                          store_tile_bytes + cols_floats * 4 * (wt.pingpong ? 2 : 1));
          const int64_t staging = direct ? 0 : int64_t{wt.bm} * (chunk + 8);
          smem_floats = std::max<int64_t>(smem_floats, staging + cols_floats);
          if (!cols.empty())
            run.push_back(direct ? "Frag::sync();  // the last tile's epilogue is done reading its columns"
                                 : "Frag::sync();  // the last tile's chunks are done reading its columns");
          const ColumnStaging staged = stage_columns(em, cols, staging, wt.bn, shape.cols);
          append(run, staged.lines);
          if (direct && !cols.empty()) run.push_back("Frag::sync();  // the tile's columns are staged");
          column_args = staged.args;
          fn = epilogue_fn(cols);
          // Rows first (consecutive threads on consecutive rows): conv2d's NCHW, and outputs that are all
          // transposes of the tile (stored at swapped coordinates: contiguous along the tile's rows).
          const bool rows_first = geo.op == OpKind::Conv2d || kp.region.transposed.size() == kp.region.stores.size();
          std::vector<std::string> pairs;  // two columns a call (emit_pairs.cpp)
          if (!rows_first && ctx.heur.epilogue_pairs && !(direct && wt.swap_ab))
            pairs = staged_pairs_epilogue(em, tree, cols, chunk, shape, coord_call, column_args, fn);
          continue_epilogue = pairs.empty();
          append(run, pairs);
          if (continue_epilogue)
            run.push_back(direct ? "fj::tile_pointwise(frag, m0, n0, " + shape.rows + ", " + shape.cols + ","
                                 : "fj::tile_pointwise_staged<" + std::to_string(chunk) + (rows_first ? ", true" : "") +
                                       ">(frag, m0, n0, " + shape.rows + ", " + shape.cols + ", smem,");
        } else if (mma && geo.op == OpKind::Conv2d) {
          // NCHW: each thread a pixel row of a staged chunk, so a warp stores 32 consecutive pixels of a
          // channel. (From the fragment directly, a warp stores 8-pixel pieces: half a 32-byte sector in
          // 16-bit. H100, seed 3's bf16 forward storing Z in bf16 and the pool's input in f32: 7.45 ms,
          // DRAM 22% busy; the same without Z 3.95 ms.)
          const int chunk = std::min(tile_n, 32);
          smem_floats = std::max<int64_t>(smem_floats, int64_t{tile_m} * (chunk + 8));
          fn = epilogue_fn();
          run.push_back("fj::tile_pointwise_staged<" + std::to_string(chunk) + ", true>(frag, m0, n0, " + shape.rows +
                        ", " + shape.cols + ", smem,");
        } else {
          fn = epilogue_fn();
          run.push_back("fj::tile_pointwise(frag, m0, n0, " + shape.rows + ", " + shape.cols + ",");
        }
        if (continue_epilogue)  // (else staged_pairs_epilogue wrote the call and both lambdas)
          append(run, epilogue_lambda("[&](float acc, int m, int n) {", shape.coords, fn + "(p, acc, " + coord_call + column_args + ");"));
      }
    }
    for (size_t r = 0; r < reductions.size(); ++r) {
      const FusedTail& tail = *reductions[r];
      const Node& rn = g.node(tail.op);
      const std::string suffix = std::to_string(r);
      const std::string pre =
          em.emit_tree(build_epilogue_tree(ctx, plan, kp.region, kp.root, rn.operands[0], false),
                       "fj_pre_reduce_" + suffix, "the value " + g.describe(tail.op) + " reduces");
      const int64_t row_sharers = wgmma ? 4 : mma ? 4 * (mt.bn / mt.wn()) : t.bn / t.tn;  // Frag::kRowSharers
      smem_floats = std::max<int64_t>(smem_floats, (row_sharers + 2) * tile_m);
      const std::string value_head = "[&](float acc, int m, int n) -> float {";
      const std::string value_call = "return " + pre + "(p, acc, " + coord_call + ");";
      if (op_category(rn.op) == OpCategory::Norm) {  // group / layer norm on the accumulators (pass_fuse_norm_epilogue.cpp)
        append(run, norm_tail_epilogue(em, tail, shape, epilogue_lambda(value_head, shape.coords, value_call),
                                       smem_floats));
        continue;
      }
      if (op_category(rn.op) == OpCategory::Normalize) {  // softmax along N (pass_fuse_softmax.cpp)
        const std::string row = shape.per_batch_rows ? "(long long)z * kM + m" : "(long long)m";
        append(run, softmax_tail_epilogue(em, tail, shape, epilogue_lambda(value_head, shape.coords, value_call), row,
                                          row_sharers, smem_floats));
        continue;
      }
      if (tail.spatial) {  // per-channel values over this tile's pixels (one image): emit_spatial_tail.cpp
        const int threads = wgmma ? (wt.pingpong ? 128 : wt.consumers() * 128) : mma ? mt.threads() : t.threads();
        const std::string tile = wgmma ? "(m0 / Tile::BM)" : halo_patches ? "pixel_tile" : "blockIdx.x";
        append(run, spatial_tail_epilogue(em, tail, suffix, epilogue_lambda(value_head, shape.coords, value_call),
                                          threads, tile, staged_room, smem_floats));
        continue;
      }
      if (tail.partial) {
        append(run, row_partials_epilogue(em, geo, tail, shape, suffix, epilogue_lambda(value_head, shape.coords, value_call),
                                          wgmma, halo_patches));
        continue;
      }
      if (wgmma && !kp.wide.nodes.empty()) {  // broadcast back over the tile or cluster (pass_fuse_row_broadcast.cpp)
        append(run, row_broadcast_epilogue(em, geo, tail, shape, epilogue_lambda(value_head, shape.coords, value_call),
                                           coord_call, row_sharers, smem_floats));
        continue;
      }
      const std::string post = em.emit_tree(build_epilogue_tree(ctx, plan, tail.post, tail.op, -1, true),
                                            "fj_post_reduce_" + suffix, "after " + g.describe(tail.op));
      const int post_rank = static_cast<int>(rn.type.shape.size());
      run.push_back("fj::tile_row_reduce<" + reduce_op_type(rn.op) + ", Tile::BM, Frag::kThreads>(frag, m0, " +
                    shape.rows + ", " + shape.cols + ", smem,");
      append(run, epilogue_lambda(value_head, shape.coords, value_call));
      run.back() = "},";
      const std::string value = rn.op == OpKind::Mean ? "v / (float)" + shape.cols : "v";
      append(run, epilogue_lambda("[&](float v, int m) {", shape.reduced_coords(geo, rn.attr_bool("keepdim")),
                         post + "(p, " + value + (post_rank ? ", " + coord_args(post_rank) : "") + ");"));
    }
  }
  CudaFunction fn;
  fn.comment = "one " + std::to_string(tile_m) + "x" + std::to_string(tile_n) + " output tile";
  fn.prefix = "__device__ __forceinline__ void";
  fn.name = "run";
  EmittedKernel out;
  const std::string name = kp.name;
  launch.kernel = name;
  if (wgmma) {
    run.push_back("});");  // the epilogue lambda
    if (!kp.tma_stores.empty()) run.push_back("fj::tma_store_drain();  // the last TMA stores complete before the block exits");
    const int64_t ring_bytes = wgmma_smem_bytes(wt, kp.mma_kind == "f32x3") - 1024;
    const int64_t epilogue_floats = (smem_floats + 31) / 32 * 32;  // per consumer (ping-pong), 128-byte aligned
    const int64_t epilogue_bytes = epilogue_floats * 4 * (wt.pingpong ? 2 : 1);
    const int64_t out_at = store_tile_bytes ? (epilogue_bytes + 1023) / 1024 * 1024 : epilogue_bytes;  // swizzled: 1 KiB aligned
    const int64_t smem_bytes = ring_bytes + out_at + store_tile_bytes + 1024;
    if (wt.pingpong) s.constants.push_back({"kEpilogueFloats", epilogue_floats, "each consumer's epilogue scratch"});
    for (size_t k = 0; k < kp.tma_stores.size(); ++k)
      s.constants.push_back({"kOutTile" + std::to_string(k), out_at + static_cast<int64_t>(k) * wgmma_store_tile_bytes(wt),
                             "bytes from the ring's end to the TMA store slots of " + g.describe(kp.tma_stores[k])});
    if (!kp.tma_stores.empty()) {
      s.constants.push_back({"kOutSlots", wt.tma_slots, "TMA store slots per output"});
      s.constants.push_back({"kOutSlot", wgmma_store_tile_bytes(wt) / wt.tma_slots / kp.tma_store_elem_bytes,
                             "elements of one store slot (BM rows of 128 bytes)"});
    }
    if (smem_bytes > kWgmmaDynamicSmemLimit - (wt.cluster_n > 1 ? kRowExchangeReserve : 0))
      return Error("codegen: the wgmma ring of " + wt.str() + " and the epilogue need " + std::to_string(smem_bytes) +
                   " bytes of shared memory, over the 226 KiB a wgmma kernel may take on sm_90" +
                   (wt.cluster_n > 1 ? " (less 2 KiB for the cluster's row exchange)" : ""));
    s.constants.push_back({"kRingBytes", ring_bytes, "the TMA ring"});
    s.constants.push_back({"kSmemBytes", smem_bytes, "dynamic shared memory: the ring, the epilogue's, 1 KiB to align"});
    const WgmmaMapParams maps = wgmma_map_params(kp, wgrad && !wt.swap_ab ? static_cast<int>(geo.kw) : 0);
    const std::vector<std::string>& map_params = maps.params;
    if (Status st = check_map_params(maps, tensor_maps, name); !st) return st.error();
    const std::string &operand_maps = maps.operands, &out_maps = maps.out_maps, &out_map_args = maps.out_args;
    fn.params = "const Params& p, const fj::GemmMaps& maps" + out_maps + ", char* ring";
    fn.body = {std::string("static_assert(kRingBytes == ") + (wt.conv_halo ? "Halo" : "Tile") +
               "::kRingBytes && kRingBytes + 1024 <= kSmemBytes, \"shared memory for the mainloop\");"};
    s.comment = name + ": " + g.describe(kp.root) + " with its epilogue (wgmma " + kp.mma_kind + ", " + wt.str() + ")";
    const int threads = wt.threads();  // Tile::kThreads: a producer warpgroup and the consumers
    launch.block = {static_cast<unsigned>(threads), 1, 1};
    launch.shared_bytes = static_cast<unsigned>(smem_bytes);
    launch.tensor_maps = tensor_maps;
    // One block per SM: setmaxnreg needs the register cap that (threads, 1) sets.
    launch.args = em.finish(name, threads,
                            {"extern __shared__ __align__(1024) char smem_raw[];",
                             s.ns + "::run(p, fj::GemmMaps{" + operand_maps + "}" + out_map_args +
                                 ", fj::align_smem_1024(smem_raw));"},
                            1, map_params);
    if (wt.cluster_m * wt.cluster_n > 1)
      s.entry.prefix += " __cluster_dims__(" + std::to_string(wt.cluster_m * wt.cluster_n) + ", 1, 1)";
  } else if (mma) {
    const bool fp32_kn_b = kp.mma_b_kn_major(geo.op) && elem_bytes == 4;
    const int64_t ring_bytes = halo_patches ? conv_patch_operand_bytes(geo, patch, mt.bn, elem_bytes,
                                                                       kp.halo_pipeline,
                                                                       kp.halo_prefetch && elem_bytes == 4)
                                            : mma_smem_bytes(mt, fp32_kn_b);
    // halo patches: the epilogue's after the operand copies; else it reuses the ring
    const int64_t smem_bytes = halo_patches ? ring_bytes + smem_floats * 4 : std::max(ring_bytes, smem_floats * 4);
    if (halo_patches) run.push_back("}  // pixel tiles");
    if (kp.spatial_cluster) append(run, spatial_cluster_finish(em, geo, kp.tails[0]));
    if (smem_bytes > kWgmmaDynamicSmemLimit)
      return Error("codegen: the mma tile " + mt.str() + " and its epilogue need " + std::to_string(smem_bytes) +
                   " bytes of shared memory, over 226 KiB");
    fn.params = "const Params& p, char* smem_raw";
    if (halo_patches) {
      s.constants.push_back({"kSmemBytes", smem_bytes, "dynamic shared memory: the operand copies, the epilogue's"});
      s.constants.push_back({"kOperandBytes", ring_bytes, "the filters, a zero chunk and a patch's input halo"});
      fn.body = {"static_assert(Conv::kSmemBytes == kOperandBytes && kOperandBytes <= kSmemBytes, \"shared memory for "
                 "the operands\");"};
    } else {
      s.constants.push_back({"kSmemBytes", smem_bytes, "dynamic shared memory: the cp.async ring, then the epilogue's"});
      fn.body = {"static_assert(kSmemBytes >= Tile::smem_bytes(" + std::to_string(elem_bytes) + ", " +
                 (kp.mma_b_kn_major(geo.op) ? "true" : "false") +
                 "), \"shared memory for the mainloop\");"};
    }
    s.comment = name + ": " + g.describe(kp.root) + " with its epilogue (mma.sync " + kp.mma_kind + ", " + mt.str() + ")";
    launch.block = {static_cast<unsigned>(mt.threads()), 1, 1};
    launch.shared_bytes = static_cast<unsigned>(smem_bytes);
    // 3xTF32 keeps split operands live: one block per SM's register budget.
    const int min_blocks = ctx.heur.mma_min_blocks.value_or(mma_default_min_blocks(kp.mma_kind, mt.threads(), halo_patches));
    if (int64_t{min_blocks} * mt.threads() > kSmThreads)
      return Error("codegen config: mma_min_blocks=" + std::to_string(min_blocks) + " blocks of " +
                   std::to_string(mt.threads()) + " threads exceed an SM's " + std::to_string(kSmThreads));
    launch.args = em.finish(name, mt.threads(),
                            {"extern __shared__ __align__(128) char smem_raw[];", s.ns + "::run(p, smem_raw);"},
                            min_blocks);
    if (kp.spatial_cluster) {  // over 8 blocks: a non-portable size (the runtime allows it at load time)
      s.entry.prefix += " __cluster_dims__(" + std::to_string(kp.spatial_cluster) + ", 1, 1)";
      launch.cluster = kp.spatial_cluster;
    }
  } else {  // SIMT: static shared memory; the GEMV loop's ring is dynamic (over 48 KiB)
    const int64_t limit = t.gemv ? kWgmmaDynamicSmemLimit : 48 * 1024;
    if (smem_floats * 4 > limit)
      return Error("codegen: tile " + t.str() + " needs " + std::to_string(smem_floats * 4) +
                   " bytes of shared memory with its epilogue (at most " + std::to_string(limit / 1024) + " KiB)");
    s.constants.push_back({"kSmemFloats", smem_floats, "mainloop tiles, reused by the epilogue"});
    fn.params = "const Params& p, float* smem";
    fn.body = {"static_assert(kSmemFloats >= Tile::kSmemFloats, \"shared memory for the mainloop\");"};
    s.comment = name + ": " + g.describe(kp.root) + " with its epilogue (" + t.str() + ")";
    launch.block = {static_cast<unsigned>(t.threads()), 1, 1};
    if (t.gemv) launch.shared_bytes = static_cast<unsigned>(smem_floats * 4);
    // Two blocks per SM (at most 128 registers a thread for 256 threads): one
    // register over that halves the occupancy of the 8x8-per-thread tiles.
    launch.args = em.finish(name, t.threads(),
                            {t.gemv ? std::string("extern __shared__ __align__(16) float smem[];")
                                    : "__shared__ __align__(16) float smem[" + s.ns + "::kSmemFloats];",
                             s.ns + "::run(p, smem);"},
                            t.threads() <= 256 ? 2 : 0);
  }
  append(fn.body, run);
  s.functions.push_back(fn);
  out.source = std::move(em.src());
  out.launch = std::move(launch);
  return out;
}

}  // namespace fusejit::cg
