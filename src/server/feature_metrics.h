// /metrics families of the expiring sets and OTP, from the library's own
// counters (ExpiringSets::Stats, Otp::Stats).
#pragma once

#include <string>

#include "floodgate/limiter.h"

namespace floodgate::server {

// Appends the sets' (and, when configured, OTP's) metric families.
void AppendFeatureMetrics(Limiter& limiter, std::string* out);

}  // namespace floodgate::server
