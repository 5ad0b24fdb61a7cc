// One connection to one Redis node: a non-blocking socket (optionally TLS),
// its output buffer, its reply reader and the FIFO of commands awaiting
// replies. Private to src/redis/; owned and driven by an IoThread.
//
// Life cycle: idle -> (scheduled) -> connecting -> TLS handshake -> AUTH /
// SELECT -> ready. Any failure closes the socket, hands the commands in
// flight back to the IoThread (which answers them UNAVAILABLE: a written
// command is never resent, it may have run) and returns to idle with a
// backoff before the next attempt.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "redis/client_state.h"
#include "redis/tls.h"
#include "redis/wire.h"

namespace floodgate::redis::internal {

struct Node;

// Not thread-safe: used only on its IoThread.
class Connection {
 public:
  enum class State { kIdle, kScheduled, kConnecting, kTlsHandshake, kHandshake, kReady };

  Connection(IoThread& loop, Node& node);
  ~Connection();  // closes the socket; answers nothing (the IoThread does that first)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  State state() const { return state_; }
  bool ready() const { return state_ == State::kReady; }
  bool connecting() const { return state_ != State::kIdle && state_ != State::kReady; }
  // When an idle connection may try again (backoff).
  int64_t retry_at_ns() const { return retry_at_ns_; }
  Node& node() const { return node_; }

  // Idle -> scheduled: the IoThread opens it after the current event batch
  // (sockets are never created while epoll events are being dispatched, so
  // a stale event can never reach a new socket).
  void MarkScheduled() { state_ = State::kScheduled; }
  // Scheduled -> connecting (or failed at once).
  void Open(int64_t now_ns);

  void HandleEvents(uint32_t events, int64_t now_ns);
  // Ready only: appends the command (after ASKING when asked) to the output.
  void Enqueue(std::unique_ptr<Pending> p);
  // Writes pending output (one write call unless the kernel takes less).
  void Flush(int64_t now_ns);
  bool has_output() const { return out_pos_ < out_.size(); }
  // Connect deadline and unanswered-request checks; returns whether the
  // connection still needs timely checks (connecting or holding stale requests).
  bool CheckTimers(int64_t now_ns);

  // A request written here timed out / its late reply arrived.
  void AddStale() { ++stale_; }
  void RemoveStale() {
    if (stale_ > 0) --stale_;
  }

  // Closes with `why` (see the banner). By value: `why` may be a member this resets.
  void Fail(std::string why, int64_t now_ns);
  // Closes for shutdown; returns what was in flight.
  std::deque<std::unique_ptr<Pending>> Shutdown();

  bool in_flush_list = false;  // owned by the IoThread

 private:
  void OnConnected(int64_t now_ns);
  void StartHandshake(int64_t now_ns);
  void BecomeReady(int64_t now_ns);
  void ReadAll(int64_t now_ns);
  void ProcessReplies(int64_t now_ns);
  void HandleHandshakeReply(const redisReply* reply, int64_t now_ns);
  void WatchOutput(bool want);
  void CloseSocket();

  IoThread& loop_;
  Node& node_;
  State state_ = State::kIdle;
  int fd_ = -1;
  std::unique_ptr<TlsSession> tls_;
  ReaderPtr reader_;
  std::string out_;
  size_t out_pos_ = 0;
  size_t unflushed_commands_ = 0;
  bool watching_output_ = false;
  // TLS: a read that wants the socket writable (or a write that wants it
  // readable) is retried when it is.
  bool tls_read_wants_write_ = false;
  std::deque<std::unique_ptr<Pending>> in_flight_;
  // Handshake replies (AUTH, SELECT) still expected, and which command each is.
  std::deque<std::string> handshake_;
  int stale_ = 0;
  int64_t connect_deadline_ns_ = 0;
  int64_t retry_at_ns_ = 0;
  int64_t backoff_ns_ = 0;
  bool ever_ready_ = false;
  bool failed_since_ready_ = false;
};

}  // namespace floodgate::redis::internal
