// capi/capi_core.cpp — status codes, the thread-local last error, version,
// memory, devices and dtypes of the C API.
#include <cstdlib>
#include <cstring>
#include <string>

#include "capi/capi_internal.h"
#include "runtime/cuda_driver.h"

static_assert(FJ_VERSION_MAJOR == FUSEJIT_VERSION_MAJOR &&
                  FJ_VERSION_MINOR == FUSEJIT_VERSION_MINOR &&
                  FJ_VERSION_PATCH == FUSEJIT_VERSION_PATCH,
              "include/fusejit/fusejit.h's FJ_VERSION_* disagree with the project version");

namespace fusejit::capi {
namespace {

thread_local std::string t_last_error;
thread_local const char* t_static_error = nullptr;  // when the message could not be stored

}  // namespace

fj_status fail(fj_status status, const std::string& message) {
  try {
    t_last_error = message;
    t_static_error = nullptr;
  } catch (...) {
    t_static_error = "out of memory while recording an error";
  }
  return status;
}

void clear_error() {
  t_last_error.clear();
  t_static_error = nullptr;
}

std::string message_of(const Error& e) { return e.loc.str().empty() ? e.message : e.str(); }

fj_status null_argument(const char* what) {
  return fail(FJ_ERR_INVALID_ARGUMENT, std::string(what) + " must not be NULL");
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

std::vector<KernelArg> kernel_args(const Graph& g) {
  std::vector<KernelArg> args;
  for (ValueId id : g.inputs()) args.push_back({g.node(id).name, g.node(id).type, false});
  for (const Output& out : g.outputs) args.push_back({out.name, g.node(out.value).type, true});
  return args;
}

static fj_dtype to_c_dtype(DType d) {
  switch (d) {
    case DType::F32:
      return FJ_F32;
    case DType::F16:
      return FJ_F16;
    case DType::BF16:
      return FJ_BF16;
  }
  return FJ_F32;
}

void fill_arg_info(const KernelArg& arg, fj_arg_info* info) {
  info->name = arg.name.c_str();
  info->dtype = to_c_dtype(arg.type.dtype);
  info->is_output = arg.is_output ? 1 : 0;
  info->rank = arg.type.rank();
  info->shape = arg.type.shape.empty() ? nullptr : arg.type.shape.data();
  info->numel = arg.type.numel();
}

fj_status arg_at(const std::vector<KernelArg>& args, size_t index, fj_arg_info* info) {
  if (!info) return null_argument("info");
  if (index >= args.size())
    return fail(FJ_ERR_INVALID_ARGUMENT, "argument index " + std::to_string(index) +
                                             " out of range (" + std::to_string(args.size()) +
                                             " arguments)");
  fill_arg_info(args[index], info);
  return FJ_OK;
}

void count_args(const std::vector<KernelArg>& args, size_t* num_inputs, size_t* num_outputs) {
  size_t outputs = 0;
  for (const KernelArg& a : args) outputs += a.is_output ? 1 : 0;
  if (num_inputs) *num_inputs = args.size() - outputs;
  if (num_outputs) *num_outputs = outputs;
}

}  // namespace fusejit::capi

using namespace fusejit::capi;

extern "C" {

const char* fj_status_name(fj_status status) {
  switch (enum_bits(status)) {
    case FJ_OK:
      return "FJ_OK";
    case FJ_ERR_INVALID_ARGUMENT:
      return "FJ_ERR_INVALID_ARGUMENT";
    case FJ_ERR_SPEC:
      return "FJ_ERR_SPEC";
    case FJ_ERR_IO:
      return "FJ_ERR_IO";
    case FJ_ERR_COMPILE:
      return "FJ_ERR_COMPILE";
    case FJ_ERR_NO_DEVICE:
      return "FJ_ERR_NO_DEVICE";
    case FJ_ERR_CUDA:
      return "FJ_ERR_CUDA";
    case FJ_ERR_INTERNAL:
      return "FJ_ERR_INTERNAL";
  }
  return "FJ_ERR_UNKNOWN";
}

const char* fj_last_error(void) { return t_static_error ? t_static_error : t_last_error.c_str(); }

const char* fj_version(void) { return FUSEJIT_VERSION; }

int fj_version_number(void) {
  return FUSEJIT_VERSION_MAJOR * 10000 + FUSEJIT_VERSION_MINOR * 100 + FUSEJIT_VERSION_PATCH;
}

void fj_free(void* p) { std::free(p); }

fj_status fj_device_count(int* count) {
  return guarded([&]() -> fj_status {
    if (!count) return null_argument("count");
    auto n = fusejit::device_count();
    if (!n) return fail(FJ_ERR_NO_DEVICE, message_of(n.error()));
    *count = *n;
    return FJ_OK;
  });
}

fj_status fj_device_arch(int device, char** arch) {
  return guarded([&]() -> fj_status {
    if (!arch) return null_argument("arch");
    auto n = fusejit::device_count();
    if (!n) return fail(FJ_ERR_NO_DEVICE, message_of(n.error()));
    if (device < 0 || device >= *n)
      return fail(FJ_ERR_NO_DEVICE, "no CUDA device " + std::to_string(device) + " (" +
                                        std::to_string(*n) + " present)");
    auto a = fusejit::Engine::device_arch(device);
    if (!a) return fail(FJ_ERR_CUDA, message_of(a.error()));
    char* out = dup_string(*a);
    if (!out) return fail(FJ_ERR_INTERNAL, "out of memory");
    *arch = out;
    return FJ_OK;
  });
}

const char* fj_dtype_name(fj_dtype dtype) {
  switch (enum_bits(dtype)) {
    case FJ_F32:
      return "f32";
    case FJ_F16:
      return "f16";
    case FJ_BF16:
      return "bf16";
  }
  return nullptr;
}

int fj_dtype_size(fj_dtype dtype) {
  switch (enum_bits(dtype)) {
    case FJ_F32:
      return 4;
    case FJ_F16:
      return 2;
    case FJ_BF16:
      return 2;
  }
  return 0;
}

}  // extern "C"
