// Fuzzes the IR text parser (parse_graph_text): a Graph or an Error, never a
// crash; a parsed graph's canonical text must parse back to itself.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fusejit/ir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = fusejit::parse_graph_text(text, "fuzz.ir");
  if (!g) return 0;
  std::string printed = fusejit::print_graph(*g);
  auto back = fusejit::parse_graph_text(printed);
  if (!back || fusejit::print_graph(*back) != printed) std::abort();  // round trip broken
  return 0;
}
