// /metrics families of the quota alerts, from the library's own counters
// (Alerts::Stats).
#pragma once

#include <string>

#include "floodgate/alerts.h"

namespace floodgate::server {

// Appends the alerts' metric families (always, so a scrape sees the series
// before the first event).
void AppendAlertMetrics(const Alerts& alerts, std::string* out);

}  // namespace floodgate::server
