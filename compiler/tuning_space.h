// compiler/tuning_space.h — the autotuner's candidates for one graph: the
// tunable parameters of the SIMT mainloop (tile BMxBN and the per-thread
// TMxTN block), each a CodegenOptions::config string. Only tiles the mainloop
// accepts (validate_tile) and that fit the shape are listed; codegen itself is
// the final legality check (a candidate it rejects is reported, not run).
#pragma once

#include <string>
#include <vector>

#include "fusejit/ir.h"

namespace fusejit {

// "" (the heuristic default) first, then "tile=BMxBNxTMxTN" configs.
std::vector<std::string> tuning_candidates(const Graph& prepared);

}  // namespace fusejit
