// compiler/emit_common.h — what every kernel emitter shares: kernel
// parameters (buffers), generated node functions for epilogue trees,
// coordinate and offset arithmetic with compile-time constants.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compiler/cuda_source.h"
#include "compiler/epilogue_tree.h"
#include "compiler/plan.h"

namespace fusejit::cg {

// The largest extent an `int` index covers (kernels switch to 64-bit indices above it).
constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// Appends the lines `from` to `to` (generated source).
inline void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

class KernelEmitter {
 public:
  KernelEmitter(const PlanContext& ctx, const Plan& plan, int index);

  KernelSource& src() { return src_; }
  const KernelPlan& kernel() const { return plan_.kernels[static_cast<size_t>(index_)]; }
  const PlanContext& ctx() const { return ctx_; }
  const Plan& plan() const { return plan_; }

  // Registers a buffer as a kernel parameter; returns its Params member
  // expression, "p.<name>".
  std::string buffer_param(BufferRef b, bool write);
  std::string load_param(ValueId v) { return buffer_param(plan_.buffer.at(v), false); }
  // Operand `v` of the kernel's op as a float at flat index `index` (an
  // expression) of v's shape: a load of its buffer, or, for a leaf expression
  // the plan left out of memory (PlanContext::recomputes_operand), a call of
  // a generated function that computes it there from the inputs.
  std::string operand_at(ValueId v, const std::string& index);
  DType buffer_dtype(BufferRef b) const;

  // Emits one device function per tree node and the composed function
  // `name(const Params& p[, float src], int i0, ..., int i<R-1>)`; returns
  // the name to call it by.
  // smem_tiles: output buffers whose stores go to shared-memory tiles instead
  // (TMA-stored): the function then takes `T* tile<k>` for each and the
  // element's offset in them, `int tile_at`, after the coordinates.
  // column_loads: input buffers read along the last coordinate only whose
  // values the caller has staged in shared memory for the tile's columns:
  // the function then takes `const float* cols<k>` for each and the column's
  // index in them, `int tile_col`, last.
  // A tree with several results (EpilogueTree::results) takes `float* out`
  // last and writes them there.
  std::string emit_tree(const EpilogueTree& tree, const std::string& name, const std::string& comment,
                        const std::vector<BufferRef>& smem_tiles = {},
                        const std::vector<BufferRef>& column_loads = {});

  // A tree (loads, constants, computes, stores; sources the same for every
  // lane: a row-finish kernel's finished values; at most one result) at
  // `lanes` consecutive coordinates along the domain's last dim, as
  // `name(const Params& p[, sources as in emit_tree], int i0, ..., int
  // i<R-1>[, float (&out)[lanes]: each lane's result])` taking the first
  // lane's coordinates (i<R-1> a multiple of `lanes`, which divides the last
  // dim). Every store, and every load whose offset steps by one along that
  // dim, is one access of `lanes` elements; a load that does not depend on it
  // is read once; any other (a transposed read) once a lane. The buffers read
  // or written whole lanes at a time go to `lane_buffers`: the caller checks
  // their alignment. Returns "" for a tree it does not take.
  std::string emit_lanes(const EpilogueTree& tree, const std::string& name, const std::string& comment, int lanes,
                         std::vector<BufferRef>& lane_buffers);

  // An anchor's elementwise tree (one source, the accumulator; its stores at
  // the domain's own coordinates, f32 / f16 / bf16) at two adjacent columns:
  // `name(const Params& p, float src_a, float src_b, int i0, .., int i<R-1>
  // [, const float* cols<k>.., int tile_col])`, i<R-1> even; each output one
  // store of both (the caller checks the outputs' alignment). Values that do
  // not depend on the column are computed once. "" for a tree it does not take
  // (an odd last dim, a remapped store). emit_pairs.cpp.
  std::string emit_tree_pair(const EpilogueTree& tree, const std::string& name, const std::string& comment,
                             const std::vector<BufferRef>& column_loads = {});

  // Builds Params, the extern "C" entry point named `kernel_name` (launch
  // bounds `threads`, and `min_blocks` per SM when > 0) whose body is `body`
  // (it sees `p` and the `extra_params`, declared after the buffers), and
  // returns the launch's buffer arguments in parameter order.
  std::vector<BufferRef> finish(const std::string& kernel_name, int threads, const std::vector<std::string>& body,
                                int min_blocks = 0, const std::vector<std::string>& extra_params = {});

 private:
  const PlanContext& ctx_;
  const Plan& plan_;
  int index_;
  KernelSource src_;
  struct Param {
    BufferRef buffer;
    bool write;
    std::string name;
  };
  std::vector<Param> params_;

  std::string node_function(const EpilogueTree& tree, const EpiNode& n);
};

// Statements declaring `const int <prefix>0 .. <prefix><R-1>`: the row-major
// coordinates of linear index `linear` (an expression of type `index_type`)
// in `shape`. Size-1 dims are 0.
std::vector<std::string> decompose_index(const std::string& linear, const Shape& shape, const std::string& prefix,
                                         const std::string& index_type);

// Offset into a contiguous tensor of `shape` at the coordinates named
// <prefix>d of a domain of rank `domain_rank` (the shape aligned right,
// broadcast dims skipped): e.g. "i1 * 16 + i3" or "0". 64-bit when the
// tensor has more than 2^31 - 1 elements.
std::string offset_expr(const Shape& shape, int domain_rank, const std::string& prefix);

// Offset into a contiguous tensor of `shape` whose dim d sits at domain dim
// dims[d]; size-1 dims are skipped.
std::string offset_expr_mapped(const Shape& shape, const std::vector<int>& dims, const std::string& prefix);

// The domain dim of each dim of `shape` under broadcasting (right-aligned).
std::vector<int> broadcast_dims(const Shape& shape, int domain_rank);

// Coordinates a tensor of `shape` depends on (its non-size-1 dims), as domain
// dims under the mapping `dims`.
std::vector<int> used_dims(const Shape& shape, const std::vector<int>& dims);

// "int i0, int i1, ..." and "i0, i1, ..." for a rank.
std::string coord_params(int rank, const std::string& prefix = "i");
std::string coord_args(int rank, const std::string& prefix = "i");

// Lanes a thread takes of `tree` (KernelEmitter::emit_lanes): 16 bytes of
// its widest stored or loaded element type, halved until they divide the
// last dim; 1 where fewer than 2 would.
int tree_lanes(const KernelEmitter& em, const EpilogueTree& tree);
// `fj::aligned_to<..>(..) && ..`: whether each of `buffers` (emit_lanes'
// lane_buffers) is aligned to `lanes` of its elements, checked at run time.
std::string lanes_aligned(KernelEmitter& em, int lanes, const std::vector<BufferRef>& buffers);

// A 1-D pool's window shape as pool.cuh reads it (kW, kKW, kSW, kPW, kDW = 1), named `name`.
CudaStruct pool1d_shape_struct(const Graph& g, ValueId pool, const std::string& name);

// Short op-name list for kernel names: "relu_add".
std::string op_list(const Graph& g, const std::vector<ValueId>& nodes);

}  // namespace fusejit::cg
