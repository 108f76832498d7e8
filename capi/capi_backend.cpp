// capi/capi_backend.cpp — the backend choice of the C API: CUDA, the LLVM CPU
// backend (docs/cpu.md) or AUTO.
#include "capi/capi_internal.h"
#include "compiler/cpu_program.h"
#include "runtime/cuda_driver.h"

namespace fusejit::capi {

static bool cuda_device_present() {
  auto n = fusejit::device_count();
  return n && *n > 0;
}

Backend resolve_backend(Backend b) {
  if (b != Backend::Auto) return b;
  // As Engine::compile: without LLVM, Cuda (whose error says what is missing).
  return fusejit::cpu_backend_available() && !cuda_device_present() ? Backend::Cpu : Backend::Cuda;
}

fj_status cpu_backend_missing() {
  return fail(FJ_ERR_NO_DEVICE,
              "the CPU backend is not in this build (configure with LLVM 14: apt-get install "
              "llvm-14-dev, -DFUSEJIT_ENABLE_LLVM=ON)");
}

}  // namespace fusejit::capi

using namespace fusejit::capi;
using fusejit::Backend;

static fj_backend to_c(Backend b) {
  return b == Backend::Cpu ? FJ_BACKEND_CPU : b == Backend::Auto ? FJ_BACKEND_AUTO : FJ_BACKEND_CUDA;
}

extern "C" {

const char* fj_backend_name(fj_backend backend) {
  switch (enum_bits(backend)) {
    case FJ_BACKEND_CUDA:
      return "cuda";
    case FJ_BACKEND_CPU:
      return "cpu";
    case FJ_BACKEND_AUTO:
      return "auto";
  }
  return nullptr;
}

int fj_backend_available(fj_backend backend) {
  try {
    switch (enum_bits(backend)) {
      case FJ_BACKEND_CUDA:
        return cuda_device_present() ? 1 : 0;
      case FJ_BACKEND_CPU:
        return fusejit::cpu_backend_available() ? 1 : 0;
      case FJ_BACKEND_AUTO:
        return cuda_device_present() || fusejit::cpu_backend_available() ? 1 : 0;
    }
  } catch (...) {
  }
  return 0;
}

fj_status fj_options_set_backend(fj_options* options, fj_backend backend) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    int raw = enum_bits(backend);
    if (raw != FJ_BACKEND_CUDA && raw != FJ_BACKEND_CPU && raw != FJ_BACKEND_AUTO)
      return fail(FJ_ERR_INVALID_ARGUMENT, "unknown backend " + std::to_string(raw) +
                                               " (FJ_BACKEND_CUDA, FJ_BACKEND_CPU or FJ_BACKEND_AUTO)");
    options->compile.backend = raw == FJ_BACKEND_CPU    ? Backend::Cpu
                               : raw == FJ_BACKEND_AUTO ? Backend::Auto
                                                        : Backend::Cuda;
    return FJ_OK;
  });
}

fj_status fj_options_get_backend(const fj_options* options, fj_backend* backend) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    if (!backend) return null_argument("backend");
    *backend = to_c(options->compile.backend);
    return FJ_OK;
  });
}

fj_status fj_kernel_backend(const fj_kernel* kernel, fj_backend* backend) {
  return guarded([&]() -> fj_status {
    if (!kernel) return null_argument("kernel");
    if (!backend) return null_argument("backend");
    *backend = to_c(kernel->options.compile.backend);  // resolved by fj_engine_compile
    return FJ_OK;
  });
}

}  // extern "C"
