// runtime/kernel_cache.cpp — the cache key.
#include "runtime/kernel_cache.h"

namespace fusejit {
namespace {

void append_field(std::string& key, const char* name, const std::string& value) {
  key += name;
  key += '=';
  key += std::to_string(value.size());
  key += ':';
  key += value;
  key += '\n';
}

}  // namespace

std::string kernel_cache_key(const std::string& graph_key, const std::string& codegen_config,
                             const std::vector<std::string>& nvrtc_options,
                             const std::string& arch, int device) {
  std::string key;
  append_field(key, "graph", graph_key);
  append_field(key, "config", codegen_config);
  for (const auto& option : nvrtc_options) append_field(key, "nvrtc", option);
  append_field(key, "arch", arch);
  append_field(key, "device", std::to_string(device));
  return key;
}

}  // namespace fusejit
