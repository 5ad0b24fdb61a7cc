// The reservations' RESP commands (docs/reservations.md; registered in
// resp_commands.cc):
//   FG.RESERVE rule key estimate [TTL ms] [TIER t] [PRIORITY p]
//       -> [admitted 1|0, reservation (bulk, empty when 0), remaining,
//           reset_after_ms]
//          (admitted with an empty reservation: admitted without counting,
//          a fallback decision or a shadow rule's denial: nothing to settle)
//   FG.SETTLE rule key reservation actual -> [charged, remaining]
//          remaining below 0: the subject is in debt
#pragma once

#include <string>

#include "server/resp/resp_commands.h"

namespace floodgate::server {

void FgReserve(RespClient& client, const Args& args, std::string* out);
void FgSettle(RespClient& client, const Args& args, std::string* out);

}  // namespace floodgate::server
