// runtime/nvrtc_compiler.h — CUDA C++ -> CUBIN through NVRTC. The only file
// that talks to NVRTC is nvrtc_compiler.cpp. Works without a GPU.
#pragma once

#include <string>
#include <vector>

#include "fusejit/cubin.h"  // CubinResult, KernelResources
#include "fusejit/error.h"

namespace fusejit {

struct NvrtcOptions {
  std::string arch = "sm_90a";        // sm_80, sm_89, sm_90, sm_90a, ...
  bool line_info = true;              // -lineinfo, for profilers
  std::vector<std::string> extra;     // appended after the fixed options
};


// Compiles `source` (which may #include "fusejit/<name>.cuh": the embedded
// templates are always provided as headers). On failure the Error holds the
// compile log and the path where the generated source was saved.
Expected<CubinResult> compile_to_cubin(const std::string& source, const std::string& program_name,
                                       const NvrtcOptions& opts);

std::string nvrtc_version();  // e.g. "13.0"

}  // namespace fusejit
