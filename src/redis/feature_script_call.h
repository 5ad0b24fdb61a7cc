// A feature script (scripts.h: the alert stream, the control records)
// called and waited for, for a store's background thread: EVALSHA, and
// EVAL once Redis answers NOSCRIPT (Twemproxy forwards no SCRIPT LOAD). An
// error reply becomes its Status, a WRONGTYPE one noted on the client.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "floodgate/status.h"
#include "redis/client.h"
#include "redis/scripts.h"

namespace floodgate::redis {

// Runs `feature`'s script on `keys` (KEYS; the first routes the call, so
// they must share a slot) with `args` (ARGV). Blocking: never on a thread
// that runs the client's I/O.
Result<OwnedReply> CallFeatureScript(Client& client, Feature feature,
                                     std::span<const std::string> keys,
                                     std::span<const std::string> args);

}  // namespace floodgate::redis
