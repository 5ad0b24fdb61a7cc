// /metrics families of the expiring sets and OTP, from the library's own
// counters (ExpiringSets::Stats, Otp::Stats).
#pragma once

#include <string>

#include "service/limiter_core.h"

namespace floodgate::server {

// Appends the sets' (and, when configured, OTP's) metric families.
void AppendFeatureMetrics(service::LimiterCore& limiter, std::string* out);

}  // namespace floodgate::server
