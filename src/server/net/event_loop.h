// EventLoop: one epoll loop per thread. Accepts on its own SO_REUSEPORT
// sockets, reads, hands bytes to the connection's Session, writes replies;
// with a remote store, also runs the store's network I/O for its requests.
// It keeps every connection inside its bounds (ConnectionPolicy): input is
// handled in bounded slices per round, reading stops while replies go
// unread, and slow, idle or greedy connections are closed with a reason.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "common/log.h"
#include "floodgate/clock.h"
#include "floodgate/loop_driver.h"
#include "server/net/connection_timers.h"
#include "server/net/peer_address.h"
#include "server/net/session.h"
#include "server/net/tls_context.h"

namespace floodgate::server {

struct LoopLimits {
  int64_t max_connections = 10'000;            // across all loops (shared counter)
  size_t max_pending_input = 4 * 1024 * 1024;  // unparsed bytes of one connection
  size_t max_in_flight =
      4096;  // requests of one connection awaiting the store; past it, stop reading
  // Non-blocking polls after a busy round before the loop sleeps (each
  // ~0.5 us): on loopback the sending CPU pays for waking a sleeping
  // receiver, so a loop answering from memory serves clients faster polling.
  int idle_polls = 1024;
  // After Stop(), how long connections still busy (requests in flight,
  // replies unsent) are given before they are closed regardless.
  int64_t drain_timeout_ms = 5000;
  // Open connections per client address, across all loops (null: no bound).
  class ConnectionsPerIp* per_ip = nullptr;
};

// Counters a loop keeps per listener; read by the metrics endpoint.
struct ListenerCounters {
  std::atomic<int64_t> open{0};            // connections open now
  std::atomic<int64_t> accepted{0};        // connections accepted since start
  std::atomic<int64_t> refused{0};         // refused at max_connections, none idle to evict
  std::atomic<int64_t> refused_per_ip{0};  // refused at max_connections_per_ip
  std::atomic<int64_t> accept_errors{0};   // accept() failed (EMFILE, ENFILE, ENOBUFS …)
  std::atomic<int64_t> closed[kNumCloseReasons] = {};  // closed by the server, by reason
  std::atomic<int64_t> tls_handshake_failures{0};      // TLS listeners: handshakes refused
};

struct ListenerSpec {
  int fd = -1;  // listening socket owned by the loop
  SessionFactory* factory = nullptr;
  ListenerCounters* counters = nullptr;
  std::string oversize_reply;  // written before closing an oversized request
  std::string timeout_reply;   // written (best effort) before closing on request_timeout
  std::string protocol;        // "resp", "http": in log lines
  ConnectionPolicy policy;
  // Null: plaintext. Else connections speak TLS with its current context
  // (the one they began with, through a reload), the handshake under the
  // request timeout like a partial request.
  TlsContextHolder* tls = nullptr;
};

// What a loop runs besides its connections, all on its thread.
struct LoopHooks {
  // At the start of each round that has work, before any of it (posted
  // tasks, input, completions): LoopContext::BeginRound.
  absl::AnyInvocable<void()> begin_round;
  // After each round's input has been handled, before the store's I/O step
  // and the replies: sends what the round's requests left for a remote store
  // (LoopContext::EndRound).
  absl::AnyInvocable<void()> end_round;
  // Once, when Run ends, before the driver detaches: nothing may be left
  // to send later (LoopContext::Stop).
  absl::AnyInvocable<void()> stop;
  // With a driver, after each round: whether the next wait should be for
  // the store's answers alone, the clients' input left unread until one
  // comes (LoopContext::WaitForStoreOnly).
  absl::AnyInvocable<bool()> wait_for_store;
  // A remote store's network I/O, run by this loop (null: none).
  std::unique_ptr<LoopDriver> driver;
};

// Thread-compatible: Run() on one thread; Stop() from any thread.
class EventLoop {
 public:
  // `clock` (its MonotonicNs, read once per round) times the connections'
  // timers, accept back-off, the drain and log spacing; it must outlive
  // the loop. On a clock that does not follow real time the loop sleeps at
  // most its MaxSleepNs while one of those is pending.
  EventLoop(int index, std::vector<ListenerSpec> listeners, LoopLimits limits,
            std::atomic<int64_t>* open_connections, const Clock& clock, LoopHooks hooks = {});
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Serves until Stop() and the drain that follows. Closes every connection
  // and listener before returning.
  void Run();
  // Thread-safe. The loop stops accepting at once (closing its listeners:
  // with net.ipv4.tcp_migrate_req=1 the kernel hands the connections queued
  // on them to the other sockets of their SO_REUSEPORT group, a process
  // that replaces this one) and drains for at most drain_timeout_ms:
  // requests in flight are answered and their replies written; a
  // connection is closed once it has had a reply during the drain with
  // nothing behind it (Session::DrainClosesAfterReply; HTTP's session
  // closes it itself, after a reply saying "Connection: close"), or has
  // been quiet for kDrainGraceMs (a request may be on the wire when the
  // drain begins); event streams close at once. Then the rest are closed
  // and Run() returns.
  void Stop();

