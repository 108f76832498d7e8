// compiler/cuda_source.h — a small structure for generated CUDA source: a
// module holds one namespace per kernel (named constants, structs, device
// functions) and the kernels' extern "C" entry points. Emitters fill it;
// render() is the only place that formats text.
#pragma once

#include <string>
#include <vector>

#include "fusejit/ir.h"

namespace fusejit::cg {

// Rendered as `<prefix> <name>(<params>) { <body> }`.
struct CudaFunction {
  std::string comment;            // one line, may be empty
  std::string prefix;             // "__device__ __forceinline__ float"
  std::string name;               // "fj_relu_3"
  std::string params;             // "float x"
  std::vector<std::string> body;  // statements; a line ending in '{' opens a block, one starting with '}' closes it
};

struct CudaStruct {
  std::string comment;
  std::string name;
  std::vector<std::string> members;  // "static constexpr int kH = 128;", "const float* __restrict__ x;"
  std::vector<CudaFunction> methods;
};

struct NamedConstant {
  std::string name;   // kBatch
  int64_t value = 0;  // emitted as int when it fits, else long long
  std::string comment;
};

struct KernelSource {
  std::string ns;       // namespace holding everything but the entry point
  std::string comment;  // what the kernel computes
  std::vector<NamedConstant> constants;
  std::vector<std::string> declarations;  // lines after the constants, e.g. __constant__ tables
  std::vector<std::string> aliases;  // "using Tile = ...;"
  std::vector<CudaStruct> structs;
  std::vector<CudaFunction> functions;
  CudaFunction entry;  // extern "C" __global__ ..., after the namespace

  // Adds a device function unless an identical one exists; returns the name
  // to call it by (f.name, or f.name + "_vN" if that name is taken by a
  // different definition).
  std::string add_function(CudaFunction f);
};

struct CudaModule {
  std::vector<std::string> header;  // comment lines at the top
  std::vector<std::string> includes;
  std::vector<KernelSource> kernels;
  std::string render() const;
};

// C++ spelling helpers.
std::string float_literal(double v);      // "2.0f", "-0.5f", "fj::inf()", "fj::quiet_nan()"
std::string int_literal(int64_t v);       // "128", "4294967296LL"
std::string identifier(std::string_view s);  // letters, digits and '_' only, not starting with a digit
std::string ctype(DType t);               // "float", "__half", "__nv_bfloat16"

}  // namespace fusejit::cg
