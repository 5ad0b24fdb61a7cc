// The control plane's RESP commands (registered in resp_commands.cc;
// docs/control-plane.md). With an admin token set, a connection must AUTH
// with it first (the read token: FG.STATE and FG.OVERRIDE GET only); with
// none, loopback clients only.
//   FG.STATE rule key [TIER t]
//     -> [[limit, used, remaining, reset_after_ms] per limit,
//         override limits (array, empty for none), block ms left (0: none),
//         block reason]
//   FG.REFUND rule key cost           -> FG.CHECK's five integers, as a peek after the refund
//                                        (the units given back: the HTTP route's answer)
//   FG.OVERRIDE SET rule key ttl_ms limit [limit ...]   (ttl_ms 0: none) -> OK
//   FG.OVERRIDE GET rule key          -> [limits (array), ttl ms left (-1: none), reason] or nil
//   FG.OVERRIDE DEL rule key          -> 1 removed / 0 none
//   FG.BLOCK key ttl_ms [RULE r] [REASON text]  -> OK
//   FG.UNBLOCK key [RULE r]           -> blocks removed
#pragma once

#include <string>

#include "server/resp/resp_commands.h"

namespace floodgate::server {

void FgState(RespClient& client, const Args& args, std::string* out);
void FgRefund(RespClient& client, const Args& args, std::string* out);
void FgOverride(RespClient& client, const Args& args, std::string* out);
void FgBlock(RespClient& client, const Args& args, std::string* out);
void FgUnblock(RespClient& client, const Args& args, std::string* out);

}  // namespace floodgate::server
