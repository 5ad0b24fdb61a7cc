// ConnectionTimers: see connection_timers.h.
#include "server/net/connection_timers.h"

#include "common/enum_table.h"

namespace floodgate::server {

constexpr EnumName<CloseReason> kCloseReasonNames[] = {
    {CloseReason::kRequestTimeout, "request_timeout"},
    {CloseReason::kIdleTimeout, "idle_timeout"},
    {CloseReason::kOutputSoftLimit, "output_soft_limit"},
    {CloseReason::kOutputHardLimit, "output_hard_limit"},
    {CloseReason::kEvicted, "evicted"},
    {CloseReason::kOversized, "oversized"},
    {CloseReason::kShutdown, "shutdown"}};

std::string_view CloseReasonName(CloseReason reason) {
  return ValueIn(kCloseReasonNames, reason, "none");
}

}  // namespace floodgate::server
