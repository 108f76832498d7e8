// Tiny option parsing shared by the CLI commands: positional arguments plus
// `--key value` / `--key=value` options and `--flag`s.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fusejit::cli {

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;
  std::set<std::string> flags;
  std::string error;  // non-empty: the first problem found

  std::string get(const std::string& key, const std::string& def = "") const {
    auto it = options.find(key);
    return it == options.end() ? def : it->second;
  }
  // Parses an integer option; sets `error` when malformed.
  long long get_int(const std::string& key, long long def) {
    auto it = options.find(key);
    if (it == options.end()) return def;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end) error = "--" + key + " expects an integer, got '" + it->second + "'";
    return v;
  }
};

// `valued`: options that take a value; `flag_names`: options that do not.
inline ParsedArgs parse_args(const std::vector<std::string>& args, const std::set<std::string>& valued,
                             const std::set<std::string>& flag_names) {
  ParsedArgs p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 && !(a.size() == 2 && a[0] == '-' && a != "-")) {
      p.positional.push_back(a);
      continue;
    }
    std::string key = a.substr(a.rfind("--", 0) == 0 ? 2 : 1);
    if (key == "o") key = "output";
    if (key == "v") key = "verbose";
    std::optional<std::string> value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    if (flag_names.count(key) && !value) {
      p.flags.insert(key);
    } else if (valued.count(key)) {
      if (!value) {
        if (i + 1 >= args.size()) {
          p.error = "--" + key + " needs a value";
          return p;
        }
        value = args[++i];
      }
      p.options[key] = *value;
    } else {
      p.error = "unknown option '" + a + "'";
      return p;
    }
  }
  return p;
}

}  // namespace fusejit::cli
