// The remote cache tier in one process: signed values, read-through into the
// disk cache, tampered values refused, a dead or hung server bounded by the
// timeouts and the circuit breaker, tuning records, no secret -> off.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "fusejit/engine.h"
#include "fusejit/spec.h"
#include "compiler/program.h"
#include "runtime/cache_tiers.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_options.h"
#include "runtime/remote_value.h"
#include "runtime/tuning_db.h"
#include "tests/disk_cache_test_util.h"
#include "tests/redis_test_util.h"

namespace fusejit {
namespace {

using testing::RedisServer;
using testing::ScratchDir;
using testing::WarningCapture;
using Clock = std::chrono::steady_clock;

constexpr const char* kSecret = "test-secret-0123456789abcdef";

CacheKey key_named(const std::string& name) {
  CacheKey k;
  k.add("graph", name);
  k.add("arch", "sm_90a");
  return k;
}

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A real program, its key and NVRTC options (codegen only; compile separately).
struct RealProgram {
  Program program;
  NvrtcOptions nv;
  CacheKey key;
};
std::optional<RealProgram> real_program() {
  auto g = load_spec_file(std::string(FUSEJIT_SOURCE_DIR) + "/tests/specs/seed2_small.yaml");
  if (!g) return std::nullopt;
  CompileOptions opts;
  opts.arch = "sm_90a";
  Engine engine;
  auto p = engine.emit(*g, opts);
  if (!p) return std::nullopt;
  RealProgram r{p.take(), {}, {}};
  r.nv.arch = "sm_90a";
  r.key = cubin_cache_key(*g, "sm_90a", "", nvrtc_option_list(r.nv), r.program.source);
  return r;
}

TEST(RemoteCacheConfig, ParsesRedisUrls) {
  auto c = parse_remote_cache_url("redis://cache.local:6380/3");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->host, "cache.local");
  EXPECT_EQ(c->port, 6380);
  EXPECT_EQ(c->db, 3);
  auto d = parse_remote_cache_url("redis://10.0.0.1");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0);
  EXPECT_FALSE(parse_remote_cache_url("http://x:1/0"));
  EXPECT_FALSE(parse_remote_cache_url("redis://x:99999/0"));
  EXPECT_FALSE(parse_remote_cache_url("redis://:1/0"));
  EXPECT_FALSE(parse_remote_cache_url("redis://x:1/zero"));
}

TEST(RemoteCacheConfig, NoSecretMeansOffWithAWarning) {
  WarningCapture warnings;
  setenv("FUSEJIT_REMOTE_CACHE", "redis://127.0.0.1:1/0", 1);
  unsetenv("FUSEJIT_REMOTE_CACHE_SECRET");
  EXPECT_EQ(RemoteCache::from_env(), nullptr);
  unsetenv("FUSEJIT_REMOTE_CACHE");
  ASSERT_EQ(warnings.warnings().size(), 1u);
  const std::string w = warnings.warnings()[0];
  if (RemoteCache::built_in()) EXPECT_NE(w.find("FUSEJIT_REMOTE_CACHE_SECRET is not set"), std::string::npos) << w;
  else EXPECT_NE(w.find("no remote tier"), std::string::npos) << w;
  EXPECT_EQ(RemoteCache::from_env(), nullptr);  // unset: off, silently
  EXPECT_EQ(warnings.warnings().size(), 1u);
}

TEST(RemoteValue, SignedValuesVerifyAndTamperingIsRefused) {
  if (!RemoteCache::built_in()) GTEST_SKIP() << "the remote cache tier is not built in";
  CacheKey key = key_named("a");
  auto v = encode_remote_value(RemoteCache::kCubin, key, "payload bytes", kSecret);
  ASSERT_TRUE(v) << v.error().message;
  auto ok = verify_remote_value(RemoteCache::kCubin, key, *v, kSecret);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, "payload bytes");
  std::string flipped = *v;
  flipped[flipped.size() - 3] ^= 0x10;
  auto bad = verify_remote_value(RemoteCache::kCubin, key, flipped, kSecret);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("checksum"), std::string::npos) << bad.error().message;
  auto other = verify_remote_value(RemoteCache::kCubin, key, *v, "another secret");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("HMAC mismatch"), std::string::npos) << other.error().message;
  EXPECT_FALSE(verify_remote_value(RemoteCache::kCubin, key_named("b"), *v, kSecret));
  EXPECT_FALSE(verify_remote_value(RemoteCache::kTuning, key, *v, kSecret));
  EXPECT_FALSE(verify_remote_value(RemoteCache::kCubin, key, v->substr(0, v->size() - 1), kSecret));
  EXPECT_FALSE(verify_remote_value(RemoteCache::kCubin, key, "", kSecret));
}

