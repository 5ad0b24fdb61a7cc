// Structured logs: one logfmt line per event on stderr,
//   ts=2026-11-22T00:31:35.123Z level=info msg="listening" resp=127.0.0.1:6479
// Thread-safe (each line is written with a single write).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate {

enum class LogLevel { kInfo, kWarn, kError };

using LogField = std::pair<std::string_view, std::string>;

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

// At most one line per interval for an event that can repeat at the rate a
// client can make it happen (a flood must not become a flood of logs).
// Not thread-safe: keep one per thread, or guard it.
class LogEvery {
 public:
  explicit LogEvery(int64_t interval_ms) : interval_ms_(interval_ms) {}
  // Whether to write a line now (a monotonic `now_ms`); when so,
  // *suppressed is how many were held back since the last line.
  bool Allow(int64_t now_ms, int64_t* suppressed) {
    if (last_ms_ >= 0 && now_ms - last_ms_ < interval_ms_) {
      ++held_;
      return false;
    }
    last_ms_ = now_ms;
    *suppressed = held_;
    held_ = 0;
    return true;
  }

 private:
  const int64_t interval_ms_;
  int64_t last_ms_ = -1;
  int64_t held_ = 0;
};

}  // namespace floodgate
