// Structural hash: FNV-1a (64 bit) over the canonical text without names or
// init kinds. prepare_graph's canonical order makes it independent of op order.
#include <cstdio>

#include "ir/passes.h"

namespace fusejit {

uint64_t structural_hash(const Graph& g) {
  std::string text = print_graph_with(g, PrintOptions{.names = false, .init = false});
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hash_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace fusejit
