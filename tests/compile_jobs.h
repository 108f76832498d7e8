// tests/compile_jobs.h — compiles generated CUDA sources with NVRTC on all
// cores (no GPU needed): the CPU-side proof that every kernel variant builds;
// and the SASS of a CUBIN where cuobjdump exists (the GPU machine).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/nvrtc_compiler.h"

namespace fusejit::test_util {

struct CompileJob {
  std::string label, arch, name, source;
};

// Under AddressSanitizer (CI's hardening job, docs/hardening.md) the NVRTC
// compile tests compile every kSanitizedCompileStride-th source they
// generate: NVRTC is not instrumented and ran 5-7x slower there, and the
// plain suite compiles them all; every source is still generated under the
// sanitizer.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr size_t kSanitizedCompileStride = 4;
#else
inline constexpr size_t kSanitizedCompileStride = 1;
#endif

// Compiles every job on all cores (at least 2); one message per failure.
// Jobs with the same arch and source compile once (under ASan, a sample).
inline std::vector<std::string> compile_all(std::vector<CompileJob> jobs) {
  std::set<std::pair<std::string, std::string>> seen;
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                            [&](const CompileJob& j) { return !seen.insert({j.arch, j.source}).second; }),
             jobs.end());
  if (kSanitizedCompileStride > 1) {
    std::vector<CompileJob> sample;
    for (size_t i = 0; i < jobs.size(); i += kSanitizedCompileStride) sample.push_back(std::move(jobs[i]));
    jobs = std::move(sample);
  }
  std::vector<std::string> failures;
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      const CompileJob& job = jobs[i];
      std::string failure;
      Expected<CubinResult> c = compile_to_cubin(job.source, job.name, {job.arch, false, {}});
      if (!c) failure = job.label + " (" + job.arch + "): " + c.error().str().substr(0, 4000);
      else if (c->cubin.size() < 4 || std::string(c->cubin.data() + 1, 3) != "ELF")
        failure = job.label + " (" + job.arch + "): not an ELF CUBIN";
      if (failure.empty()) continue;
      std::lock_guard<std::mutex> lock(mu);
      failures.push_back(failure);
    }
  };
  const unsigned n = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return failures;
}

// The SASS of `cubin` (cuobjdump -sass on a file in `dir`), or nullopt where
// the toolkit has no cuobjdump (this CPU machine).
inline std::optional<std::string> sass_of(const std::vector<char>& cubin, const std::string& dir,
                                          const std::string& name) {
  const char* cuobjdump = "/usr/local/cuda/bin/cuobjdump";
  if (!std::filesystem::exists(cuobjdump)) return std::nullopt;
  const std::string path = dir + "/" + name + ".cubin";
  std::ofstream(path, std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  FILE* pipe = popen((std::string(cuobjdump) + " -sass " + path + " 2>&1").c_str(), "r");
  if (!pipe) return std::string("popen failed");
  std::string sass;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) sass.append(buf, n);
  pclose(pipe);
  return sass;
}

}  // namespace fusejit::test_util
