// compiler/tuning_space.h — the autotuner's candidates for one graph: where
// the anchor runs on wgmma (sm_90a), its tiles (BMxBN, stages, raster group),
// where it runs on mma.sync (conv2d), its tiles (BMxBN, stages), and the SIMT
// mainloop as an alternative; the SIMT mainloop's tiles (BMxBN
// and the per-thread TMxTN block). Each a CodegenOptions::config string. Only tiles the mainloop
// accepts (validate_tile) and that fit the shape are listed; codegen itself is
// the final legality check (a candidate it rejects is reported, not run).
#pragma once

#include <string>
#include <vector>

#include "fusejit/ir.h"

namespace fusejit {

// "" (the heuristic default) first, then "wgmma_tile=BMxBNxSxG" (or
// "mma_tile=BMxBNxS") configs and "mainloop=ffma" where the anchor is on
// wgmma (mma.sync) for `arch`, then
// "tile=BMxBNxTMxTN" (SIMT) configs.
std::vector<std::string> tuning_candidates(const Graph& prepared, const std::string& arch = "sm_90a");

}  // namespace fusejit
