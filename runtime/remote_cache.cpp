// runtime/remote_cache.cpp — RemoteCache: signed values in Redis, bounded by
// timeouts and a circuit breaker. Without hiredis the class is built anyway
// (never connecting) so that callers need no #if.
#include "runtime/remote_cache.h"

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "runtime/disk_cache.h"
#include "runtime/remote_value.h"

#if FUSEJIT_HAVE_REDIS
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#endif

namespace fusejit {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRetryAfter = std::chrono::seconds(30);  // a tripped breaker tries again then
constexpr const char* kStatsKey = "fusejit:v1:stats";

std::optional<int> env_int(const char* name, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end || n < lo || n > hi) {
    cache_warning_once(name, std::string("fusejit: ignoring ") + name + "='" + v + "' (expected " +
                                 std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return std::nullopt;
  }
  return static_cast<int>(n);
}

#if FUSEJIT_HAVE_REDIS
// hiredis write()s to the socket: a server that died mid-write would raise
// SIGPIPE and kill the host process. Blocked in this thread for the call; a
// SIGPIPE raised meanwhile is consumed before unblocking.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};
#endif

}  // namespace

Expected<RemoteCacheConfig> parse_remote_cache_url(const std::string& url) {
  RemoteCacheConfig c;
  c.url = url;
  const std::string scheme = "redis://";
  if (url.compare(0, scheme.size(), scheme) != 0) return Error("expected redis://host[:port][/db], got '" + url + "'");
  std::string rest = url.substr(scheme.size());
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    rest.resize(slash);
    if (!db.empty()) {
      char* end = nullptr;
      long n = std::strtol(db.c_str(), &end, 10);
      if (*end || n < 0 || n > 1000000) return Error("bad database number in '" + url + "'");
      c.db = static_cast<int>(n);
    }
  }
  if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
    char* end = nullptr;
    long p = std::strtol(rest.c_str() + colon + 1, &end, 10);
    if (*end || p <= 0 || p > 65535) return Error("bad port in '" + url + "'");
    c.port = static_cast<int>(p);
    rest.resize(colon);
  }
  if (rest.empty()) return Error("no host in '" + url + "'");
  c.host = rest;
  return c;
}

std::string RemoteCache::redis_key(std::string_view kind, const CacheKey& key) {
  return "fusejit:v1:" + std::string(kind) + ":" + key.digest();
}

bool RemoteCache::built_in() {
#if FUSEJIT_HAVE_REDIS
  return true;
#else
  return false;
#endif
}

std::shared_ptr<RemoteCache> RemoteCache::from_env() {
  const char* url = std::getenv("FUSEJIT_REMOTE_CACHE");
  if (!url || !*url) return nullptr;
  const std::string off = "fusejit: remote cache tier off: ";
  if (!built_in()) {
    cache_warning(off + "FUSEJIT_REMOTE_CACHE is set, but this build has no remote tier (built without hiredis "
                        "and libcrypto); using the local caches only");
    return nullptr;
  }
  auto config = parse_remote_cache_url(url);
  if (!config) {
    cache_warning(off + "FUSEJIT_REMOTE_CACHE: " + config.error().message);
    return nullptr;
  }
  const char* secret = std::getenv("FUSEJIT_REMOTE_CACHE_SECRET");
  if (!secret || !*secret) {
    cache_warning(off + "FUSEJIT_REMOTE_CACHE_SECRET is not set (values are signed with it: a CUBIN is code); "
                        "using the local caches only");
    return nullptr;
  }
  config->secret = secret;
  if (auto ms = env_int("FUSEJIT_REMOTE_CACHE_TIMEOUT_MS", 1, 60000)) config->connect_timeout_ms = config->io_timeout_ms = *ms;
  if (auto n = env_int("FUSEJIT_REMOTE_CACHE_MAX_FAILURES", 1, 1000)) config->max_failures = *n;
  return std::make_shared<RemoteCache>(config.take());
}

std::shared_ptr<RemoteCache> RemoteCache::process_default() {
  static std::shared_ptr<RemoteCache> cache = from_env();
  return cache;
}

struct RemoteCache::Impl {
  RemoteCacheConfig cfg;
  mutable std::mutex mu;
  RemoteCacheStats st;
  int failures_in_row = 0;
  bool tripped = false, warned_trip = false;
  Clock::time_point retry_at{};
#if FUSEJIT_HAVE_REDIS
  redisContext* ctx = nullptr;

