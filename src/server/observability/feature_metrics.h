// /metrics families of the expiring sets and OTP, from the library's own
// counters (ExpiringSets::Stats, Otp::Stats).
#pragma once

#include <string>

#include "service/services.h"

namespace floodgate::server {

// Appends the sets' (and, when configured, OTP's) metric families.
void AppendFeatureMetrics(service::Services& services, std::string* out);

}  // namespace floodgate::server
