// ConnectionTimers: when one client connection must be closed for being
// slow (a request that never completes), idle, or for not reading its
// replies. Pure bookkeeping: every call takes `now_ms` (a monotonic
// reading); the event loop reports what happened and asks Due().
//
// Why a class of its own: the rules are the same for every protocol and
// are easiest to get wrong at their edges (a partial request that started
// 9,999 ms ago, output that dipped under the soft limit for one round), so
// they are tested and fuzzed apart from sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace floodgate::server {

// The bounds one listener's connections live under (ServerConfig's keys,
// docs/operations.md). A zero timeout or limit is off.
struct ConnectionPolicy {
  // A request whose first byte has arrived must be complete within this
  // long (HTTP: headers and body; RESP: one command), or the connection
  // is closed: what keeps a slowloris client from holding a slot.
  int64_t request_timeout_ms = 0;
  // A connection with nothing pending (no partial request, nothing in
  // flight, nothing unsent) for this long is closed (HTTP keep-alive).
  int64_t idle_timeout_ms = 0;
  // Unsent reply bytes past which the connection's input is no longer read
  // or parsed (back-pressure); held above it for output_soft_timeout_ms,
  // the connection is closed.
  size_t output_soft_limit = 1 << 20;
  int64_t output_soft_timeout_ms = 0;
  // Unsent reply bytes past which the connection is closed at once.
  size_t output_hard_limit = 16 << 20;

  // Unsent bytes past which the loop stops reading and parsing the
  // connection's input: the soft limit, else the hard one, else none.
  size_t read_limit() const {
    if (output_soft_limit != 0) return output_soft_limit;
    return output_hard_limit != 0 ? output_hard_limit : SIZE_MAX;
  }
};

// Why the server closed a connection (a metric label and a log field).
enum class CloseReason : uint8_t {
  kRequestTimeout,   // a partial request outlived request_timeout_ms
  kIdleTimeout,      // nothing pending for idle_timeout_ms
  kOutputSoftLimit,  // unsent output over the soft limit for too long
  kOutputHardLimit,  // unsent output over the hard limit
  kEvicted,          // the longest idle, to make room for a new connection
  kOversized,        // one request larger than the input bound
  kShutdown,         // still busy when the drain time ran out
  kNone,             // not to be closed (keep last: the others index arrays)
};
inline constexpr int kNumCloseReasons = static_cast<int>(CloseReason::kNone);
std::string_view CloseReasonName(CloseReason reason);

// Not thread-safe: belongs to one connection, on its loop's thread.
class ConnectionTimers {
 public:
  explicit ConnectionTimers(int64_t now_ms) : last_active_ms_(now_ms) {}

  // After the loop handled the connection's input: `completed` when at
  // least one request was consumed, `partial` when bytes of an unfinished
  // request are left.
  void AfterInput(int64_t now_ms, bool completed, bool partial) {
    if (completed) last_active_ms_ = now_ms;
    if (!partial) {
      request_started_ms_ = -1;
    } else if (request_started_ms_ < 0 || completed) {
      // A request left partial after others completed started in this read.
      request_started_ms_ = now_ms;
    }
  }

  // After the connection's unsent output changed (replies appended or
  // written). Returns kOutputHardLimit when it must be closed at once.
  CloseReason AfterOutput(const ConnectionPolicy& policy, int64_t now_ms, size_t unsent) {
    if (unsent == 0) last_active_ms_ = now_ms;  // a client that reads is active
    if (policy.output_soft_limit == 0 || unsent <= policy.output_soft_limit) {
      over_soft_since_ms_ = -1;
    } else if (over_soft_since_ms_ < 0) {
      over_soft_since_ms_ = now_ms;
    }
    if (policy.output_hard_limit != 0 && unsent > policy.output_hard_limit) {
      return CloseReason::kOutputHardLimit;
    }
    return CloseReason::kNone;
  }

  // Whether a timeout has run out. `busy`: requests in flight or output
  // unsent, so the connection is not idle whatever its input says.
  CloseReason Due(const ConnectionPolicy& policy, int64_t now_ms, bool busy) const {
    if (policy.request_timeout_ms > 0 && request_started_ms_ >= 0 &&
        now_ms - request_started_ms_ >= policy.request_timeout_ms) {
      return CloseReason::kRequestTimeout;
    }
    if (policy.output_soft_timeout_ms > 0 && over_soft_since_ms_ >= 0 &&
        now_ms - over_soft_since_ms_ >= policy.output_soft_timeout_ms) {
      return CloseReason::kOutputSoftLimit;
    }
    if (policy.idle_timeout_ms > 0 && !busy && request_started_ms_ < 0 &&
        now_ms - last_active_ms_ >= policy.idle_timeout_ms) {
      return CloseReason::kIdleTimeout;
    }
    return CloseReason::kNone;
  }

  // When the connection last completed a request or had all its output
  // read (or was accepted): what "longest idle" compares.
  int64_t last_active_ms() const { return last_active_ms_; }
  // A request has started and not completed.
  bool mid_request() const { return request_started_ms_ >= 0; }

 private:
  int64_t last_active_ms_;
  int64_t request_started_ms_ = -1;  // first byte of the pending request; -1: none
  int64_t over_soft_since_ms_ = -1;  // unsent output over the soft limit since; -1: not over
};

}  // namespace floodgate::server
