// Rendering of the generated-source structure.
#include "compiler/cuda_source.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace fusejit::cg {
namespace {

void render_body(std::ostringstream& out, const std::vector<std::string>& body, int indent) {
  for (const std::string& line : body) {
    if (!line.empty() && line[0] == '}') --indent;
    out << std::string(static_cast<size_t>(2 * indent), ' ') << line << "\n";
    if (!line.empty() && line.back() == '{') ++indent;
  }
}

void render_function(std::ostringstream& out, const CudaFunction& f, int indent) {
  const std::string pad(static_cast<size_t>(2 * indent), ' ');
  if (!f.comment.empty()) out << pad << "// " << f.comment << "\n";
  out << pad << f.prefix << " " << f.name << "(" << f.params << ") {\n";
  render_body(out, f.body, indent + 1);
  out << pad << "}\n";
}

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether `text` names `word` as a whole identifier.
bool mentions(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool before = at > 0 && identifier_char(text[at - 1]);
    const bool after = at + word.size() < text.size() && identifier_char(text[at + word.size()]);
    if (!before && !after) return true;
  }
  return false;
}

bool same_definition(const CudaFunction& a, const CudaFunction& b) {
  return a.prefix == b.prefix && a.params == b.params && a.body == b.body && a.comment == b.comment;
}

}  // namespace

std::string KernelSource::add_function(CudaFunction f) {
  const std::string base = f.name;
  for (int attempt = 1;; ++attempt) {
    f.name = attempt == 1 ? base : base + "_v" + std::to_string(attempt);
    const CudaFunction* existing = nullptr;
    for (const CudaFunction& have : functions)
      if (have.name == f.name) existing = &have;
    if (!existing) {
      functions.push_back(f);
      return f.name;
    }
    if (same_definition(*existing, f)) return f.name;
  }
}

std::string CudaModule::render() const {
  std::ostringstream out;
  for (const std::string& h : header) out << "// " << h << "\n";
  out << "\n";
  for (const std::string& inc : includes) out << "#include \"" << inc << "\"\n";
  for (const KernelSource& k : kernels) {
    out << "\n";
    if (!k.comment.empty()) out << "// " << k.comment << "\n";
    out << "namespace " << k.ns << " {\n\n";
    std::ostringstream rest;  // what follows the constants; a constant nothing there names is left out
    for (const std::string& d : k.declarations) rest << d << "\n";
    if (!k.declarations.empty()) rest << "\n";
    for (const CudaStruct& s : k.structs) {
      if (!s.comment.empty()) rest << "// " << s.comment << "\n";
      rest << "struct " << s.name << " {\n";
      for (const std::string& m : s.members) rest << "  " << m << "\n";
      for (const CudaFunction& f : s.methods) render_function(rest, f, 1);
      rest << "};\n\n";
    }
    for (const std::string& a : k.aliases) rest << a << "\n";
    if (!k.aliases.empty()) rest << "\n";
    for (const CudaFunction& f : k.functions) {
      render_function(rest, f, 0);
      rest << "\n";
    }
    const std::string body = rest.str();
    std::ostringstream entry;
    render_function(entry, k.entry, 0);
    bool any = false;
    for (const NamedConstant& c : k.constants) {
      if (!mentions(body, c.name) && !mentions(entry.str(), c.name)) continue;
      const bool wide = c.value > std::numeric_limits<int>::max() || c.value < std::numeric_limits<int>::min();
      out << "constexpr " << (wide ? "long long " : "int ") << c.name << " = " << int_literal(c.value) << ";";
      if (!c.comment.empty()) out << "  // " << c.comment;
      out << "\n";
      any = true;
    }
    if (any) out << "\n";
    out << body;
    out << "}  // namespace " << k.ns << "\n\n";
    out << entry.str();
  }
  return out.str();
}

std::string float_literal(double v) {
  if (std::isnan(v)) return "fj::quiet_nan()";
  if (std::isinf(v)) return v > 0 ? "fj::inf()" : "fj::neg_inf()";
  const float f = static_cast<float>(v);
  if (std::isinf(f)) return f > 0 ? "fj::inf()" : "fj::neg_inf()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s + "f";
}

std::string int_literal(int64_t v) {
  const bool wide = v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min();
  return std::to_string(v) + (wide ? "LL" : "");
}

std::string identifier(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "v" + out;
  return out;
}

std::string ctype(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F16: return "__half";
    case DType::BF16: return "__nv_bfloat16";
  }
  return "float";
}

}  // namespace fusejit::cg
