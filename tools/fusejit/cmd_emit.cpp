// fusejit emit SPEC — the generated CUDA source (and the fusion plan).
#include <cstdio>

#include "compiler/program.h"
#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "tools/fusejit/args.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

int run_emit(const std::vector<std::string>& argv) {
  ParsedArgs a = parse_args(argv, {"arch", "config"}, {"plan"});
  if (!a.error.empty()) return usage_error(kEmit, a.error);
  if (a.positional.size() != 1) return usage_error(kEmit, "expected exactly one spec file");
  auto g = load_spec_file(a.positional[0]);
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().str().c_str());
    return 1;
  }
  Engine engine;
  CompileOptions opts;
  opts.arch = a.get("arch", "sm_90a");
  opts.config = a.get("config");
  auto program = engine.emit(*g, opts);
  if (!program) {
    std::fprintf(stderr, "fusejit emit: %s\n", program.error().str().c_str());
    return 1;
  }
  if (a.flags.count("plan")) {
    std::printf("%s", program->plan_text.c_str());
    for (const auto& l : program->launches)
      std::printf("launch %s grid=(%u,%u,%u)%s block=(%u,%u,%u) smem=%u%s\n", l.kernel.c_str(), l.grid[0], l.grid[1],
                  l.grid[2], l.persistent ? " tiles, persistent over min(tiles, SMs) blocks," : "", l.block[0],
                  l.block[1], l.block[2], l.shared_bytes,
                  l.tensor_maps.empty() ? "" : (" tensor_maps=" + std::to_string(l.tensor_maps.size())).c_str());
    return 0;
  }
  std::printf("%s", program->source.c_str());
  return 0;
}

}  // namespace

const Command kEmit{
    "emit", "print the CUDA C++ generated for a spec (or its fusion plan)",
    "usage: fusejit emit SPEC.yaml [--arch sm_90a] [--config STR] [--plan]\n\n"
    "Prints the generated CUDA source: every shape a compile-time constant, one device\n"
    "function per epilogue node, kernels named after what they do. No GPU needed.\n"
    "  --arch ARCH    target the code is generated for (default sm_90a)\n"
    "  --config STR   scheduler config override (see docs/codegen.md)\n"
    "  --plan         print the fusion plan and the launches instead of the source\n",
    run_emit};

}  // namespace fusejit::cli
