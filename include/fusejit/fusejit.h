/* fusejit/fusejit.h — the C API of fusejit (libfusejit_c.so).
 *
 * Plain C11; every function is safe to call from C, from ctypes and from C++.
 *
 *   fj_engine* engine;  fj_spec* spec;  fj_kernel* kernel;
 *   fj_engine_create(&engine);
 *   if (fj_spec_load("model.yaml", &spec) != FJ_OK) puts(fj_last_error());
 *   fj_engine_compile(engine, spec, NULL, &kernel);           (needs a GPU)
 *   uint64_t ptrs[] = {x, w, b, y};                           (inputs, then outputs)
 *   fj_kernel_launch(kernel, ptrs, 4, stream);
 *   (fj_options_set_backend(options, FJ_BACKEND_CPU): runs on the host instead,
 *    with host pointers; docs/cpu.md)
 *   fj_kernel_destroy(kernel); fj_spec_destroy(spec); fj_engine_destroy(engine);
 *
 * Conventions
 *  - Every fallible call returns an fj_status; FJ_OK (0) is success. Results
 *    go through out-parameters, which are left untouched on failure.
 *  - fj_last_error() is the message of the last fj_ call made on the calling
 *    thread ("" after a success). Spec errors read "file:line:col: error: ...".
 *  - A null pointer where an object or out-parameter is required gives
 *    FJ_ERR_INVALID_ARGUMENT. fj_*_destroy(NULL) does nothing.
 *  - No call aborts the process or lets a C++ exception escape.
 *  - Objects are thread-safe (engines, specs, options once configured,
 *    kernels); destroy one only when no other thread uses it. A kernel keeps
 *    what it needs from its engine alive, so the engine may be destroyed first.
 *  - Buffers and strings that the caller owns are released with fj_free().
 *  - Which calls need a GPU: fj_engine_compile (unless the lazy option is
 *    set), fj_kernel_load, fj_kernel_launch, and "auto" arch resolution; on
 *    the CPU backend (fj_options_set_backend) none does.
 *    Spec parsing, argument listing, fj_engine_emit and
 *    fj_engine_compile_cubin with an explicit arch work without one.
 */
#ifndef FUSEJIT_FUSEJIT_H
#define FUSEJIT_FUSEJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FJ_API __attribute__((visibility("default")))
#else
#define FJ_API
#endif

/* The version of this header; fj_version() gives the library's. */
#define FJ_VERSION_MAJOR 0
#define FJ_VERSION_MINOR 1
#define FJ_VERSION_PATCH 0

/* ---- status codes ---------------------------------------------------------- */

typedef enum fj_status {
  FJ_OK = 0,
  FJ_ERR_INVALID_ARGUMENT = 1, /* null pointer, bad option value, wrong count, index out of range */
  FJ_ERR_SPEC = 2,             /* the spec is invalid (message has file:line:col when known) */
  FJ_ERR_IO = 3,               /* a file cannot be read or written */
  FJ_ERR_COMPILE = 4,          /* code generation or NVRTC failed, or the chain is unsupported */
  FJ_ERR_NO_DEVICE = 5,        /* no CUDA driver, no such device, or a build without the CPU backend */
  FJ_ERR_CUDA = 6,             /* a CUDA driver call failed (module load, launch) */
  FJ_ERR_INTERNAL = 7          /* a bug in fusejit (an unexpected C++ exception) */
} fj_status;

/* "FJ_OK", "FJ_ERR_SPEC", ...; "FJ_ERR_UNKNOWN" for other values. Static storage. */
FJ_API const char* fj_status_name(fj_status status);

/* The message of the last fj_ call on this thread; "" if it succeeded. Valid
 * until the next fj_ call on this thread (copy it to keep it). Never NULL. */
FJ_API const char* fj_last_error(void);

/* The library version, e.g. "0.1.0" (static storage), and as a number
 * major * 10000 + minor * 100 + patch. */
FJ_API const char* fj_version(void);
FJ_API int fj_version_number(void);

/* Releases a buffer or string that an fj_ call handed to the caller. NULL is fine. */
FJ_API void fj_free(void* p);

/* ---- devices ------------------------------------------------------------------ */

/* Number of CUDA devices. FJ_ERR_NO_DEVICE (with the reason in
 * fj_last_error()) when the driver cannot be loaded or there is no device. */
FJ_API fj_status fj_device_count(int* count);

/* The arch "auto" stands for on `device`, e.g. "sm_90a" for compute
 * capability 9.0. *arch is released with fj_free(). */
FJ_API fj_status fj_device_arch(int device, char** arch);