TEST(RemoteCache, TwoStacksShareOneCompileThroughRedis) {
  RedisServer server;
  START_REDIS_OR_SKIP(server);
  auto real = real_program();
  ASSERT_TRUE(real);
  ScratchDir a, b;
  CubinTiers first(DiskCache(a.path()), std::make_shared<RemoteCache>(server.config(kSecret)));
  CubinTiers second(DiskCache(b.path()), std::make_shared<RemoteCache>(server.config(kSecret)));

  ASSERT_FALSE(first.load(real->key));
  auto compiled = compile_to_cubin(real->program.source, real->program.name, real->nv);
  ASSERT_TRUE(compiled) << compiled.error().message;
  first.store(real->key, compiled->cubin);
  EXPECT_EQ(first.stats().remote_stores, 1u);

  auto hit = second.load(real->key);  // no NVRTC: the remote tier has it
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->cubin, compiled->cubin);
  EXPECT_EQ(hit->from.rfind("remote cache: ", 0), 0u) << hit->from;
  TierStats s = second.stats();
  EXPECT_EQ(s.disk_misses, 1u);
  EXPECT_EQ(s.remote_hits, 1u);
  // Read-through: the disk of the second stack has it now.
  auto again = second.load(real->key);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->from.rfind("disk cache: ", 0), 0u) << again->from;
  EXPECT_EQ(second.stats().remote_hits, 1u);
  auto counters = second.remote()->server_stats();
  ASSERT_TRUE(counters) << counters.error().message;
}

TEST(RemoteCache, BitFlippedOrResignedValuesAreRefused) {
  RedisServer server;
  START_REDIS_OR_SKIP(server);
  WarningCapture warnings;
  ScratchDir a, b;
  CacheKey key = key_named("tampered");
  std::vector<char> cubin = bytes(std::string(4096, 'c') + "ELF-ish");
  CubinTiers writer(DiskCache(a.path()), std::make_shared<RemoteCache>(server.config(kSecret)));
  writer.store(key, cubin);
  std::string rkey = RemoteCache::redis_key(RemoteCache::kCubin, key);
  auto value = server.get(rkey);
  ASSERT_TRUE(value);

  std::string flipped = *value;
  flipped[flipped.size() - 100] ^= 0x01;  // one bit of the payload
  ASSERT_TRUE(server.set(rkey, flipped));
  CubinTiers reader(DiskCache(b.path()), std::make_shared<RemoteCache>(server.config(kSecret)));
  EXPECT_FALSE(reader.load(key));
  EXPECT_TRUE(any_contains(warnings.warnings(), "refusing " + rkey)) << "no warning";
  EXPECT_TRUE(any_contains(warnings.warnings(), "checksum"));
  EXPECT_FALSE(reader.disk().load(key)) << "a refused value reached the disk cache";
  EXPECT_EQ(reader.remote()->stats().refused, 1u);

  // Signed with another secret (an attacker with write access to Redis but
  // not the secret): refused too.
  RemoteCache attacker(server.config("not-the-secret"));
  ASSERT_TRUE(attacker.put(RemoteCache::kCubin, key, "malicious code").ok());
  EXPECT_FALSE(reader.load(key));
  EXPECT_TRUE(any_contains(warnings.warnings(), "HMAC mismatch"));
  EXPECT_FALSE(reader.disk().load(key));
  EXPECT_EQ(reader.remote()->stats().refused, 2u);

  // A good value again is accepted.
  writer.store(key, cubin);
  auto hit = reader.load(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->cubin, cubin);
}

