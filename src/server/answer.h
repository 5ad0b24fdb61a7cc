// ReplyTo: how every front answers a request whose answer comes now or
// later, without knowing which store it has.
//
//   Decision d;
//   Status s;
//   const auto write = [...](const Status& s, const Decision& d, std::string* out) { ... };
//   if (limiter.Check(args, &d, &s, [&] { return to.Later<Decision>(write); }, batch) ==
//       store::Answer::kNow) {
//     write(s, d, to.out);
//   }
//
// Answered now (the embedded store, a refusal, a local cache), the reply is
// written straight into the connection's output: no callback is made, so
// nothing is allocated. Answered later (a round trip to Redis), Later
// reserves the reply's place in the connection's queue, so replies still
// go out in request order, and writes it there on the connection's loop
// when the answer comes. A callback-only operation (sets, OTP, FG.RESET)
// takes `to.Later<...>(write)` directly; if it calls it at once, the reply
// is queued for the end of the round, in order all the same.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "floodgate/status.h"
#include "server/reply_queue.h"
#include "server/session.h"

namespace floodgate::server {

// Not thread-safe: one request's, on its connection's loop.
struct ReplyTo {
  ReplyQueue* replies = nullptr;  // the connection's queue
  ConnectionRef self;             // names the connection from other threads
  std::string* out = nullptr;     // where a reply known now goes

  // A callback for an answer that comes later: reserves the reply's place
  // now, and has `write(status, results..., reply)` run on the connection's
  // loop when the answer comes (not at all if the connection has closed).
  // Copyable when `write` is, so it serves as a std::function too.
  template <typename... T, typename Write>
  auto Later(Write write) const {
    const uint64_t tag = replies->Reserve();
    return [self = self, tag, write = std::move(write)](const Status& status, const T&... result) {
      self.Complete(tag, [write, status, result...](std::string* reply) mutable {
        write(status, result..., reply);
      });
    };
  }
};

}  // namespace floodgate::server
