// fusejit/cubin.h — what Engine::compile_cubin returns: the CUBIN, NVRTC's
// log and options, and (when asked for with CompileOptions::resource_usage)
// each kernel's registers, spills and shared memory as ptxas reported them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fusejit {

// One __global__ function's resources, from ptxas's -v info.
struct KernelResources {
  std::string function;       // mangled name, as ptxas prints it
  int registers = 0;          // per thread
  int64_t shared_bytes = 0;   // static shared memory (dynamic smem is chosen at launch)
  int64_t stack_bytes = 0;    // stack frame per thread
  int64_t spill_stores = 0;   // bytes of spill stores
  int64_t spill_loads = 0;    // bytes of spill loads
  int64_t constant_bytes = 0; // cmem[0] (kernel parameters and constants)
};

struct CubinResult {
  std::vector<char> cubin;
  std::string log;                      // NVRTC's log (warnings, ptxas info), may be empty
  std::vector<std::string> options;     // the exact option list used (recorded)
  std::vector<KernelResources> resources;  // filled when resource usage was asked for
};

// Parses ptxas's verbose info ("ptxas info : Function properties for f",
// "Used 32 registers, 1024 bytes smem, ...") out of an NVRTC log. Lines it
// does not know are ignored; an empty list when there are none.
std::vector<KernelResources> parse_ptxas_info(const std::string& log);

}  // namespace fusejit
