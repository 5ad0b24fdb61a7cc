// The alert spool: the file that keeps the embedded store's pending alert
// events across a restart. Written whole and atomically (a temporary file,
// fsync, rename, fsync of the directory), so a crash leaves the old file or
// the new one, never half of one.
//
// Format: a line "floodgate-alert-spool 1", then per event a line of
// decimal fields "<id bytes> <url bytes> <body bytes> <signature bytes>
// <created_ms> <attempts>" followed by those four byte strings and a
// newline. Length-prefixed, so bodies need no escaping.
//
// Not thread-safe: one writer at a time (the Alerts' housekeeping thread).
#pragma once

#include <string>
#include <vector>

#include "floodgate/status.h"
#include "service/alerts/alert_delivery.h"

namespace floodgate::service {

// The spool path when alert_delivery.spool is empty: alerts.spool in
// $STATE_DIRECTORY (its first directory; systemd's StateDirectory= sets
// it), else in /var/lib/floodgate.
std::string DefaultAlertSpoolPath();

// Makes sure the spool can be written: creates its directory (0700) if
// missing and writes and removes a probe file. INVALID_ARGUMENT naming the
// path and the reason otherwise, so that serve refuses to start rather
// than lose events at the first shutdown.
Status PrepareAlertSpool(const std::string& path);

// Replaces the spool with `alerts` (none: removes it). UNAVAILABLE with the
// reason on an I/O error; the previous spool is then left as it was.
Status WriteAlertSpool(const std::string& path, const std::vector<PendingAlert>& alerts);

// The events of the spool at `path` (none when there is no file). A
// damaged tail (a foreign or truncated file) is skipped: the events before
// it are returned and *warning says what was skipped.
Result<std::vector<PendingAlert>> ReadAlertSpool(const std::string& path, std::string* warning);

}  // namespace floodgate::service
