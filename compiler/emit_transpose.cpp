// A pointwise kernel that copies one tensor read at swapped coordinates (a
// transpose written out: the backward's dZ^T) as a tiled transpose: each
// block moves 32 x 32 tiles through shared memory, reading along the
// tensor's contiguous dim and writing along the domain's last dim, so both
// sides are coalesced (the plain pointwise loop reads one sector per element).
#include <algorithm>

#include "compiler/emit_common.h"
#include "compiler/emitters.h"

namespace fusejit::cg {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;  // 32 x 8 threads per block

}  // namespace

std::optional<TransposeTile> transpose_tile(const PlanContext& ctx, const Plan& plan, int index) {
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Shape& domain = kp.region.domain;
  const int rank = static_cast<int>(domain.size());
  if (kp.kind != KernelKind::Pointwise || rank < 2 || domain.back() == 1) return std::nullopt;
  const EpilogueTree tree = build_epilogue_tree(ctx, plan, kp.region, -1, -1, true);
  if (tree.nodes.empty() || tree.nodes[0].kind != EpiNode::Kind::Load || tree.nodes[0].dims.empty()) return std::nullopt;
  for (size_t i = 1; i < tree.nodes.size(); ++i)
    if (tree.nodes[i].kind != EpiNode::Kind::Store || tree.nodes[i].args != std::vector<int>{0}) return std::nullopt;
  const EpiNode& load = tree.nodes[0];
  const Shape& shape = ctx.node(load.value).type.shape;
  int contiguous = -1;  // the domain dim of the tensor's innermost dim of size > 1
  bool reads_last = false;
  for (size_t j = 0; j < shape.size(); ++j) {
    if (shape[j] == 1) continue;
    contiguous = load.dims[j];
    reads_last = reads_last || load.dims[j] == rank - 1;
  }
  if (contiguous < 0 || contiguous == rank - 1 || !reads_last || domain[static_cast<size_t>(contiguous)] == 1)
    return std::nullopt;
  return TransposeTile{contiguous};
}

Expected<EmittedKernel> emit_tiled_transpose(const PlanContext& ctx, const Plan& plan, int index,
                                             const TransposeTile& tile) {
  const KernelPlan& kp = plan.kernels[static_cast<size_t>(index)];
  const Shape& domain = kp.region.domain;
  const int rank = static_cast<int>(domain.size());
  const int a = tile.load_dim, b = rank - 1;  // tile dims: the tensor's contiguous one, the output's
  const EpilogueTree tree = build_epilogue_tree(ctx, plan, kp.region, -1, -1, true);
  const EpiNode& load = tree.nodes[0];
  KernelEmitter em(ctx, plan, index);
  KernelSource& s = em.src();
  s.comment = kp.name + ": " + ctx.g.describe(load.value) + " at swapped coordinates over " + shape_str(domain) +
              ", 32x32 tiles through shared memory (dims " + std::to_string(a) + " and " + std::to_string(b) + ")";
  Shape rest;  // the other domain dims, each block's tile at one coordinate of them
  std::vector<int> rest_dims;
  for (int d = 0; d < rank; ++d)
    if (d != a && d != b) {
      rest.push_back(domain[static_cast<size_t>(d)]);
      rest_dims.push_back(d);
    }
  const int64_t tiles_a = (domain[static_cast<size_t>(a)] + kTile - 1) / kTile;
  const int64_t tiles_b = (domain[static_cast<size_t>(b)] + kTile - 1) / kTile;
  const int64_t blocks = numel(rest) * tiles_a * tiles_b;
  s.constants.push_back({"kExtentA", domain[static_cast<size_t>(a)], "domain dim " + std::to_string(a)});
  s.constants.push_back({"kExtentB", domain[static_cast<size_t>(b)], "domain dim " + std::to_string(b)});
  s.constants.push_back({"kTilesA", tiles_a, "tiles along dim " + std::to_string(a)});
  s.constants.push_back({"kTilesB", tiles_b, "tiles along dim " + std::to_string(b)});
  s.constants.push_back({"kBlocks", blocks, "tiles in all"});
  const Shape& shape = ctx.node(load.value).type.shape;
  const std::string in = em.buffer_param(load.buffer, false);
  const std::string ia = "i" + std::to_string(a), ib = "i" + std::to_string(b);
  std::vector<std::string> run = {
      "__shared__ float tile[32][33];  // padded: the transposed reads hit 32 banks",
      "const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;",
      "for (long long t = blockIdx.x; t < kBlocks; t += gridDim.x) {",
      "const int tb = (int)(t % kTilesB);", "const int ta = (int)(t / kTilesB % kTilesA);"};
  if (!rest.empty()) run.push_back("const long long r = t / kTilesB / kTilesA;");
  for (const std::string& line : decompose_index("r", rest, "q", "long long")) run.push_back(line);
  for (size_t k = 0; k < rest_dims.size(); ++k)
    run.push_back("const int i" + std::to_string(rest_dims[k]) + " = q" + std::to_string(k) + ";");
  run.push_back("// read along dim " + std::to_string(a) + " (the tensor's contiguous dim)");
  run.push_back("for (int k = ty; k < 32; k += " + std::to_string(kRowsPerPass) + ") {");
  run.push_back("const int " + ia + " = ta * 32 + tx, " + ib + " = tb * 32 + k;");
  run.push_back("if (" + ia + " < kExtentA && " + ib + " < kExtentB) tile[k][tx] = fj::load_as_float(" + in + ", " +
                offset_expr_mapped(shape, load.dims, "i") + ");");
  run.push_back("}");
  run.push_back("__syncthreads();");
  run.push_back("// write along dim " + std::to_string(b) + " (the output's contiguous dim)");
  run.push_back("for (int k = ty; k < 32; k += " + std::to_string(kRowsPerPass) + ") {");
  run.push_back("const int " + ia + " = ta * 32 + k, " + ib + " = tb * 32 + tx;");
  run.push_back("if (" + ia + " < kExtentA && " + ib + " < kExtentB) {");
  run.push_back("const float v = tile[tx][k];");
  for (size_t i = 1; i < tree.nodes.size(); ++i)
    run.push_back("fj::store_from_float(" + em.buffer_param(tree.nodes[i].buffer, true) + ", " +
                  offset_expr(domain, rank, "i") + ", v);  // " + ctx.g.describe(tree.nodes[i].value));
  run.push_back("}");
  run.push_back("}");
  run.push_back("__syncthreads();  // the tile is read before the next one is written");
  run.push_back("}");
  const int threads = kTile * kRowsPerPass;
  const auto blocks_launched = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, ctx.heur.pointwise.max_blocks));
  return finish_kernel(em, kp, std::move(run), {blocks_launched, 1, 1}, threads);
}

}  // namespace fusejit::cg