  void drop() {
    if (ctx) redisFree(ctx);
    ctx = nullptr;
  }
  static timeval tv(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

  // One command; nullptr (connection dropped, failure counted) on any I/O error.
  redisReply* command(std::initializer_list<std::string_view> args, std::string& err) {
    SigpipeBlock no_sigpipe;
    if (!ctx) {
      ctx = redisConnectWithTimeout(cfg.host.c_str(), cfg.port, tv(cfg.connect_timeout_ms));
      if (!ctx || ctx->err) {
        err = ctx ? ctx->errstr : "out of memory";
        drop();
        return nullptr;
      }
      redisSetTimeout(ctx, tv(cfg.io_timeout_ms));
      if (cfg.db != 0) {
        std::string db = std::to_string(cfg.db);
        auto* r = static_cast<redisReply*>(redisCommand(ctx, "SELECT %b", db.data(), db.size()));
        bool ok = r && r->type != REDIS_REPLY_ERROR;
        err = !r ? std::string(ctx->errstr) : ok ? "" : std::string(r->str, r->len);
        if (r) freeReplyObject(r);
        if (!ok) {
          drop();
          return nullptr;
        }
      }
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) {
      err = ctx->errstr;
      drop();
      return nullptr;
    }
    if (r->type == REDIS_REPLY_ERROR) {  // e.g. OOM, READONLY: the connection is fine
      err = std::string(r->str, r->len);
      freeReplyObject(r);
      return nullptr;
    }
    return r;
  }

  // Under `mu`: adds 1 to a shared counter; an I/O failure counts as one.
  void count_on_server(const char* field) {
    std::string err;
    if (redisReply* r = command({"HINCRBY", kStatsKey, field, "1"}, err)) freeReplyObject(r);
    else if (!ctx) failed("HINCRBY: " + err);
  }
#endif

  // Under `mu`: may this call talk to the server?
  bool allowed() {
    if (!tripped) return true;
    if (Clock::now() < retry_at) return false;
    retry_at = Clock::now() + kRetryAfter;  // half-open: one try, re-trips on failure
    return true;
  }
  void succeeded() {
    failures_in_row = 0;
    tripped = false;
  }
  void failed(const std::string& what) {
    ++st.errors;
    if (++failures_in_row < cfg.max_failures && !tripped) return;
    tripped = true;
    retry_at = Clock::now() + kRetryAfter;
    st.disabled_reason = what;
    if (!warned_trip) {
      warned_trip = true;
      cache_warning("fusejit: remote cache " + cfg.url + " failed " + std::to_string(failures_in_row) +
                    " times in a row (last: " + what + "); using the local caches only");
    }
  }
};

RemoteCache::RemoteCache(RemoteCacheConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(config);
  impl_->st.url = impl_->cfg.url;
}

RemoteCache::~RemoteCache() {
#if FUSEJIT_HAVE_REDIS
  impl_->drop();
#endif
}

RemoteCacheStats RemoteCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RemoteCacheStats s = impl_->st;
  s.enabled = built_in() && !impl_->tripped;
  if (!built_in()) s.disabled_reason = "not built in";
  return s;
}

#if FUSEJIT_HAVE_REDIS

std::optional<std::string> RemoteCache::get(std::string_view kind, const CacheKey& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->allowed()) return std::nullopt;
  std::string err, rkey = redis_key(kind, key);
  redisReply* r = impl_->command({"GET", rkey}, err);
  if (!r) {
    impl_->failed("GET: " + err);
    return std::nullopt;
  }
  impl_->succeeded();
  std::optional<std::string> payload;
  const char* outcome = "misses";
  if (r->type == REDIS_REPLY_STRING) {
    auto verified = verify_remote_value(kind, key, std::string_view(r->str, r->len), impl_->cfg.secret);
    if (verified) {
      payload = verified.take();
      outcome = "hits";
    } else {
      outcome = "refused";
      cache_warning("fusejit: remote cache: refusing " + rkey + " from " + impl_->cfg.url + ": " +
                    verified.error().message);
    }
  }
  freeReplyObject(r);
  ++(payload ? impl_->st.hits : impl_->st.misses);
  if (std::string_view(outcome) == "refused") ++impl_->st.refused;
  impl_->count_on_server(outcome);
  return payload;
}

Status RemoteCache::put(std::string_view kind, const CacheKey& key, std::string_view payload) {
  auto value = encode_remote_value(kind, key, payload, impl_->cfg.secret);
  if (!value) return value.error();
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->allowed()) return Error("remote cache off after repeated failures");
  std::string err, rkey = redis_key(kind, key);
  redisReply* r = impl_->command({"SET", rkey, *value}, err);
  if (!r) {
    impl_->failed("SET: " + err);
    return Error("remote cache: SET failed: " + err);
  }
  freeReplyObject(r);
  impl_->succeeded();
  ++impl_->st.stores;
  impl_->count_on_server("stores");
  return Status::success();
}

Expected<std::vector<std::pair<std::string, std::string>>> RemoteCache::server_stats() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string err;
  std::vector<std::pair<std::string, std::string>> out;
  redisReply* r = impl_->command({"HGETALL", kStatsKey}, err);
  if (!r) return Error(impl_->cfg.url + ": " + err);
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
    out.emplace_back(std::string(r->element[i]->str, r->element[i]->len),
                     std::string(r->element[i + 1]->str, r->element[i + 1]->len));
  freeReplyObject(r);
  r = impl_->command({"DBSIZE"}, err);
  if (!r) return Error(impl_->cfg.url + ": " + err);
  out.emplace_back("keys", std::to_string(r->integer));
  freeReplyObject(r);
  return out;
}

#else  // built without hiredis: never connects

std::optional<std::string> RemoteCache::get(std::string_view, const CacheKey&) { return std::nullopt; }
Status RemoteCache::put(std::string_view, const CacheKey&, std::string_view) {
  return Error("the remote cache tier is not built in");
}
Expected<std::vector<std::pair<std::string, std::string>>> RemoteCache::server_stats() {
  return Error("the remote cache tier is not built in");
}

#endif

}  // namespace fusejit
