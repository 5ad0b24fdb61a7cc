// The Redis network client the Redis store talks through: one server, a
// Redis Cluster or a proxy (Twemproxy), plain or TLS.
//
//   ClientOptions options;
//   options.url = *ParseStoreUrl("redis://127.0.0.1:6379");
//   auto client = Client::Create(options);          // connects in the background
//   (*client)->Send("key", {"INCR", "key"}, [](Status s, const redisReply* r) { ... });
//
// Requests are queued to an I/O thread and written together: everything
// submitted while the thread was busy goes out in one write per connection
// (pipelining). A caller with an event loop of its own can run the I/O on
// its thread instead (NewLoopDriver). Each request is answered exactly once, within timeout_ms of
// its submission (or by the earlier deadline its caller gave it), measured on
// the client's Clock (ClientOptions::clock): with a reply,
// DEADLINE_EXCEEDED, or at once with UNAVAILABLE when the node is known to be
// down (circuit open). See docs/redis.md for reconnects, the circuit breaker
// and cluster routing.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "common/store_url.h"
#include "floodgate/clock.h"
#include "floodgate/loop_driver.h"
#include "floodgate/status.h"
#include "redis/wire.h"

namespace floodgate::redis {

struct ClientOptions {
  StoreUrl url;
  // Times every timeout and back-off below, and the deadlines callers pass
  // (deadline_ns: its MonotonicNs()); must outlive the client. Null:
  // SystemClock::Default().
  const Clock* clock = nullptr;
  // A request not answered within this long of its submission is answered
  // DEADLINE_EXCEEDED (its late reply is discarded).
  int64_t timeout_ms = 20;
  // TCP connect + TLS handshake + AUTH/SELECT must finish within this long.
  int64_t connect_timeout_ms = 500;
  // Connections to each node, per I/O thread; requests are spread over them.
  int connections_per_node = 2;
  int io_threads = 1;
  // Reconnect backoff after a failed or lost connection: doubles from the
  // first value to the cap (with jitter). The cap keeps a returning Redis
  // in use again well within a second.
  int64_t reconnect_backoff_initial_ms = 5;
  int64_t reconnect_backoff_max_ms = 200;
  // Circuit breaker per node: opens after this many consecutive failures
  // (connect errors, lost connections, timeouts), then refuses requests at
  // once for circuit_open_ms, then sends one probe (PING) that decides.
  int circuit_failure_threshold = 5;
  int64_t circuit_open_ms = 200;
  // Requests queued or in flight per I/O thread; past it, UNAVAILABLE "queue full".
  int64_t max_pending_per_thread = 100'000;
  // A connection is reset when more than this many of its requests have
  // timed out without their (late) replies arriving, or when the oldest of
  // them is older than stale_reset_ms: the server is not answering it.
  int max_stale_per_connection = 1024;
  int64_t stale_reset_ms = 2000;
  // Cluster: MOVED/ASK redirects followed per request before giving up.
  int max_redirects = 5;
  // Lua sources sent with SCRIPT LOAD as part of every connection's
  // handshake (not through a proxy, which has no SCRIPT LOAD), so EVALSHA
  // finds them: requests then never need the NOSCRIPT -> EVAL fallback,
  // whose resend would run after later requests already sent.
  std::vector<std::string> preload_scripts;
};

// The outcome of a request. OK: `reply` is non-null; an error reply
// (REDIS_REPLY_ERROR) is an OK outcome too, except MOVED and ASK, which the
// client follows. UNAVAILABLE: not connected, circuit open, queue full,
// connection lost with the request in flight, or shutting down.
// DEADLINE_EXCEEDED: no reply within timeout_ms. `reply` is valid only
// during the call (CopyReply keeps it).
using ReplyCallback = absl::AnyInvocable<void(Status status, const redisReply* reply)>;

namespace internal {
struct Pending;
class ClientState;
}  // namespace internal

class Client;

// Commands collected for one Client::Send(Batch), which queues them with one
// lock and one wake-up (a RESP pipeline's decisions, submitted together).
// Not thread-safe.
class Batch {
 public:
  Batch();
  ~Batch();
  Batch(Batch&&) noexcept;
  Batch& operator=(Batch&&) noexcept;

