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
#include <string>
#include <vector>

#include "fusejit/error.h"
#include "fusejit/ir.h"

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

struct BackwardOptions {
  std::vector<std::string> no_grad;  // forward inputs whose gradient is not wanted
};

// The gradient program of a prepared forward graph. Errors name the op that
// has no derivative yet (e.g. conv2d, max_pool2d) or a dtype the anchor's
// GEMMs cannot take.
Expected<BackwardProgram> build_backward(const Graph& forward, const BackwardOptions& options = {});

// Text for people: the buffers, each stage's IR, the notes.
std::string print_backward(const BackwardProgram& program);

}  // namespace fusejit
