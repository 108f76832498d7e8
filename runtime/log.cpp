// runtime/log.cpp — see log.h.
#include "runtime/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fusejit::log {
namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}
Sink& sink() {
  static Sink s;
  return s;
}

// -1 until first use, then the Level as an int.
std::atomic<int> g_level{-1};

int initial_level() {
  const char* env = std::getenv("FUSEJIT_LOG");
  if (!env || !*env) return static_cast<int>(Level::Warn);
  if (auto l = parse_level(env)) return static_cast<int>(*l);
  std::fprintf(stderr, "fusejit: warning: FUSEJIT_LOG='%s' is not error, warn, info or debug; using warn\n",
               env);
  return static_cast<int>(Level::Warn);
}

}  // namespace

std::optional<Level> parse_level(std::string_view text) {
  std::string t;
  for (char c : text) t += static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  if (t == "error") return Level::Error;
  if (t == "warn" || t == "warning") return Level::Warn;
  if (t == "info") return Level::Info;
  if (t == "debug") return Level::Debug;
  return std::nullopt;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::Error: return "error";
    case Level::Warn: return "warning";
    case Level::Info: return "info";
    case Level::Debug: return "debug";
  }
  return "?";
}

Level level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    int expected = -1;
    g_level.compare_exchange_strong(expected, initial_level());
    l = g_level.load();
  }
  return static_cast<Level>(l);
}

void set_level(Level l) { g_level.store(static_cast<int>(l)); }

bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(level()); }

Sink set_sink(Sink s) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  Sink previous = std::move(sink());
  sink() = std::move(s);
  return previous;
}

void write(Level l, const std::string& message) {
  if (!enabled(l)) return;
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (sink()) sink()(l, message);
  else std::fprintf(stderr, "fusejit: %s: %s\n", level_name(l), message.c_str());
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string elapsed_ms(long long start_ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", double(now_ns() - start_ns) / 1e6);
  return buf;
}

}  // namespace fusejit::log
