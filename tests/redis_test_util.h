// A throwaway redis-server for the remote cache tests: 127.0.0.1, a free
// port, a temp dir, no persistence. Tests skip (with the reason) when
// redis-server is not installed or the tier is not built in.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "runtime/remote_cache.h"
#include "tests/disk_cache_test_util.h"

#if FUSEJIT_HAVE_REDIS
#include <hiredis/hiredis.h>
#endif

namespace fusejit::testing {

inline std::string find_redis_server() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  path += ":/usr/bin:/usr/local/bin:/usr/sbin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string candidate = path.substr(start, end - start) + "/redis-server";
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// Why the remote tests cannot run here, or "" when they can.
inline std::string redis_unavailable() {
  if (!RemoteCache::built_in()) return "the remote cache tier is not built in (no hiredis/libcrypto at build time)";
  if (find_redis_server().empty()) return "redis-server is not installed (apt-get install redis-server)";
  return "";
}

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

class RedisServer {
 public:
  // Starts the server and waits (up to 10 s) until it answers PING.
  bool start(std::string& why) {
    port_ = free_port();
    std::string exe = find_redis_server(), port = std::to_string(port_), log = dir_ / "redis.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      (void)f;
      ::dup2(1, 2);
      ::execl(exe.c_str(), exe.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--dir", dir_.path().c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (ping()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    why = "redis-server did not answer on port " + port + " (see " + log + ")";
    return false;
  }
  ~RedisServer() { kill(); }

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  RemoteCacheConfig config(const std::string& secret) const {
    auto c = parse_remote_cache_url(url());
    RemoteCacheConfig r = *c;
    r.secret = secret;
    return r;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  void pause() { ::kill(pid_, SIGSTOP); }   // a hung server: connects, never answers
  void resume() { ::kill(pid_, SIGCONT); }

  // Raw GET / SET, for tampering with values (no-ops without hiredis).
  std::optional<std::string> get([[maybe_unused]] const std::string& key) {
    std::optional<std::string> out;
#if FUSEJIT_HAVE_REDIS
    with_client([&](redisContext* c) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size()));
      if (r && r->type == REDIS_REPLY_STRING) out = std::string(r->str, r->len);
      if (r) freeReplyObject(r);
    });
#endif
    return out;
  }
  bool set([[maybe_unused]] const std::string& key, [[maybe_unused]] const std::string& value) {
    bool ok = false;
#if FUSEJIT_HAVE_REDIS
    with_client([&](redisContext* c) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
      ok = r && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
    });
#endif
    return ok;
  }

 private:
  template <class F>
  void with_client([[maybe_unused]] F f) {
#if FUSEJIT_HAVE_REDIS
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, timeval{1, 0});
    if (c && !c->err) f(c);
    if (c) redisFree(c);
#endif
  }
  bool ping() {
    bool ok = false;
#if FUSEJIT_HAVE_REDIS
    with_client([&](redisContext* c) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
    });
#endif
    return ok;
  }

  ScratchDir dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace fusejit::testing

// Starts `server` or skips the test with the reason.
#define START_REDIS_OR_SKIP(server)                          \
  do {                                                       \
    std::string why_ = fusejit::testing::redis_unavailable(); \
    if (!why_.empty()) GTEST_SKIP() << why_;                 \
    if (!(server).start(why_)) FAIL() << why_;               \
  } while (0)
