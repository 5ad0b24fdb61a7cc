// The feature scripts' arguments and replies (expiring sets, OTP, the alert
// stream): numbers as arguments, integers and strings out of a reply array,
// error replies as a Status. No I/O.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/status.h"

namespace floodgate::redis {

// `v` as a script argument: its decimal digits.
std::string NumberArgument(int64_t v);

// The whole of `text` as a decimal integer; false when it is not one.
bool ParseInteger(std::string_view text, int64_t* out);

// An error reply as UNAVAILABLE "redis: <message>" (the call failed: nothing
// was done); OK for any other reply.
Status ErrorReplyStatus(const redisReply& reply);

// Element `index` of an array reply: an integer, or a string holding one
// (a sorted set's score, e.g. "1700000000999"). False otherwise.
bool ReplyInteger(const redisReply& reply, size_t index, int64_t* out);
// Element `index` of an array reply as bytes; false unless it is a string.
bool ReplyString(const redisReply& reply, size_t index, std::string_view* out);

// INTERNAL "redis: unexpected reply from the <script> script: <what> (<reply>)".
Status MalformedReply(std::string_view script, std::string_view what, const redisReply* reply);

}  // namespace floodgate::redis
