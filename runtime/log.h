// runtime/log.h — the library's messages. FUSEJIT_LOG=error|warn|info|debug
// (read on first use; default warn) sets which are written, one line each,
// to stderr as "fusejit: <level>: <message>". Thread-safe.
//
//   log::warn("tuning result not saved: " + why);
//   if (log::enabled(log::Level::Info)) log::info("nvrtc " + name + ": " + ms);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fusejit::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3 };

// "error", "warn"/"warning", "info", "debug" (any case); nullopt otherwise.
std::optional<Level> parse_level(std::string_view text);
const char* level_name(Level level);  // "error", "warning", "info", "debug"

Level level();                 // the current threshold
void set_level(Level level);   // overrides FUSEJIT_LOG
bool enabled(Level level);     // level <= the threshold

// Where messages go (stderr by default); returns the previous sink. An empty
// sink restores stderr. For tests and embedders.
using Sink = std::function<void(Level, const std::string&)>;
Sink set_sink(Sink sink);

void write(Level level, const std::string& message);  // dropped when not enabled
inline void error(const std::string& m) { write(Level::Error, m); }
inline void warn(const std::string& m) { write(Level::Warn, m); }
inline void info(const std::string& m) { write(Level::Info, m); }
inline void debug(const std::string& m) { write(Level::Debug, m); }

// Milliseconds since `start_ns` (a steady-clock reading from now_ns()), as "12.3 ms".
long long now_ns();
std::string elapsed_ms(long long start_ns);

}  // namespace fusejit::log