  // How long the drain leaves a quiet connection open (see Stop).
  static constexpr int64_t kDrainGraceMs = 1000;

  // Thread-safe: runs `fn` on the loop's thread, soon. Tasks posted after
  // Run() has returned are dropped unrun.
  void Post(absl::AnyInvocable<void()> fn);

 private:
  friend struct ConnectionRef;
  struct Connection;
  // The connection `ref` names, while it is open (its fd not reused since):
  // null once it has closed.
  Connection* Live(const ConnectionRef& ref) const;
  // A completion made on the loop's own thread (a store answer read by the
  // driver, or one known at once), delivered at the end of the round.
  struct LocalCompletion {
    int fd;
    uint64_t generation;
    uint64_t tag;
    Completion completion;
  };
  void RunPosted();
  void DeliverLocal();
  // Delivers a completion to the connection `ref` names, if it is still open.
  void Deliver(const ConnectionRef& ref, uint64_t tag, Completion completion);
  void QueueFlush(Connection& c);
  void QueueAgain(Connection& c);
  void Accept(size_t listener_index);
  bool AdmitPeer(const ListenerSpec& listener, const PeerAddress& peer, int fd);
  void Handle(Connection& c);
  void Flush(Connection& c);
  ssize_t ReadTls(Connection& c, char* buf, size_t n);
  ssize_t WriteTls(Connection& c);
  void UpdateInterest(Connection& c);
  bool CanRead(const Connection& c) const;
  void AfterOutput(Connection& c);
  void Touch(Connection& c);
  bool EvictIdle(const char* why);
  void SweepTimers();
  void PauseAccepting(int error);
  void ResumeAccepting();
  void BeginDrain();
  void DrainSweep();
  bool DrainQuiet(const Connection& c, bool partial) const;
  void CloseFor(Connection& c, CloseReason reason);
  void Close(int fd);

  const int index_;
  const Clock& clock_;
  // clock_'s MaxSleepNs in epoll's milliseconds, rounded up (-1: no bound).
  const int max_sleep_ms_;
  std::vector<ListenerSpec> listeners_;
  const LoopLimits limits_;
  std::atomic<int64_t>* open_connections_;
  LoopHooks hooks_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Connection>> connections_;  // indexed by fd
  size_t num_connections_ = 0;
  // Least recently active first: eviction looks at the front, activity
  // moves a connection to the back. Intrusive (Connection::lru_*).
  Connection* lru_head_ = nullptr;
  Connection* lru_tail_ = nullptr;
  std::vector<int> pending_flush_;  // connections with replies to write this round
  // Connections whose input still holds complete requests (or whose socket
  // had more) when their round's share ran out: handled again next round,
  // which then does not sleep.
  std::vector<int> again_;
  std::vector<int> handling_;  // the loop's, swapped with again_
  uint64_t round_ = 0;
  int64_t now_ms_ = 0;  // clock_.MonotonicNs() in ms, read once per round
  int64_t next_sweep_ms_ = 0;
  int64_t sweep_every_ms_ = 1000;  // the timers' granularity
  // Accepting is paused after an accept error until this time (0: not paused).
  int64_t accept_resume_ms_ = 0;
  int64_t accept_backoff_ms_ = 0;
  bool draining_ = false;
  int64_t drain_deadline_ms_ = 0;
  int64_t next_drain_sweep_ms_ = 0;
  uint64_t next_generation_ = 1;
  std::vector<LocalCompletion> local_;       // completed this round, on this thread
  std::vector<LocalCompletion> delivering_;  // the loop's, swapped with local_
  // Lines a flood of clients could repeat (connections refused, evicted,
  // closed by reason; accepts failing): at most one each per kLogEveryMs,
  // spaced per loop, as each loop tells of its own connections.
  static constexpr int64_t kLogEveryMs = 10'000;
  LogEvery refused_log_{kLogEveryMs};
  LogEvery evict_log_{kLogEveryMs};
  LogEvery accept_log_{kLogEveryMs};
  LogEvery close_logs_[kNumCloseReasons] = {
      LogEvery(kLogEveryMs), LogEvery(kLogEveryMs), LogEvery(kLogEveryMs), LogEvery(kLogEveryMs),
      LogEvery(kLogEveryMs), LogEvery(kLogEveryMs), LogEvery(kLogEveryMs)};

  std::mutex posted_mu_;
  std::vector<absl::AnyInvocable<void()>> posted_ ABSL_GUARDED_BY(posted_mu_);
  std::vector<absl::AnyInvocable<void()>> running_;  // the loop's, swapped with posted_
  // Set by Post when it wrote wake_fd_ and the loop has not drained since:
  // posts in between need no further write.
  std::atomic<bool> wake_pending_{false};
};

}  // namespace floodgate::server
