// fusejit — command-line front end. `fusejit --help` lists the commands.
#include <cstdio>
#include <cstring>

#include "runtime/nvrtc_compiler.h"
#include "tools/fusejit/commands.h"

namespace fusejit::cli {
namespace {

const Command* const kCommands[] = {&kValidate, &kPrint, &kEmit, &kCompile, &kRun, &kTune, &kCache};

void print_help() {
  std::printf(
      "fusejit — JIT kernel generator for conv/GEMM + epilogue chains\n\n"
      "usage: fusejit <command> [options]\n\ncommands:\n");
  for (const Command* c : kCommands) std::printf("  %-10s %s\n", c->name, c->summary);
  std::printf("  %-10s %s\n", "version", "print the version and NVRTC's");
  std::printf("\n`fusejit help <command>` or `fusejit <command> --help` shows a command's options.\n"
              "FUSEJIT_LOG=error|warn|info|debug sets which library messages go to stderr (default warn).\n");
}

int print_version() {
  std::printf("fusejit %s (NVRTC %s)\n", FUSEJIT_CLI_VERSION, fusejit::nvrtc_version().c_str());
  return 0;
}

const Command* find(const char* name) {
  for (const Command* c : kCommands)
    if (std::strcmp(c->name, name) == 0) return c;
  return nullptr;
}

}  // namespace

int usage_error(const Command& cmd, const std::string& message) {
  std::fprintf(stderr, "fusejit %s: %s\n\n%s", cmd.name, message.c_str(), cmd.usage);
  return 2;
}

}  // namespace fusejit::cli

int main(int argc, char** argv) {
  using namespace fusejit::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) return print_version();
  if (!std::strcmp(argv[1], "help")) {
    if (argc < 3) {
      print_help();
      return 0;
    }
    const Command* c = find(argv[2]);
    if (!c) {
      std::fprintf(stderr, "fusejit: unknown command '%s' (see fusejit --help)\n", argv[2]);
      return 2;
    }
    std::printf("%s", c->usage);
    return 0;
  }
  const Command* c = find(argv[1]);
  if (!c) {
    std::fprintf(stderr, "fusejit: unknown command '%s' (see fusejit --help)\n", argv[1]);
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::printf("%s", c->usage);
      return 0;
    }
  return c->run(args);
}
