// The leases' RESP commands (algorithm: concurrency; registered in
// resp_commands.cc):
//   FG.ACQUIRE rule key [TTL ms] [TIER t] [WAIT ms]
//       -> [acquired 1|0, lease (bulk, empty when 0), in_flight, limit, ms]
//          ms: the lease's time to live when acquired, else the retry hint
//          (-1: never)
//   FG.RELEASE rule key lease      -> 1 released, 0 unknown or expired
//   FG.RENEW rule key lease [TTL ms] -> 1 renewed, 0 unknown or expired
#pragma once

#include <string>

#include "server/resp/resp_commands.h"

namespace floodgate::server {

void FgAcquire(RespClient& client, const Args& args, std::string* out);
void FgRelease(RespClient& client, const Args& args, std::string* out);
void FgRenew(RespClient& client, const Args& args, std::string* out);

}  // namespace floodgate::server
