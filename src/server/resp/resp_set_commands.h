// The expiring sets' RESP commands (registered in resp_commands.cc):
//   FG.SADD key member ttl_ms       -> 1 (new member) or 0 (refreshed)
//   FG.SREM key member              -> 1 (removed) or 0
//   FG.SISMEMBER key member         -> 1 or 0
//   FG.SCARD key                    -> live members
//   FG.SMEMBERS key [WITHTTL]       -> members, earliest expiry first
//                                      (WITHTTL: member, ms left, member, ...)
#pragma once

#include <string>

#include "server/resp/resp_commands.h"

namespace floodgate::server {

void FgSadd(RespClient& client, const Args& args, std::string* out);
void FgSrem(RespClient& client, const Args& args, std::string* out);
void FgSismember(RespClient& client, const Args& args, std::string* out);
void FgScard(RespClient& client, const Args& args, std::string* out);
void FgSmembers(RespClient& client, const Args& args, std::string* out);

}  // namespace floodgate::server
