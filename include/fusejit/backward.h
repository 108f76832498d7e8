// fusejit/backward.h — the gradient program of a graph, built from the same IR.
//
//   auto bw = fusejit::build_backward(graph);        // graph: a prepared forward Graph
//   bw->forward      the forward graph, with the values the backward needs saved as extra outputs
//   bw->stages       fusejit graphs run in order (one anchor each, or none: a pointwise program)
//   bw->buffers      every buffer a stage reads or writes, by name
//
// A stage's inputs and outputs are named after buffers: run a stage by passing,
// for each of its graph inputs, the buffer of that name, and writing its
// outputs to the buffers named by Graph::outputs. A stage may view a buffer
// with another shape of the same element count (contiguous: a free reshape),
// e.g. an [B, S, N] gradient read as [B*S, N] by a GEMM.
//
// Buffers: the forward's inputs (their own names), the saved values
// (`saved_...`, outputs of `forward`), the gradients of the forward's outputs
// (`grad_<output>`, given by the caller), temporaries (`tmp_...`) and the
// gradients of the forward's inputs (`grad_<input>`, see input_grads).
//
// Default plan: the anchor's output is saved (unless it is already an
// output) and the epilogue is recomputed from it in the first stage, which
// computes the anchor's output gradient dZ and the gradients of the epilogue's
// parameters; then dX and dW of the anchor run as GEMMs on the same
// mainloops, in the forward's precision (docs/backward.md).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusejit/error.h"
#include "fusejit/ir.h"

struct CUstream_st;

namespace fusejit {

enum class BufferRole { ForwardInput, Saved, OutputGrad, Temporary, InputGrad };
std::string_view buffer_role_name(BufferRole);  // "input", "saved", "output grad", "temporary", "input grad"

struct BackwardBuffer {
  std::string name;
  TensorType type;
  BufferRole role;
  std::string what;  // e.g. "dZ, the gradient of linear 'gemm' (transposed)"
};

struct BackwardStage {
  std::string what;  // "epilogue backward", "dX of linear 'gemm'", ...
  Graph graph;       // prepared
};

struct BackwardProgram {
  Graph forward;                              // prepared; outputs: the forward's, then saved values
  std::vector<BackwardStage> stages;          // in run order
  std::vector<BackwardBuffer> buffers;        // every buffer of the program
  std::map<std::string, std::string> input_grads;  // forward input -> its gradient's buffer
  std::vector<std::string> notes;             // plan decisions, for `fusejit emit --backward`

  const BackwardBuffer* buffer(const std::string& name) const;
};

// conv2d's dW: one conv2d_weight_grad kernel reading x and dZ where they are
// (Implicit, the CUDA form), or dZ transposed and im2col(x) written out by the
// epilogue stage and a GEMM over them (Im2col: more memory; faster on the
// CPU backend only for strided convs, whose x the CPU kernel gathers).
enum class ConvWgrad { Implicit, Im2col };

struct BackwardOptions {
  std::vector<std::string> no_grad;  // forward inputs whose gradient is not wanted
  ConvWgrad conv_wgrad = ConvWgrad::Implicit;
};

// The gradient program of a prepared forward graph. Errors name the op that
// has no derivative yet (e.g. conv2d, max_pool2d) or a dtype the anchor's
// GEMMs cannot take.
Expected<BackwardProgram> build_backward(const Graph& forward, const BackwardOptions& options = {});

// Text for people: the buffers, each stage's IR, the notes.
std::string print_backward(const BackwardProgram& program);

// ---- compiled (Engine::compile_backward, fusejit/engine.h) ----------------------

class CompiledKernel;
using DevicePtr = unsigned long long;  // as in engine.h

// The forward (with its saved outputs) and every stage, compiled and loaded
// for one device (or the CPU). The caller owns all memory: it allocates each
// buffer of program().buffers (contiguous, of the buffer's type; a stage's
// view of it has the same element count) and passes the addresses by name.
class BackwardKernel {
 public:
  BackwardKernel(BackwardProgram program, std::shared_ptr<CompiledKernel> forward,
                 std::vector<std::shared_ptr<CompiledKernel>> stages);
  const BackwardProgram& program() const { return program_; }
  const CompiledKernel& forward() const { return *forward_; }
  const std::vector<std::shared_ptr<CompiledKernel>>& stages() const { return stages_; }

  // Runs the forward: its inputs and outputs (the saved values included) by name.
  Status run_forward(const std::map<std::string, DevicePtr>& buffers, CUstream_st* stream = nullptr) const;
  // Runs the stages in order on `stream` (no synchronization): every buffer a
  // stage reads or writes must be named in `buffers`; Errors name a missing one.
  Status run_backward(const std::map<std::string, DevicePtr>& buffers, CUstream_st* stream = nullptr) const;

 private:
  BackwardProgram program_;
  std::shared_ptr<CompiledKernel> forward_;
  std::vector<std::shared_ptr<CompiledKernel>> stages_;
};

}  // namespace fusejit
