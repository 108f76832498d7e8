// runtime/ptxas_info.cpp — parse_ptxas_info (fusejit/cubin.h): per-kernel
// resources out of ptxas's -v lines in an NVRTC log, e.g.
//   ptxas info    : Function properties for _Z3fooPf
//       8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "fusejit/cubin.h"

namespace fusejit {
namespace {

// The number just before `unit` in `line` (e.g. "1024 bytes smem" for " bytes smem"); -1 if absent.
int64_t number_before(const std::string& line, const std::string& unit) {
  size_t at = line.find(unit);
  if (at == std::string::npos || at == 0) return -1;
  size_t begin = at;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == at) return -1;
  return std::strtoll(line.substr(begin, at - begin).c_str(), nullptr, 10);
}

std::string after(const std::string& line, const std::string& marker) {
  size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  std::string rest = line.substr(at + marker.size());
  size_t end = rest.find_first_of(" '\t");
  return end == std::string::npos ? rest : rest.substr(0, end);
}

}  // namespace

std::vector<KernelResources> parse_ptxas_info(const std::string& log) {
  std::vector<KernelResources> out;
  std::istringstream in(log);
  std::string line;
  KernelResources* current = nullptr;
  std::set<std::string> entries;  // __global__ functions; others are device functions
  auto function = [&](const std::string& name) {
    for (auto& k : out)
      if (k.function == name) return &k;
    out.push_back(KernelResources{});
    out.back().function = name;
    return &out.back();
  };
  while (std::getline(in, line)) {
    if (std::string name = after(line, "Compiling entry function '"); !name.empty()) {
      entries.insert(name);
      current = function(name);
    } else if (std::string n = after(line, "Function properties for "); !n.empty()) {
      current = function(n);
    } else if (current && line.find("stack frame") != std::string::npos) {
      current->stack_bytes = std::max<int64_t>(0, number_before(line, " bytes stack frame"));
      current->spill_stores = std::max<int64_t>(0, number_before(line, " bytes spill stores"));
      current->spill_loads = std::max<int64_t>(0, number_before(line, " bytes spill loads"));
    } else if (current && line.find("Used ") != std::string::npos &&
               line.find(" registers") != std::string::npos) {
      current->registers = static_cast<int>(std::max<int64_t>(0, number_before(line, " registers")));
      current->shared_bytes = std::max<int64_t>(0, number_before(line, " bytes smem"));
      current->constant_bytes = std::max<int64_t>(0, number_before(line, " bytes cmem[0]"));
    }
  }
  if (!entries.empty())
    std::erase_if(out, [&](const KernelResources& k) { return !entries.count(k.function); });
  return out;
}

}  // namespace fusejit
