// tests/program_util.h — a program's chain as the planner tests count it:
// without the operand staging that prepares the anchor's inputs on wgmma
// (3xTF32's residuals, an fp32 matmul's B transposed, a conv's x in NHWC and
// w as [Cout][KH][KW][Cin]) and the scratch that staging writes.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/program.h"

namespace fusejit::testing {

inline size_t chain_launches(const Program& p) {
  return static_cast<size_t>(std::count_if(p.launches.begin(), p.launches.end(),
                                           [](const LaunchSpec& l) { return !l.operand_staging; }));
}

// Scratch written by the operand staging kernel (compiler/pass_buffers.cpp).
inline bool is_operand_residual(const ScratchSpec& s) {
  for (const char* staged : {"3xTF32 residual of", "B transposed for wgmma", "x in NHWC for wgmma",
                             "w as [Cout][KH][KW][Cin] for wgmma"})
    if (s.what.rfind(staged, 0) == 0) return true;
  return false;
}

inline std::vector<ScratchSpec> chain_scratch(const Program& p) {
  std::vector<ScratchSpec> out;
  for (const ScratchSpec& s : p.scratch)
    if (!is_operand_residual(s)) out.push_back(s);
  return out;
}

}  // namespace fusejit::testing