/* ---- backends ------------------------------------------------------------------ */

/* Where a kernel runs. CUDA: NVRTC -> CUBIN -> a CUDA device (the default).
 * CPU: LLVM -> host code (docs/cpu.md); launches take host pointers and run
 * synchronously. AUTO: CPU when this build has it and no CUDA device is
 * present, else CUDA (resolved by fj_engine_compile). */
typedef enum fj_backend { FJ_BACKEND_CUDA = 0, FJ_BACKEND_CPU = 1, FJ_BACKEND_AUTO = 2 } fj_backend;

/* "cuda", "cpu", "auto"; NULL for other values. Static storage. */
FJ_API const char* fj_backend_name(fj_backend backend);
/* 1 when the backend can run kernels here (CUDA: a device is present; CPU:
 * this build has LLVM; AUTO: either), else 0 (also for unknown values). */
FJ_API int fj_backend_available(fj_backend backend);

/* ---- element types and argument descriptions ------------------------------------ */

typedef enum fj_dtype { FJ_F32 = 0, FJ_F16 = 1, FJ_BF16 = 2 } fj_dtype;

/* "f32", "f16", "bf16"; NULL for other values. Static storage. */
FJ_API const char* fj_dtype_name(fj_dtype dtype);
/* Bytes per element (4, 2, 2); 0 for other values. */
FJ_API int fj_dtype_size(fj_dtype dtype);

/* One kernel argument: a contiguous row-major tensor. The pointers stay valid
 * as long as the spec or kernel they came from. */
typedef struct fj_arg_info {
  const char* name;      /* the input's name, or the output's value name */
  fj_dtype dtype;
  int is_output;         /* 0: input, 1: output */
  int rank;              /* 0 for a scalar */
  const int64_t* shape;  /* `rank` sizes; NULL when rank is 0 */
  int64_t numel;         /* product of the sizes (1 for a scalar) */
} fj_arg_info;

/* ---- specs (no GPU needed) --------------------------------------------------------- */

/* A parsed, validated YAML fusion spec (docs/spec.md). Immutable. */
typedef struct fj_spec fj_spec;

/* Parses spec text. `filename` (may be NULL: "<spec>") only names the text in
 * error messages. FJ_ERR_SPEC on an invalid spec. */
FJ_API fj_status fj_spec_parse(const char* yaml_text, const char* filename, fj_spec** spec);
/* Reads and parses a spec file. FJ_ERR_IO when it cannot be read. */
FJ_API fj_status fj_spec_load(const char* path, fj_spec** spec);
FJ_API void fj_spec_destroy(fj_spec* spec);

/* The spec's `name` ("" when it has none); valid while the spec lives. */
FJ_API fj_status fj_spec_name(const fj_spec* spec, const char** name);
/* Kernel arguments: inputs in declaration order, then outputs in `outputs` order. */
FJ_API fj_status fj_spec_num_args(const fj_spec* spec, size_t* num_inputs, size_t* num_outputs);
FJ_API fj_status fj_spec_arg(const fj_spec* spec, size_t index, fj_arg_info* info);
/* The canonical IR text (docs/ir.md); *text is released with fj_free(). */
FJ_API fj_status fj_spec_print_ir(const fj_spec* spec, char** text);

/* ---- compile options ------------------------------------------------------------------ */

typedef enum fj_autotune {
  FJ_AUTOTUNE_OFF = 0,    /* use the heuristics (or the explicit config) */
  FJ_AUTOTUNE_USE_DB = 1, /* use tuned configs from the database when present */
  FJ_AUTOTUNE_FORCE = 2   /* tune now and record the result */
} fj_autotune;

/* Options for compiling. Passing NULL where options are taken means the
 * defaults: backend CUDA, arch "auto", no config, autotune off, device 0,
 * line info on, eager compile. Configure an options object before sharing it between threads. */
typedef struct fj_options fj_options;

FJ_API fj_status fj_options_create(fj_options** options);
FJ_API void fj_options_destroy(fj_options* options);
/* "auto" (the device's arch; the default) or an arch this NVRTC supports:
 * "sm_80", "sm_89", "sm_90a", ... Checked here: FJ_ERR_INVALID_ARGUMENT. */
FJ_API fj_status fj_options_set_arch(fj_options* options, const char* arch);
/* A scheduler config string for codegen; NULL or "" means heuristics. */
FJ_API fj_status fj_options_set_config(fj_options* options, const char* config);
/* Autotune mode (docs/autotune.md): USE_DB compiles with the tuning database's
 * winner for this graph and device when there is one; FORCE tunes at compile
 * time (seconds to minutes) and stores the winner. An explicit config wins. */
