// runtime/nvrtc_options.h — the pieces of nvrtc_compiler.cpp that other runtime
// code needs without compiling: arch validation and the exact option list
// (part of the kernel cache key).
#pragma once

#include <string>
#include <vector>

#include "fusejit/error.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {

// The real GPU architectures this NVRTC can emit CUBIN for, e.g. {75, 80, 90}.
const std::vector<int>& nvrtc_supported_archs();

// Accepts "sm_<N>" with N supported by this NVRTC, "sm_<N>a" for N >= 90 and
// "sm_<N>f" for N >= 100. Otherwise: "unsupported arch 'sm_1' (...)".
Status check_arch(const std::string& arch);

// The CUDA toolkit include directory (for <cuda_fp16.h>, <cuda_bf16.h>, which
// NVRTC does not provide built in), found next to the loaded libnvrtc, or via
// $CUDA_HOME / $CUDA_PATH / /usr/local/cuda. Empty when none has cuda_fp16.h.
const std::string& cuda_include_dir();

// The exact NVRTC option list compile_to_cubin uses for `opts`.
std::vector<std::string> nvrtc_option_list(const NvrtcOptions& opts);

}  // namespace fusejit
