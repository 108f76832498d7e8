// The remote cache tier across processes, through the real CLI: a second
// process (own disk cache) gets the first one's CUBIN from Redis without
// NVRTC, and 16 processes racing on one key all get the same, correct CUBIN.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>
#include <unistd.h>

#include "runtime/remote_value.h"
#include "tests/disk_cache_test_util.h"
#include "tests/redis_test_util.h"

namespace fusejit {
namespace {

using testing::RedisServer;
using testing::ScratchDir;

constexpr const char* kSecret = "process-test-secret-42";

std::string spec() { return std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/seed2_small.yaml"; }

// `fusejit compile` with its own cache dir and the remote tier, as a shell
// command line (stdout and stderr together).
std::string compile_command(const RedisServer& server, const std::string& cache_dir, const std::string& out,
                            const std::string& secret = kSecret) {
  return "FUSEJIT_CACHE_DIR='" + cache_dir + "' FUSEJIT_REMOTE_CACHE='" + server.url() +
         "' FUSEJIT_REMOTE_CACHE_SECRET='" + secret + "' '" + FUSEJIT_BINARY_DIR + "/fusejit' compile '" + spec() +
         "' --arch sm_90a --verbose -o '" + out + "' 2>&1";
}

struct ProcessRun {
  int status = -1;
  std::string output;
};

ProcessRun run(const std::string& command) {
  ProcessRun r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  r.status = ::pclose(p);
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(RemoteCacheProcesses, SecondProcessHitsRemoteWithoutCompiling) {
  RedisServer server;
  START_REDIS_OR_SKIP(server);
  ScratchDir a, b;
  ProcessRun first = run(compile_command(server, a.path(), a / "k.cubin"));
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_TRUE(contains(first.output, "remote 0/1 (1 stored)")) << first.output;

  ProcessRun second = run(compile_command(server, b.path(), b / "k.cubin"));
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_TRUE(contains(second.output, "(from the remote cache: " + server.url() + ")")) << second.output;
  EXPECT_TRUE(contains(second.output, "remote 1/0 (0 stored)")) << second.output;
  EXPECT_FALSE(contains(second.output, "fusejit: ")) << second.output;
  EXPECT_EQ(read_file(a / "k.cubin"), read_file(b / "k.cubin"));

  ProcessRun third = run(compile_command(server, b.path(), b / "k2.cubin"));  // read-through filled b's disk
  ASSERT_EQ(third.status, 0) << third.output;
  EXPECT_TRUE(contains(third.output, "(from the disk cache: ")) << third.output;

  // A reader with another secret refuses the value and compiles itself.
  ScratchDir c;
  ProcessRun foreign = run(compile_command(server, c.path(), c / "k.cubin", "another-secret"));
  ASSERT_EQ(foreign.status, 0) << foreign.output;
  EXPECT_TRUE(contains(foreign.output, "HMAC mismatch")) << foreign.output;
  EXPECT_FALSE(contains(foreign.output, "(from the remote cache")) << foreign.output;

  // `fusejit cache stats` shows the tier's shared counters.
  ProcessRun stats = run("FUSEJIT_CACHE_DIR='" + b.path() + "' FUSEJIT_REMOTE_CACHE='" + server.url() +
                  "' FUSEJIT_REMOTE_CACHE_SECRET=x '" + FUSEJIT_BINARY_DIR + "/fusejit' cache stats 2>&1");
  ASSERT_EQ(stats.status, 0) << stats.output;
  EXPECT_TRUE(contains(stats.output, "remote:    " + server.url() + ": 1 hits")) << stats.output;
  EXPECT_TRUE(contains(stats.output, "1 refused")) << stats.output;
}

TEST(RemoteCacheProcesses, SixteenProcessesRaceOnOneKey) {
  RedisServer server;
  START_REDIS_OR_SKIP(server);
  constexpr int kProcesses = 16;
  ScratchDir root;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<FILE*> pipes;
  auto start = [&](int i) {
    std::string dir = root / ("p" + std::to_string(i));
    pipes.push_back(::popen(("mkdir -p '" + dir + "' && " + compile_command(server, dir, dir + "/k.cubin")).c_str(), "r"));
  };
  // Half start at once (all miss, compile, SET the key); the other half start
  // together as soon as one of them wrote its output (so the key is in
  // Redis), GETting while the rest of the first half still SET.
  for (int i = 0; i < kProcesses / 2; ++i) start(i);
  auto written = [&] {
    for (int i = 0; i < kProcesses / 2; ++i)
      if (::access((root / ("p" + std::to_string(i) + "/k.cubin")).c_str(), F_OK) == 0) return true;
    return false;
  };
  for (int waited = 0; !written() && waited < 120000; waited += 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = kProcesses / 2; i < kProcesses; ++i) start(i);
  for (FILE* p : pipes) ASSERT_NE(p, nullptr);
  int remote_hits = 0;
  for (int i = 0; i < kProcesses; ++i) {
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipes[i])) > 0) out.append(buf, n);
    EXPECT_EQ(::pclose(pipes[i]), 0) << "process " << i << ": " << out;
    EXPECT_FALSE(contains(out, "fusejit: ")) << "process " << i << " warned: " << out;
    remote_hits += contains(out, "(from the remote cache");
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ race ] %d processes in %.1f s, %d served by the remote tier\n", kProcesses, s, remote_hits);
  EXPECT_GE(remote_hits, kProcesses / 2);
  std::string reference = read_file(root / "p0/k.cubin");
  ASSERT_GT(reference.size(), 1000u);
  EXPECT_EQ(reference.substr(0, 4), "\x7f" "ELF");
  for (int i = 1; i < kProcesses; ++i)
    EXPECT_EQ(read_file(root / ("p" + std::to_string(i) + "/k.cubin")), reference) << "process " << i;
  // After the race the remote value is one good, signed CUBIN.
  ScratchDir late;
  ProcessRun last = run(compile_command(server, late.path(), late / "k.cubin"));
  ASSERT_EQ(last.status, 0) << last.output;
  EXPECT_TRUE(contains(last.output, "(from the remote cache")) << last.output;
  EXPECT_EQ(read_file(late / "k.cubin"), reference);
}

}  // namespace
}  // namespace fusejit
