// The fusejit CLI: one Command per file (cmd_*.cpp), dispatched by main.cpp.
#pragma once

#include <string>
#include <vector>

namespace fusejit::cli {

struct Command {
  const char* name;
  const char* summary;  // one line, for `fusejit --help`
  const char* usage;    // full help, for `fusejit help NAME` / `NAME --help`
  int (*run)(const std::vector<std::string>& args);
};

// Each cmd_*.cpp defines one of these.
extern const Command kValidate;
extern const Command kPrint;
extern const Command kEmit;
extern const Command kCompile;
extern const Command kRun;
extern const Command kTune;
extern const Command kCache;

// Prints "fusejit NAME: message" to stderr and returns 2 (usage error).
int usage_error(const Command& cmd, const std::string& message);

}  // namespace fusejit::cli
