// Sending a script call: EVALSHA first and, when Redis answers NOSCRIPT (a
// restarted server, a SCRIPT FLUSH, a proxy that cannot SCRIPT LOAD), the
// same call once more as EVAL, which also caches the script. Shared by
// every store that runs scripts (decisions, expiring sets, OTP).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/client.h"
#include "redis/script_call.h"

namespace floodgate::redis {

// Sends `argv`, an EVALSHA call ("EVALSHA", sha1, numkeys, ...) of the script
// whose text is `source`, routed by `route`: added to `batch`, or at once
// when `batch` is null. On NOSCRIPT sends it once more as EVAL. `decode(status,
// reply)` then runs once, on an I/O thread, with the final answer. The
// answer comes by `deadline_ns` (client.clock()'s MonotonicNs; 0: the client's
// timeout from now), the EVAL resend included: it does not start a
// timeout of its own.
template <typename Decode>
void SendScript(Client& client, Batch* batch, std::string_view route, std::string_view source,
                std::vector<std::string> argv, Decode decode, int64_t deadline_ns = 0) {
  if (deadline_ns == 0) {
    deadline_ns = client.clock().MonotonicNs() + client.options().timeout_ms * 1'000'000;
  }
  // Moving a vector keeps its elements where they are: `args` stays valid
  // after argv moves into the callback (the command is encoded at once).
  const std::span<const std::string> args(argv);
  Client* c = &client;
  auto on_reply = [c, route = std::string(route), source, argv = std::move(argv),
                   decode = std::move(decode),
                   deadline_ns](Status s, const redisReply* reply) mutable {
    if (s.ok() && reply != nullptr && IsNoScript(*reply)) {
      argv[0] = "EVAL";
      argv[1] = std::string(source);
      c->Send(
          route, argv,
          [decode = std::move(decode)](Status s2, const redisReply* r2) mutable { decode(s2, r2); },
          deadline_ns);
      return;
    }
    decode(s, reply);
  };
  if (batch != nullptr) {
    batch->Add(route, args, std::move(on_reply), deadline_ns);
  } else {
    client.Send(route, args, std::move(on_reply), deadline_ns);
  }
}

}  // namespace floodgate::redis