// A compile through the tiers after the server died or hung: the cache steps
// take no longer than the timeouts, the CUBIN is stored locally, one warning.
void expect_degrades(bool hang) {
  RedisServer server;
  START_REDIS_OR_SKIP(server);
  auto real = real_program();
  ASSERT_TRUE(real);
  WarningCapture warnings;
  ScratchDir dir;
  RemoteCacheConfig cfg = server.config(kSecret);  // 50 ms timeouts, 3 failures
  CubinTiers tiers(DiskCache(dir.path()), std::make_shared<RemoteCache>(cfg));
  tiers.store(key_named("before"), bytes("x"));
  ASSERT_EQ(tiers.stats().remote_stores, 1u);
  if (hang) server.pause();
  else server.kill();
  // A large SET on the open connection to a dead server: no SIGPIPE kills us.
  tiers.store(key_named("big"), std::vector<char>(8 << 20, 'b'));

  auto t0 = Clock::now();
  EXPECT_FALSE(tiers.load(real->key));
  double load_ms = ms_since(t0);
  auto compiled = compile_to_cubin(real->program.source, real->program.name, real->nv);
  ASSERT_TRUE(compiled) << compiled.error().message;
  t0 = Clock::now();
  tiers.store(real->key, compiled->cubin);
  double store_ms = ms_since(t0);
  // Each call: at most one connect and one I/O timeout, plus slack for the
  // disk cache's fsync and a loaded machine.
  double bound = cfg.connect_timeout_ms + cfg.io_timeout_ms + 250;
  EXPECT_LT(load_ms, bound);
  EXPECT_LT(store_ms, bound);
  EXPECT_TRUE(tiers.disk().load(real->key)) << "the CUBIN was not kept locally";

  // More calls trip the breaker (if they have not yet); then they return at once.
  for (int i = 0; i < 3; ++i) (void)tiers.load(key_named("more" + std::to_string(i)));
  t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {  // the remote tier alone (disk stores fsync)
    (void)tiers.remote()->get(RemoteCache::kCubin, key_named("after" + std::to_string(i)));
    (void)tiers.remote()->put(RemoteCache::kCubin, key_named("after" + std::to_string(i)), "y");
  }
  EXPECT_LT(ms_since(t0), 50.0) << "calls after the breaker tripped still waited";
  EXPECT_FALSE(tiers.remote()->stats().enabled);
  int breaker_warnings = 0;
  for (const auto& w : warnings.warnings()) breaker_warnings += w.find("times in a row") != std::string::npos;
  EXPECT_EQ(breaker_warnings, 1);
  std::printf("[ remote %s ] load miss %.1f ms, store %.1f ms (bound %.0f ms)\n", hang ? "hung" : "killed",
              load_ms, store_ms, bound);
  if (hang) server.resume();
}

TEST(RemoteCache, KilledServerDegradesToLocalOnly) { expect_degrades(false); }
TEST(RemoteCache, HungServerDegradesToLocalOnly) { expect_degrades(true); }

TEST(RemoteCache, TuningRecordsReadThrough) {
  RedisServer server;
  START_REDIS_OR_SKIP(server);
  ScratchDir a, b;
  CacheKey key = key_named("tuned-graph");
  key.add("device", "NVIDIA H100 80GB HBM3");
  TuningRecord rec;
  rec.config = "tile=128x64,stages=3";
  rec.median_ms = 0.125;
  rec.created_unix = 1795322070;
  rec.table = "config  ms\n";
  TuningDb first(a.path(), std::make_shared<RemoteCache>(server.config(kSecret)));
  ASSERT_TRUE(first.save(key, rec).ok());
  TuningDb second(b.path(), std::make_shared<RemoteCache>(server.config(kSecret)));
  auto got = second.lookup(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->config, rec.config);
  EXPECT_DOUBLE_EQ(got->median_ms, 0.125);
  EXPECT_EQ(got->table, rec.table);
  auto local = TuningDb(b.path()).lookup(key);  // kept on the second disk
  ASSERT_TRUE(local);
  EXPECT_EQ(local->config, rec.config);
  TuningDb foreign(b.path() + "/other", std::make_shared<RemoteCache>(server.config("wrong secret")));
  WarningCapture warnings;
  EXPECT_FALSE(foreign.lookup(key));
  EXPECT_TRUE(any_contains(warnings.warnings(), "HMAC mismatch"));
}

}  // namespace
}  // namespace fusejit
