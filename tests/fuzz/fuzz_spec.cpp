// Fuzzes the YAML spec parser: any input must give a Graph or an Error, never
// a crash; a parsed graph must print and parse back to the same text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fusejit/ir.h"
#include "fusejit/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = fusejit::parse_spec(text, "fuzz.yaml");
  if (!g) return 0;
  std::string printed = fusejit::print_graph(*g);
  auto back = fusejit::parse_graph_text(printed);
  if (!back || fusejit::print_graph(*back) != printed) std::abort();  // round trip broken
  return 0;
}
