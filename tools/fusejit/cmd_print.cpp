// fusejit print SPEC — canonical IR text and structural hash.
#include <cstdio>

#include "fusejit/spec.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

int run_print(const std::vector<std::string>& args) {
  if (args.size() != 1) return usage_error(kPrint, "expected exactly one spec file");
  Expected<Graph> g = load_spec_file(args[0]);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  std::printf("%s", print_graph(*g).c_str());
  std::printf("// hash %s\n", hash_hex(structural_hash(*g)).c_str());
  return 0;
}

}  // namespace

const Command kPrint{
    "print", "print a spec's canonical IR and its structural hash",
    "usage: fusejit print SPEC.yaml\n\n"
    "Prints the graph in canonical text form (docs/ir.md): values numbered %0, %1, ...\n"
    "in canonical order, every attribute explicit, every type inferred; then the\n"
    "structural hash, which ignores names and spec layout but changes with meaning.\n",
    run_print};

}  // namespace fusejit::cli
