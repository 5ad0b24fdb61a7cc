// The RESP command table: each command's name, arity and handler.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/context/admin_access.h"
#include "server/context/answer.h"
#include "server/context/service_context.h"
#include "server/net/reply_queue.h"
#include "server/net/session.h"

namespace floodgate::server {

// Per-connection state the commands see. Not thread-safe.
struct RespClient {
  LoopContext* loop = nullptr;
  int64_t now_ms = 0;  // the instant of the batch being executed (read once per pipeline)
  int64_t id = 0;
  bool authenticated = false;
  // What AUTH with a control-plane token gave (server/context/admin_access.h).
  AdminAccess admin = AdminAccess::kNone;
  bool quit = false;  // close after this reply
  // A request of this connection was held waiting (WAIT): the session
  // cancels what is still held when it closes.
  bool waited = false;
  std::string name;
  // For commands answered later (a remote store): where their replies wait
  // their turn, and how the completion finds its way back.
  ReplyQueue* replies = nullptr;
  ConnectionRef self;

  // Where this command's reply goes, now (`out`) or later.
  ReplyTo To(std::string* out) const { return ReplyTo{replies, self, out}; }
};

using Args = std::span<const std::string_view>;
using RespHandler = void (*)(RespClient& client, const Args& args, std::string* out);

struct RespCommand {
  const char* name;  // upper case
  int arity;         // Redis convention: >0 exact argument count, <0 at least -arity
  bool needs_auth;
  RespHandler handler;
};

// Looks up a command by name, case-insensitively; null when unknown.
const RespCommand* FindRespCommand(std::string_view name);

// Runs one command (auth, arity and unknown-command errors included),
// appending its reply to `out`.
void DispatchResp(RespClient& client, const Args& args, std::string* out);

// FG.CHECK's reply to a decision: [allowed 1|0, limit, remaining,
// retry_after_ms, reset_after_ms], with remaining and reset_after_ms -1 for
// a fallback decision (unknown); VERBOSE adds a sixth element, a bulk
// string naming the fallback ("backend_error", "store_full"), empty for a
// real decision.
void AppendCheckReply(const Decision& d, bool verbose, std::string* out);
// CL.THROTTLE's reply: redis-cell's five integers, remaining and reset -1
// for a fallback.
void AppendThrottleReply(const ThrottleResult& r, std::string* out);

// Parses WAIT's argument (ms, 0 to Waiting::kMaxWaitMs); false with
// the error appended to `out` otherwise.
bool ParseWaitMs(std::string_view arg, int64_t* wait_ms, std::string* out);

// Parses a whole decimal int64 argument ("-12" ok; " 1", "1.0", "" not).
bool ParseRespInt(std::string_view s, int64_t* out);

// Starts loading the state a command will touch (FG.CHECK, CL.THROTTLE),
// so that a pipeline's cache misses overlap. Does nothing for others.
void PrefetchResp(RespClient& client, const Args& args);

}  // namespace floodgate::server
