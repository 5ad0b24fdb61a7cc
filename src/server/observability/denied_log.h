// DeniedLog: the sampled "msg=denied" log line, which says who was denied
// by what (rule, binding limit, key) without turning a flood of denials
// into a flood of logs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "floodgate/decision.h"

namespace floodgate::server {

// Lines written in one second at most, across every subject: a flood of
// distinct keys is summed up by the lines' `suppressed` field instead.
inline constexpr int64_t kMaxDeniedLinesPerSecond = 20;

// Thread-safe (lock-free: a denial on any loop may write a line).
class DeniedLog {
 public:
  // `interval_ms`: at most one line per subject (rule and key) per this
  // long; 0 writes none. `redact`: keys shown hashed (RedactKey).
  DeniedLog(int64_t interval_ms, bool redact) : interval_ms_(interval_ms), redact_(redact) {}

  // Writes a line for the denial `d` of `key` on `rule` at `now_ms` (unix
  // ms), unless this subject had one within the interval, or this second's
  // lines are spent. A subject sharing its slot with another one that had
  // a line within the interval is held back too: what is promised is at
  // most one line per subject per interval, not one for every subject.
  void Denied(std::string_view rule, std::string_view key, const Decision& d, int64_t now_ms);

  int64_t written() const { return written_.load(std::memory_order_relaxed); }
  int64_t suppressed() const { return suppressed_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kSlots = 4096;
  // Whether `hash`'s slot had no line within the interval; with `take`,
  // marks it as having one now (false: another thread did first).
  bool Claim(uint64_t hash, int64_t now_ms, bool take);
  bool TakeBudget(int64_t now_ms);

  const int64_t interval_ms_;
  const bool redact_;
  // Per slot: the time (ms, low 48 bits) of its last line, 0: none.
  std::array<std::atomic<uint64_t>, kSlots> slots_{};
  // The second lines are being counted in (high bits) and its count (low 16).
  std::atomic<uint64_t> budget_{0};
  std::atomic<int64_t> written_{0};
  std::atomic<int64_t> suppressed_{0};
  // Held back since the last line written (told in the next one).
  std::atomic<int64_t> held_{0};
};

}  // namespace floodgate::server