  // As Client::Send. The timeout counts from Client::Send(Batch); a
  // deadline_ns (on Client::clock()) earlier than that is kept instead:
  // a caller that held the command back passes the deadline its request
  // started with, so that holding it does not add to its wait.
  void Add(std::string_view key, std::span<const std::string_view> args, ReplyCallback done,
           int64_t deadline_ns = 0);
  void Add(std::string_view key, std::span<const std::string> args, ReplyCallback done,
           int64_t deadline_ns = 0);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  friend class Client;
  std::vector<std::unique_ptr<internal::Pending>> items_;
};

// Thread-safe: any thread may call any method, concurrently.
class Client {
 public:
  // Starts the I/O threads and begins connecting; does not fail when Redis
  // is down (requests fail until it is up). INVALID_ARGUMENT on bad options
  // (no node, a bad timeout, an unreadable TLS file).
  static Result<std::unique_ptr<Client>> Create(ClientOptions options);

  // Answers every pending request with UNAVAILABLE ("client shut down") and
  // joins the I/O threads. Must not run on an I/O thread (from a callback).
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends a command. Non-blocking. Routed by `key`: in a cluster, to the
  // master of the key's slot (its hash tag's); otherwise to the one node.
  // `done` runs exactly once, on an I/O thread (or the thread driving the
  // caller's loop); it must not block (it may Send). Commands are written in
  // submission order per connection. A deadline_ns (clock().MonotonicNs())
  // earlier than timeout_ms from now is kept instead (a resend that must not
  // outlast the first attempt's deadline); one already past is answered
  // DEADLINE_EXCEEDED at the loop's next step.
  void Send(std::string_view key, std::span<const std::string_view> args, ReplyCallback done,
            int64_t deadline_ns = 0);
  void Send(std::string_view key, std::span<const std::string> args, ReplyCallback done,
            int64_t deadline_ns = 0);
  void Send(std::string_view key, std::initializer_list<std::string_view> args,
            ReplyCallback done) {
    Send(key, std::span<const std::string_view>(args.begin(), args.size()), std::move(done));
  }
  // Sends every command of `batch` (which is left empty).
  void Send(Batch&& batch);

  // Sends a command to one node ("host:port", as Masters() names them),
  // without slot routing or redirects (a MOVED reply is passed through).
  void SendToNode(const std::string& node, std::span<const std::string_view> args,
                  ReplyCallback done);
  void SendToNode(const std::string& node, std::span<const std::string> args, ReplyCallback done);
  void SendToNode(const std::string& node, std::initializer_list<std::string_view> args,
                  ReplyCallback done) {
    SendToNode(node, std::span<const std::string_view>(args.begin(), args.size()), std::move(done));
  }

  // Blocking forms for the command line and tests: the reply (possibly an
  // error reply) or the failure status. INTERNAL where RunsIoHere().
  Result<OwnedReply> Call(std::string_view key, std::span<const std::string_view> args);
  Result<OwnedReply> Call(std::string_view key, std::span<const std::string> args);
  // With a deadline (clock().MonotonicNs()) sooner than the timeout's.
  Result<OwnedReply> Call(std::string_view key, std::span<const std::string> args,
                          int64_t deadline_ns);
  Result<OwnedReply> Call(std::string_view key, std::initializer_list<std::string_view> args) {
    return Call(key, std::span<const std::string_view>(args.begin(), args.size()));
  }
  Result<OwnedReply> CallNode(const std::string& node, std::span<const std::string_view> args);
  Result<OwnedReply> CallNode(const std::string& node,
                              std::initializer_list<std::string_view> args) {
    return CallNode(node, std::span<const std::string_view>(args.begin(), args.size()));
  }

