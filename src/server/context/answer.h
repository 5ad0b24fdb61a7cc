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
// takes `to.Later<...>(write)` directly; if it calls it at once, while the
// session is still handling the request (RequestInProgress), the reply
// fills its place in the queue there and then: nothing is posted, so a
// session no loop serves (the session fuzzers) sees it too.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "floodgate/status.h"
#include "server/net/reply_queue.h"
#include "server/net/session.h"

namespace floodgate::server {

// Marks the request a session is handling on this thread, from just before
// its handler runs until the handler returns; sessions put one around each
// request. An answer given in that time comes from inside the handler, on
// the session's thread, so its queue is there to take the reply. Not
// thread-safe: it marks its own thread, and lives on that thread's stack.
class RequestInProgress {
 public:
  // `output`: where the session's released replies go (its OnInput's).
  RequestInProgress(ReplyQueue* replies, std::string* output)
      : replies_(replies), output_(output), serial_(++last_serial_), outer_(current_) {
    current_ = this;
  }
  ~RequestInProgress() { current_ = outer_; }
  RequestInProgress(const RequestInProgress&) = delete;
  RequestInProgress& operator=(const RequestInProgress&) = delete;

  // Names the request of `replies` in progress on this thread; 0 (which no
  // request has) when there is none.
  static uint64_t SerialOf(const ReplyQueue* replies) {
    return current_ != nullptr && current_->replies_ == replies ? current_->serial_ : 0;
  }

  // The request `serial` names, if it is still in progress on this thread;
  // else null. A serial is never reused (a stack address would be).
  static RequestInProgress* Find(uint64_t serial) {
    return current_ != nullptr && current_->serial_ == serial ? current_ : nullptr;
  }

  // Writes the reply of `tag` (reserved during this request) into its place.
  template <typename Write>
  void Complete(uint64_t tag, Write&& write) {
    replies_->Complete(tag, std::forward<Write>(write), output_);
  }

 private:
  static inline thread_local RequestInProgress* current_ = nullptr;
  static inline thread_local uint64_t last_serial_ = 0;

  ReplyQueue* const replies_;
  std::string* const output_;
  const uint64_t serial_;
  RequestInProgress* const outer_;
};

// Not thread-safe: one request's, on its connection's loop.
struct ReplyTo {
  ReplyQueue* replies = nullptr;  // the connection's queue
  ConnectionRef self;             // names the connection from other threads
  std::string* out = nullptr;     // where a reply known now goes

  // A callback for an answer that comes later: reserves the reply's place
  // now, and has `write(status, results..., reply)` fill it when the answer
  // comes: at once if the request is still in progress on this thread,
  // else on the connection's loop (not at all if the connection has
  // closed, or no loop serves it). Copyable when `write` is, so it serves
  // as a std::function too.
  template <typename... T, typename Write>
  auto Later(Write write) const {
    const uint64_t tag = replies->Reserve();
    const uint64_t request = RequestInProgress::SerialOf(replies);
    return [self = self, tag, request, write = std::move(write)](const Status& status,
                                                                 const T&... result) {
      if (RequestInProgress* now = RequestInProgress::Find(request); now != nullptr) {
        now->Complete(tag, [&](std::string* reply) { write(status, result..., reply); });
        return;
      }
      self.Complete(tag, [write, status, result...](std::string* reply) mutable {
        write(status, result..., reply);
      });
    };
  }
};

}  // namespace floodgate::server
