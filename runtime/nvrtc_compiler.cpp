// runtime/nvrtc_compiler.cpp — CUDA C++ -> CUBIN through NVRTC. The only file
// that includes nvrtc.h. No global mutable state: every call owns its
// nvrtcProgram, so concurrent compiles of separate programs are safe.
#include <dlfcn.h>
#include <nvrtc.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "runtime/embedded_templates.h"
#include "runtime/log.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"

namespace fusejit {
namespace {

std::string nvrtc_error(const char* what, nvrtcResult r) {
  return std::string(what) + " failed: " + nvrtcGetErrorString(r);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Keeps only characters that are safe in a file name.
std::string file_safe(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    out += ok ? c : '_';
  }
  return out.empty() ? "program" : out.substr(0, 100);
}

// Writes the failed source for inspection; returns the path, or a note on why
// it could not be written.
std::string save_failed_source(const std::string& source, const std::string& program_name) {
  const char* tmp = std::getenv("TMPDIR");
  std::filesystem::path dir = (tmp && *tmp) ? tmp : "/tmp";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(source)));
  auto path = dir / ("fusejit-failed-" + file_safe(program_name) + "-" + hex + ".cu");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << source;
  out.close();
  if (!out) return "<could not save the source to " + path.string() + ">";
  return path.string();
}

bool has_fp16_header(const std::filesystem::path& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::exists(dir / "cuda_fp16.h", ec);
}

std::string find_cuda_include_dir() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path lib = fs::canonical(info.dli_fname, ec).parent_path();
    if (!ec) {
      candidates.push_back(lib.parent_path() / "include");                // <cuda>/lib64
      candidates.push_back(lib.parent_path().parent_path() / "include");  // <cuda>/targets/<t>/lib
    }
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* v = std::getenv(var); v && *v) candidates.push_back(fs::path(v) / "include");
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const auto& c : candidates) {
    if (has_fp16_header(c)) return c.string();
  }
  return "";
}

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using ProgramPtr = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(std::strlen(log.c_str()));
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

}  // namespace

const std::vector<int>& nvrtc_supported_archs() {
  static const std::vector<int> archs = [] {
    int n = 0;
    std::vector<int> out;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      out.resize(static_cast<size_t>(n));
      if (nvrtcGetSupportedArchs(out.data()) != NVRTC_SUCCESS) out.clear();
    }
    return out;
  }();
  return archs;
}

Status check_arch(const std::string& arch) {
  const auto& supported = nvrtc_supported_archs();
  bool valid = false;
  if (arch.size() > 3 && arch.compare(0, 3, "sm_") == 0) {
    size_t end = 3;
    while (end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[end]))) ++end;
    std::string suffix = arch.substr(end);
    if (end > 3 && end - 3 <= 4 && (suffix.empty() || suffix == "a" || suffix == "f")) {
      int number = std::stoi(arch.substr(3, end - 3));
      bool known = false;
      for (int s : supported) known = known || s == number;
      valid = known && (suffix.empty() || (suffix == "a" && number >= 90) ||
                        (suffix == "f" && number >= 100));
    }
  }
  if (valid) return Status::success();
  std::ostringstream msg;
  msg << "unsupported arch '" << arch << "' (NVRTC " << nvrtc_version() << " supports";
  for (size_t i = 0; i < supported.size(); ++i) msg << (i ? ", sm_" : " sm_") << supported[i];
  msg << "; with an 'a' suffix from sm_90, an 'f' suffix from sm_100)";
  return Error(msg.str());
}

const std::string& cuda_include_dir() {
  static const std::string dir = find_cuda_include_dir();
  return dir;
}

std::vector<std::string> nvrtc_option_list(const NvrtcOptions& opts) {
  std::vector<std::string> options = {"--gpu-architecture=" + opts.arch, "-std=c++17",
                                      "-default-device"};
  if (opts.line_info) options.push_back("-lineinfo");
  if (!cuda_include_dir().empty()) options.push_back("--include-path=" + cuda_include_dir());
  options.insert(options.end(), opts.extra.begin(), opts.extra.end());
  return options;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

Expected<CubinResult> compile_to_cubin(const std::string& source, const std::string& program_name,
                                       const NvrtcOptions& opts) {
  if (auto s = check_arch(opts.arch); !s) return s.error();

  const auto& templates = embedded_templates();
  std::vector<const char*> header_texts, header_names;
  for (const auto& t : templates) {
    header_texts.push_back(t.text.c_str());
    header_names.push_back(t.name.c_str());
  }
  nvrtcProgram raw = nullptr;
  std::string file_name = program_name + ".cu";
  nvrtcResult r = nvrtcCreateProgram(&raw, source.c_str(), file_name.c_str(),
                                     static_cast<int>(header_texts.size()), header_texts.data(),
                                     header_names.data());
  if (r != NVRTC_SUCCESS) return Error(nvrtc_error("nvrtcCreateProgram", r));
  ProgramPtr prog(raw);

  CubinResult result;
  result.options = nvrtc_option_list(opts);
  std::vector<const char*> option_ptrs;
  for (const auto& o : result.options) option_ptrs.push_back(o.c_str());

  long long start = log::now_ns();
  r = nvrtcCompileProgram(prog.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  result.log = program_log(prog.get());
  log::info("nvrtc " + program_name + " for " + opts.arch + ": " + log::elapsed_ms(start) +
            (r == NVRTC_SUCCESS ? "" : " (failed)"));
  if (r != NVRTC_SUCCESS) {
    std::string saved = save_failed_source(source, program_name);
    return Error("NVRTC could not compile '" + program_name + "' for " + opts.arch + " (" +
                 nvrtcGetErrorString(r) + "); source saved to " + saved + "\n" + result.log);
  }

  size_t size = 0;
  if ((r = nvrtcGetCUBINSize(prog.get(), &size)) != NVRTC_SUCCESS)
    return Error(nvrtc_error("nvrtcGetCUBINSize", r));
  if (size == 0) return Error("NVRTC produced no CUBIN for '" + program_name + "' (" + opts.arch + ")");
  result.cubin.resize(size);
  if ((r = nvrtcGetCUBIN(prog.get(), result.cubin.data())) != NVRTC_SUCCESS)
    return Error(nvrtc_error("nvrtcGetCUBIN", r));
  return result;
}

}  // namespace fusejit
