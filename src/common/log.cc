// Structured logs: see log.h.
#include "common/log.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>

#include "common/text.h"

namespace floodgate {
namespace {

// Quotes a logfmt value when it holds spaces, quotes or '='.
void AppendValue(std::string& out, std::string_view v) {
  const bool quote = v.empty() || v.find_first_of(" \"=\t\n\\") != std::string_view::npos;
  if (!quote) {
    out += v;
    return;
  }
  out += '"';
  text::AppendBackslashEscaped(out, v);
  out += '"';
}

}  // namespace

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc;
  gmtime_r(&ts.tv_sec, &utc);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                ts.tv_nsec / 1'000'000);
  std::string line = "ts=";
  line += stamp;
  line += level == LogLevel::kInfo   ? " level=info msg="
          : level == LogLevel::kWarn ? " level=warn msg="
                                     : " level=error msg=";
  AppendValue(line, msg);
  for (const auto& [k, v] : fields) {
    line += ' ';
    line += k;
    line += '=';
    AppendValue(line, v);
  }
  line += '\n';
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace floodgate
