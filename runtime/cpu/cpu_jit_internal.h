// runtime/cpu/cpu_jit_internal.h — shared between the files of runtime/cpu/.
#pragma once

namespace fusejit::cpu {

// LLVM's native target, asm printer and parser, registered once per process.
void init_llvm_native();

}  // namespace fusejit::cpu
