// capi/capi_spec.cpp — specs and compile options of the C API.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "capi/capi_internal.h"
#include "fusejit/spec.h"
#include "runtime/nvrtc_options.h"

using namespace fusejit::capi;

namespace {

fj_status make_spec(fusejit::Expected<fusejit::Graph> parsed, fj_spec** spec) {
  if (!parsed) return fail(FJ_ERR_SPEC, message_of(parsed.error()));
  auto out = std::make_unique<fj_spec>();
  out->graph = parsed.take();
  out->args = kernel_args(out->graph);
  *spec = out.release();
  return FJ_OK;
}

// Reads a whole file; the spec front end then reports errors as path:line:col.
fj_status read_file(const char* path, std::string& text) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f)
    return fail(FJ_ERR_IO, std::string("cannot read '") + path + "': " + std::strerror(errno));
  char buffer[1 << 14];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  const int read_errno = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (read_errno != 0)
    return fail(FJ_ERR_IO, std::string("cannot read '") + path + "': " + std::strerror(read_errno));
  return FJ_OK;
}

}  // namespace

extern "C" {

// ---- specs ---------------------------------------------------------------------

fj_status fj_spec_parse(const char* yaml_text, const char* filename, fj_spec** spec) {
  return guarded([&]() -> fj_status {
    if (!yaml_text) return null_argument("yaml_text");
    if (!spec) return null_argument("spec");
    return make_spec(fusejit::parse_spec(yaml_text, filename ? filename : "<spec>"), spec);
  });
}

fj_status fj_spec_load(const char* path, fj_spec** spec) {
  return guarded([&]() -> fj_status {
    if (!path) return null_argument("path");
    if (!spec) return null_argument("spec");
    std::string text;
    if (fj_status s = read_file(path, text); s != FJ_OK) return s;
    return make_spec(fusejit::parse_spec(text, path), spec);
  });
}

void fj_spec_destroy(fj_spec* spec) { delete spec; }

fj_status fj_spec_name(const fj_spec* spec, const char** name) {
  return guarded([&]() -> fj_status {
    if (!spec) return null_argument("spec");
    if (!name) return null_argument("name");
    *name = spec->graph.name.c_str();
    return FJ_OK;
  });
}

fj_status fj_spec_num_args(const fj_spec* spec, size_t* num_inputs, size_t* num_outputs) {
  return guarded([&]() -> fj_status {
    if (!spec) return null_argument("spec");
    if (!num_inputs) return null_argument("num_inputs");
    if (!num_outputs) return null_argument("num_outputs");
    count_args(spec->args, num_inputs, num_outputs);
    return FJ_OK;
  });
}

fj_status fj_spec_arg(const fj_spec* spec, size_t index, fj_arg_info* info) {
  return guarded([&]() -> fj_status {
    if (!spec) return null_argument("spec");
    return arg_at(spec->args, index, info);
  });
}

fj_status fj_spec_print_ir(const fj_spec* spec, char** text) {
  return guarded([&]() -> fj_status {
    if (!spec) return null_argument("spec");
    if (!text) return null_argument("text");
    char* out = dup_string(fusejit::print_graph(spec->graph));
    if (!out) return fail(FJ_ERR_INTERNAL, "out of memory");
    *text = out;
    return FJ_OK;
  });
}

// ---- options -------------------------------------------------------------------

fj_status fj_options_create(fj_options** options) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    *options = new fj_options();
    return FJ_OK;
  });
}

void fj_options_destroy(fj_options* options) { delete options; }

fj_status fj_options_set_arch(fj_options* options, const char* arch) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    if (!arch) return null_argument("arch");
    std::string a = arch;
    if (a != "auto") {
      if (auto s = fusejit::check_arch(a); !s)
        return fail(FJ_ERR_INVALID_ARGUMENT, message_of(s.error()));
    }
    options->compile.arch = a;
    return FJ_OK;
  });
}

fj_status fj_options_set_config(fj_options* options, const char* config) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    options->compile.config = config ? config : "";
    return FJ_OK;
  });
}

fj_status fj_options_set_autotune(fj_options* options, fj_autotune mode) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    int raw = enum_bits(mode);
    if (raw != FJ_AUTOTUNE_OFF && raw != FJ_AUTOTUNE_USE_DB && raw != FJ_AUTOTUNE_FORCE)
      return fail(FJ_ERR_INVALID_ARGUMENT,
                  "unknown autotune mode " + std::to_string(raw) +
                      " (FJ_AUTOTUNE_OFF, FJ_AUTOTUNE_USE_DB or FJ_AUTOTUNE_FORCE)");
    options->autotune = static_cast<fj_autotune>(raw);
    return FJ_OK;
  });
}

fj_status fj_options_get_autotune(const fj_options* options, fj_autotune* mode) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    if (!mode) return null_argument("mode");
    *mode = options->autotune;
    return FJ_OK;
  });
}

fj_status fj_options_set_device(fj_options* options, int device) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    if (device < 0)
      return fail(FJ_ERR_INVALID_ARGUMENT, "device must be >= 0, got " + std::to_string(device));
    options->compile.device = device;
    return FJ_OK;
  });
}

fj_status fj_options_set_line_info(fj_options* options, int enabled) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    options->compile.line_info = enabled != 0;
    return FJ_OK;
  });
}

fj_status fj_options_set_lazy(fj_options* options, int lazy) {
  return guarded([&]() -> fj_status {
    if (!options) return null_argument("options");
    options->lazy = lazy != 0;
    return FJ_OK;
  });
}

}  // extern "C"
