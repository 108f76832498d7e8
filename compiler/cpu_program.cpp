// The CPU backend's entry points when the build has no LLVM (FUSEJIT_ENABLE_LLVM
// off); compiler/llvm/cpu_codegen.cpp defines them otherwise.
#include "compiler/cpu_program.h"

#ifndef FUSEJIT_HAVE_LLVM
namespace fusejit {

bool cpu_backend_available() { return false; }

Expected<CpuProgram> generate_cpu_program(const Graph&, const CpuCodegenOptions&) {
  return Error("the CPU backend is not in this build (configure with LLVM 14: apt-get install llvm-14-dev, "
               "-DFUSEJIT_ENABLE_LLVM=ON)");
}

}  // namespace fusejit
#endif
