// capi/capi_internal.h — the objects behind the C API's opaque handles, and
// the error plumbing every entry point goes through.
#pragma once

#include <cstring>
#include <memory>
#include <type_traits>
#include <mutex>
#include <string>
#include <vector>

#include "fusejit/engine.h"
#include "fusejit/fusejit.h"
#include "fusejit/ir.h"

struct fj_spec {
  fusejit::Graph graph;                  // prepared
  std::vector<fusejit::KernelArg> args;  // inputs, then outputs
};

struct fj_options {
  fusejit::CompileOptions compile;
  fj_autotune autotune = FJ_AUTOTUNE_OFF;
  bool lazy = false;
};

struct fj_engine {
  std::shared_ptr<fusejit::Engine> engine;
};

struct fj_kernel {
  std::shared_ptr<fusejit::Engine> engine;  // keeps the engine alive for lazy loads
  fusejit::Graph graph;                     // prepared; what a (lazy) load compiles
  fj_options options;
  std::vector<fusejit::KernelArg> args;

  mutable std::mutex mutex;  // guards the fields below
  std::shared_ptr<fusejit::CompiledKernel> compiled;
  fj_status failure = FJ_OK;  // a failed load, kept
  std::string failure_message;
};

namespace fusejit::capi {

// Records `message` as this thread's last error and returns `status`.
fj_status fail(fj_status status, const std::string& message);
void clear_error();

// A C caller may pass any int as an enum, but in C++ reading an enum object
// outside its enumerators' range is undefined (UBSan: "not a valid value"):
// entry points read the raw bits and check them before use.
template <class E>
int enum_bits(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int>(v);
}

// Runs an entry point's body: clears the last error on success and turns any
// C++ exception into FJ_ERR_INTERNAL. Never throws.
template <class Body>
fj_status guarded(Body&& body) noexcept {
  try {
    fj_status s = body();
    if (s == FJ_OK) clear_error();
    return s;
  } catch (const std::bad_alloc&) {
    return fail(FJ_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(FJ_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(FJ_ERR_INTERNAL, "internal error: unknown exception");
  }
}

// The error's text: "file:line:col: error: message" when it has a place,
// else just the message.
std::string message_of(const Error& e);

// Auto -> Cuda when a CUDA device is present, else Cpu (capi_backend.cpp).
Backend resolve_backend(Backend b);
// FJ_ERR_NO_DEVICE: "the CPU backend is not in this build ...".
fj_status cpu_backend_missing();

// "what: must not be NULL" as FJ_ERR_INVALID_ARGUMENT.
fj_status null_argument(const char* what);

// A malloc'ed copy for the caller (released with fj_free); nullptr on failure.
char* dup_string(const std::string& s);

// Inputs in declaration order, then outputs (the engine's argument order).
std::vector<KernelArg> kernel_args(const Graph& g);
void fill_arg_info(const KernelArg& arg, fj_arg_info* info);
fj_status arg_at(const std::vector<KernelArg>& args, size_t index, fj_arg_info* info);
void count_args(const std::vector<KernelArg>& args, size_t* num_inputs, size_t* num_outputs);

}  // namespace fusejit::capi
