#include "fusejit/error.h"

namespace fusejit {

std::string SourceLoc::str() const {
  if (!known()) return file;
  std::string s = file.empty() ? std::string("<input>") : file;
  s += ":" + std::to_string(line);
  if (col > 0) s += ":" + std::to_string(col);
  return s;
}

std::string Error::str() const {
  std::string where = loc.str();
  return where.empty() ? "error: " + message : where + ": error: " + message;
}

}  // namespace fusejit