FJ_API fj_status fj_options_set_autotune(fj_options* options, fj_autotune mode);
FJ_API fj_status fj_options_get_autotune(const fj_options* options, fj_autotune* mode);
/* CUDA device ordinal (>= 0) for fj_engine_compile and "auto" arch. */
FJ_API fj_status fj_options_set_device(fj_options* options, int device);
/* Nonzero: pass -lineinfo to NVRTC (the default), for profilers. */
FJ_API fj_status fj_options_set_line_info(fj_options* options, int enabled);
/* Nonzero: fj_engine_compile only checks the options and returns an unloaded
 * kernel (no GPU needed); codegen, NVRTC and loading happen in fj_kernel_load
 * or the first fj_kernel_launch. Default 0 (compile and load at once). */
FJ_API fj_status fj_options_set_lazy(fj_options* options, int lazy);
/* The backend fj_engine_compile and fj_engine_emit use (default
 * FJ_BACKEND_CUDA). Arch, device and line info apply to CUDA only; CUBINs
 * are CUDA only (fj_engine_compile_cubin with CPU: FJ_ERR_INVALID_ARGUMENT). */
FJ_API fj_status fj_options_set_backend(fj_options* options, fj_backend backend);
FJ_API fj_status fj_options_get_backend(const fj_options* options, fj_backend* backend);

/* ---- engines and kernels ----------------------------------------------------------------- */

/* An engine caches compiled kernels in memory (per structural hash of the
 * spec, options, arch and device), so compiling an equal spec again is cheap. */
typedef struct fj_engine fj_engine;
/* A compiled kernel for one spec, one arch and one device. */
typedef struct fj_kernel fj_kernel;

FJ_API fj_status fj_engine_create(fj_engine** engine);
FJ_API void fj_engine_destroy(fj_engine* engine);

/* Generates, compiles (NVRTC) and loads the spec's kernel on the options'
 * device. Needs a GPU (FJ_ERR_NO_DEVICE otherwise) unless the options are
 * lazy. On the CPU backend: generates LLVM IR and compiles it for the host
 * (FJ_ERR_NO_DEVICE in a build without LLVM). The kernel does not refer to
 * the spec afterwards. */
FJ_API fj_status fj_engine_compile(fj_engine* engine, const fj_spec* spec,
                                   const fj_options* options, fj_kernel** kernel);

/* Compiles the spec to a CUBIN for the options' arch; no GPU needed unless the
 * arch is "auto". *data (released with fj_free()) holds *size bytes. */
FJ_API fj_status fj_engine_compile_cubin(fj_engine* engine, const fj_spec* spec,
                                         const fj_options* options, void** data, size_t* size);
/* The same, written to the file `path` (FJ_ERR_IO when it cannot be written). */
FJ_API fj_status fj_engine_compile_cubin_file(fj_engine* engine, const fj_spec* spec,
                                              const fj_options* options, const char* path);

typedef enum fj_emit_kind {
  FJ_EMIT_SOURCE = 0, /* the generated CUDA C++ (CPU backend: the LLVM IR module) */
  FJ_EMIT_PLAN = 1    /* the fusion plan: what fused, what did not, and why */
} fj_emit_kind;

/* Code generation only, no NVRTC and no GPU ("auto" arch means the device's
 * arch, or sm_90a without one). The options' backend picks CUDA C++ or LLVM
 * IR (AUTO: as fj_engine_compile would). *text is released with fj_free(). */
FJ_API fj_status fj_engine_emit(fj_engine* engine, const fj_spec* spec, const fj_options* options,
                                fj_emit_kind what, char** text);

FJ_API void fj_kernel_destroy(fj_kernel* kernel);

/* Compiles and loads a lazy kernel now (a no-op when loaded). A failure is
 * kept: later loads and launches return the same status and message. */
FJ_API fj_status fj_kernel_load(fj_kernel* kernel);
/* Nonzero when the kernel is loaded; 0 otherwise or for NULL. */
FJ_API int fj_kernel_is_loaded(const fj_kernel* kernel);

/* Arguments, as fj_spec_num_args / fj_spec_arg (no GPU needed). */
FJ_API fj_status fj_kernel_num_args(const fj_kernel* kernel, size_t* num_inputs,
                                    size_t* num_outputs);
FJ_API fj_status fj_kernel_arg(const fj_kernel* kernel, size_t index, fj_arg_info* info);

