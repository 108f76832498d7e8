// The templates/*.cuh files, embedded at build time (cmake/embed_templates.cmake).
#pragma once

#include <string>
#include <vector>

namespace fusejit {

struct EmbeddedFile {
  std::string name;  // include name, e.g. "fusejit/gemm_simt.cuh"
  std::string text;
};

const std::vector<EmbeddedFile>& embedded_templates();

}  // namespace fusejit
