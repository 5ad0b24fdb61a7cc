// Structured logs: one logfmt line per event on stderr,
//   ts=2026-11-22T00:31:35.123Z level=info msg="listening" resp=127.0.0.1:6479
// Thread-safe (each line is written with a single write).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate {

enum class LogLevel { kInfo, kWarn, kError };

using LogField = std::pair<std::string_view, std::string>;

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

}  // namespace floodgate
