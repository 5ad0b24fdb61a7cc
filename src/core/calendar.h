// Calendar windows: where fixed_window's windows start and end.
//
// ms, s, m and h windows are aligned to the Unix epoch (UTC). day, week, month
// and year windows are aligned to local calendar boundaries in a time zone:
// local midnight, Monday 00:00, the 1st of the month, January 1st. A multiple
// of a calendar unit counts whole units from the local 1970-01-01 (weeks from
// Monday 1969-12-29) and floors to the multiple, so "2/month" windows are
// Jan-Feb, Mar-Apr, … and "100/7d" windows are fixed 7-day blocks.
// Across a DST change a local day lasts 23 or 25 hours: the window follows it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/rule.h"
#include "floodgate/status.h"

namespace floodgate::core {

struct Window {
  int64_t start_ms = 0;  // inclusive
  int64_t end_ms = 0;    // exclusive
};

// A loaded time zone. Immutable and thread-safe once loaded.
class Zone {
 public:
  virtual ~Zone() = default;

  // "UTC" (also "" and "Z"), an IANA name such as "Asia/Kolkata" read from the
  // system's tz database, or a fixed offset "+05:30", "-08:00", "UTC+5".
  // Unknown names are an INVALID_ARGUMENT error that quotes the name.
  static Result<std::shared_ptr<const Zone>> Load(std::string_view name);

  const std::string& name() const { return name_; }

  // The window of `multiplier` x `unit` that contains now_ms (multiplier >= 1).
  // Total for every now_ms a limit can see (1900..2200 and beyond): no overflow.
  virtual Window WindowAt(TimeUnit unit, int64_t multiplier, int64_t now_ms) const = 0;

 protected:
  explicit Zone(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

}  // namespace floodgate::core
