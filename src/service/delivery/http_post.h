// One HTTP/1.1 POST with a deadline, for deliveries off the request path
// (OTP codes to an SMS or e-mail gateway). Blocking: run it on a worker
// thread, never on an event loop. Plain http:// (see common/http_url.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/http_url.h"
#include "floodgate/clock.h"
#include "floodgate/status.h"

namespace floodgate::service {

struct HttpPostResult {
  int status = 0;  // the response's status code; 0 when none arrived
};

// POSTs `body` (Content-Type: application/json, plus `headers`) to `url`
// and reads the response's status line; everything, name resolution
// excepted, within `timeout_ms` on `clock` (its MonotonicNs: on a
// ManualClock the POST times out only once the clock is moved; meanwhile
// it waits in slices of the clock's MaxSleepNs). OK with the status for any response
// (the caller decides what 4xx/5xx mean); UNAVAILABLE when nothing could be
// sent or no status line arrived ("connect to 127.0.0.1:9: Connection
// refused"); DEADLINE_EXCEEDED past the deadline. Thread-safe.
Result<HttpPostResult> HttpPost(const HttpUrl& url, std::string_view body,
                                const std::vector<std::pair<std::string, std::string>>& headers,
                                int64_t timeout_ms, const Clock& clock);

}  // namespace floodgate::service