/* The generated program's name (e.g. "fj_conv2d_relu_add") and the arch it
 * was compiled for ("cpu" on the CPU backend); FJ_ERR_INVALID_ARGUMENT when
 * the kernel is not loaded.
 * Valid while the kernel lives. */
FJ_API fj_status fj_kernel_name(const fj_kernel* kernel, const char** name);
FJ_API fj_status fj_kernel_arch(const fj_kernel* kernel, const char** arch);
/* The autotune mode of the options the kernel was compiled with. */
FJ_API fj_status fj_kernel_autotune(const fj_kernel* kernel, fj_autotune* mode);
/* FJ_BACKEND_CUDA or FJ_BACKEND_CPU (AUTO is resolved when compiling). */
FJ_API fj_status fj_kernel_backend(const fj_kernel* kernel, fj_backend* backend);

/* Enqueues the kernel on `stream` (a CUstream; NULL is the legacy default
 * stream) and returns without synchronizing. `args` holds num_args CUdeviceptr
 * values: the inputs, then the outputs (fj_kernel_arg order), each pointing at
 * a contiguous tensor of the argument's dtype and shape on the kernel's device.
 * A wrong count or a zero pointer is FJ_ERR_INVALID_ARGUMENT (checked before
 * any GPU work). A lazy kernel is loaded first. The kernel may be launched from
 * several threads at once.
 * CPU backend: `args` are host addresses (uint64_t)(uintptr_t)ptr, `stream`
 * is ignored and the call returns when the kernel has run (threads:
 * $FUSEJIT_NUM_THREADS, default all hardware threads). */
FJ_API fj_status fj_kernel_launch(fj_kernel* kernel, const uint64_t* args, size_t num_args,
                                  void* stream);

/* ---- the gradient program (docs/backward.md; no GPU needed) ------------------------ */

/* The backward of a spec: the forward with saved values, and stages run in
 * order, each a spec whose arguments are named after buffers the caller
 * allocates (a stage may view a buffer with another shape of the same element
 * count). Immutable. */
typedef struct fj_backward fj_backward;

typedef enum fj_buffer_role {
  FJ_BUFFER_INPUT = 0,        /* a forward input */
  FJ_BUFFER_SAVED = 1,        /* a value the forward saves (an output of fj_backward_forward) */
  FJ_BUFFER_OUTPUT_GRAD = 2,  /* the gradient of a forward output, given by the caller */
  FJ_BUFFER_TEMPORARY = 3,    /* written and read by the stages */
  FJ_BUFFER_INPUT_GRAD = 4    /* the gradient of a forward input */
} fj_buffer_role;

/* `no_grad`: NULL, or a NULL-terminated list of forward input names whose
 * gradients are not wanted. FJ_ERR_SPEC when an op has no derivative yet
 * (the message names it) or a name is not an input. */
FJ_API fj_status fj_backward_build(const fj_spec* forward, const char* const* no_grad, fj_backward** backward);
/* The same, for the stages' backend (CUDA, CPU, or AUTO: CPU where
 * fj_engine_compile's AUTO would choose it). Both backends take conv2d's dW
 * as one conv2d_weight_grad kernel today, so the program is the same; the
 * argument keeps room for backend-specific forms. */
FJ_API fj_status fj_backward_build_for(const fj_spec* forward, const char* const* no_grad, fj_backend backend,
                                       fj_backward** backward);
FJ_API void fj_backward_destroy(fj_backward* backward);
/* The forward with saved outputs, and stage `index`, as new specs (released
 * with fj_spec_destroy). */
FJ_API fj_status fj_backward_forward(const fj_backward* backward, fj_spec** spec);
FJ_API fj_status fj_backward_num_stages(const fj_backward* backward, size_t* count);
FJ_API fj_status fj_backward_stage(const fj_backward* backward, size_t index, fj_spec** spec);
/* Every buffer: `info` (is_output = 0) and its role. Valid while `backward` lives. */
FJ_API fj_status fj_backward_num_buffers(const fj_backward* backward, size_t* count);
FJ_API fj_status fj_backward_buffer(const fj_backward* backward, size_t index, fj_arg_info* info,
                                    fj_buffer_role* role);
/* The buffer holding forward input `input`'s gradient; *buffer = NULL when the
 * gradient is zero or was not asked for. Valid while `backward` lives. */
FJ_API fj_status fj_backward_input_grad(const fj_backward* backward, const char* input, const char** buffer);
/* print_backward's text (buffers, stages, notes); released with fj_free(). */
FJ_API fj_status fj_backward_print(const fj_backward* backward, char** text);

#ifdef __cplusplus
}
#endif

#endif /* FUSEJIT_FUSEJIT_H */