  // An I/O loop of this client for the caller's own event loop to drive
  // (floodgate/loop_driver.h), with its own connections_per_node
  // connections to each node. Requests made on the thread it is attached to
  // go through it, and their callbacks run on that thread; other threads
  // keep using the I/O threads (which also read the cluster slot map for
  // every loop). The client must outlive it.
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver();

  // Whether the calling thread runs this client's I/O (an I/O thread, or a
  // thread a driver is attached to): a blocking call here would wait for
  // itself.
  bool RunsIoHere() const;

  // A request on `keys` (a script's KEYS) failed with `message`. When that
  // is a WRONGTYPE error (redis/wrong_type.h), counts it (Stats::wrong_type)
  // and logs the key it names (KEYS[i], else the first) once per key per
  // minute; returns whether it was one. For the store's callers, on the
  // error path only.
  bool NoteWrongType(std::string_view message, std::span<const std::string> keys);

  // Whether requests can be expected to reach Redis now, from what the
  // client already knows (no round trip; a lock on the breakers' map, so
  // cheap enough for a health check, never for each request): UNAVAILABLE
  // "redis circuit open for host:port[, ...]" while the circuit of a node
  // the store needs is open or half-open (standalone and proxy: the one
  // node; cluster: the masters of the slot map, and before there is one,
  // every seed), or "redis cluster: no slot map yet (...)" for a cluster
  // none of whose seeds has answered yet; otherwise OK. A Redis that went
  // down unnoticed (an idle client) is noticed by the next failures: lost
  // connections, failed connects, timeouts.
  Status Health() const;

  // The nodes that hold data, for commands run on every master (SCAN):
  // standalone and proxy, the one node; cluster, the masters of the current
  // slot map (waiting up to connect_timeout_ms + timeout_ms for the first
  // one; empty if none could be read).
  std::vector<std::string> Masters();

  struct Stats {
    uint64_t requests = 0;            // commands submitted
    uint64_t replies = 0;             // answered OK (with a reply, maybe an error reply)
    uint64_t error_replies = 0;       // of which error replies
    uint64_t backend_errors = 0;      // answered not OK: timeouts + unavailable
    uint64_t timeouts = 0;            // answered DEADLINE_EXCEEDED
    uint64_t unavailable = 0;         // answered UNAVAILABLE
    uint64_t circuit_rejections = 0;  // of which refused at once by an open circuit
    uint64_t queue_full = 0;          // of which refused by the pending bound
    int64_t open_circuits = 0;        // gauge: nodes whose circuit is open or half-open
    uint64_t circuit_opens = 0;       // times a circuit opened
    int64_t connections = 0;          // gauge: connections ready for requests
    uint64_t connects = 0;            // connections established (handshake done)
    uint64_t reconnects = 0;          // of which replaced a failed or lost connection
    uint64_t connect_failures = 0;    // attempts that failed (refused, timeout, TLS, AUTH)
    uint64_t connections_lost = 0;    // established connections that failed
    uint64_t stale_replies = 0;       // late replies to timed-out requests, discarded
    uint64_t stale_resets = 0;        // connections reset for not answering
    uint64_t moved = 0;               // MOVED redirects followed
    uint64_t ask = 0;                 // ASK redirects followed
    uint64_t slot_map_refreshes = 0;  // CLUSTER SLOTS maps installed
    uint64_t writes = 0;              // write calls that sent bytes
    uint64_t commands_written = 0;    // commands in those writes (commands/writes = batch size)
    uint64_t wrong_type = 0;          // requests failed on a key of the wrong type (NoteWrongType)
  };
  Stats GetStats() const;

  const ClientOptions& options() const;
  // The clock of the client's deadlines, timeouts and back-off.
  const Clock& clock() const;

 private:
  explicit Client(std::unique_ptr<internal::ClientState> state);
  std::unique_ptr<internal::ClientState> state_;
};

}  // namespace floodgate::redis
