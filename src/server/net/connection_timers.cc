// ConnectionTimers: see connection_timers.h.
#include "server/net/connection_timers.h"

namespace floodgate::server {

std::string_view CloseReasonName(CloseReason reason) {
  switch (reason) {
    case CloseReason::kRequestTimeout:
      return "request_timeout";
    case CloseReason::kIdleTimeout:
      return "idle_timeout";
    case CloseReason::kOutputSoftLimit:
      return "output_soft_limit";
    case CloseReason::kOutputHardLimit:
      return "output_hard_limit";
    case CloseReason::kEvicted:
      return "evicted";
    case CloseReason::kOversized:
      return "oversized";
    case CloseReason::kShutdown:
      return "shutdown";
    case CloseReason::kNone:
      break;
  }
  return "none";
}

}  // namespace floodgate::server
