// The OTP RESP commands (registered in resp_commands.cc):
//   FG.OTP.ISSUE subject         -> the code (bulk string), or +QUEUED when a
//                                   delivery URL sends it; -ERR … retry after
//                                   N ms past the issue limit
//   FG.OTP.VERIFY subject code   -> 1 (valid: consumed) or 0 (invalid); -ERR …
//                                   retry after N ms past the verify limit
#pragma once

#include <string>

#include "server/resp/resp_commands.h"

namespace floodgate::server {

void FgOtpIssue(RespClient& client, const Args& args, std::string* out);
void FgOtpVerify(RespClient& client, const Args& args, std::string* out);

}  // namespace floodgate::server
