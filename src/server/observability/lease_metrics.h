// /metrics families of the leases (algorithm: concurrency) and of the
// requests held waiting (WAIT, wait_ms), per rule, from the limiter's own
// counters (LimiterCore::LeaseStats, WaitStats).
#pragma once

#include <string>

#include "service/services.h"

namespace floodgate::server {

void AppendLeaseMetrics(const service::Services& services, std::string* out);

}  // namespace floodgate::server
