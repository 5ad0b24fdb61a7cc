// An I/O loop of the Redis client: its epoll, its submission queue, its
// connections to every node it has talked to, request routing (slots,
// MOVED/ASK), deadlines, circuit-breaker probes and, on I/O thread 0,
// cluster slot map refreshes. It runs on a thread of its own (Start), or is
// driven by the caller's event loop on the caller's thread (StartDriven:
// see floodgate/loop_driver.h). Private to src/redis/.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "redis/client_state.h"
#include "redis/connection.h"

namespace floodgate::redis::internal {

// The state of the client whose I/O thread the caller is, or null.
const ClientState* CurrentLoopState();

// How long an I/O loop may sleep at `now_ns`, in epoll's milliseconds (-1:
// until an event): until `deadline_ns`, the earliest deadline (< 0: none),
// and no longer than `max_ns` (< 0: no bound; the I/O loop passes its
// clock's MaxSleepNs when there is a deadline). Rounded up to the next whole
// millisecond: a loop woken before a deadline would only spin until it. A
// deadline that has passed is 0.
int SleepMs(int64_t now_ns, int64_t deadline_ns, int64_t max_ns);

class IoThread;
// The driven loop of `state`'s client attached to the calling thread, or null.
IoThread* AttachedLoop(const ClientState& state);

// A node as one I/O thread sees it: its connections and the requests
// waiting for one of them to be ready. Loop-thread only.
struct Node {
  std::string id;  // "host:port"
  HostPort address;
  std::shared_ptr<CircuitBreaker> breaker;  // shared with the other threads
  std::vector<std::unique_ptr<Connection>> conns;
  std::deque<std::unique_ptr<Pending>> waiting;
  size_t next_conn = 0;
  std::string last_error;
  bool down = false;  // failed since last ready (for logging state changes once)
  // Sentinel: a master the sentinels no longer name. Nothing is routed to
  // it and its circuit is not probed, until it is named again.
  bool retired = false;
};

// Submit/Wake/Stop are thread-safe; everything else runs on the loop's
// thread: its own (Start), or the one it is attached to (StartDriven).
class IoThread {
 public:
  IoThread(ClientState& state, int index);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Creates the epoll and eventfd descriptors and starts the thread.
  Status Start();
  // Creates the descriptors; no thread: the caller drives the loop with
  // Attach, PollEvents, Step and Detach.
  Status StartDriven();
  // Any thread. Queues requests (answering at once those over the bound
  // once the loop has stopped) and wakes the loop if it may be asleep.
  void Submit(std::vector<std::unique_ptr<Pending>>& batch);
  void Submit(std::unique_ptr<Pending> p);
  // Any thread: asks a threaded loop to stop; it answers everything UNAVAILABLE.
  void Stop();
  void Join();
  // Any thread: makes the loop run an iteration soon.
  void Wake();

  // --- Driven loops, on the driving thread. ---
  // Binds the loop to the calling thread: requests its client is given on
  // this thread come here (SubmitLocal), until Detach.
  void Attach();
  // Handles the events epoll_fd() has ready (replies, connects): callbacks run here.
  void PollEvents();
  // Routes what was submitted since the last step, expires deadlines, opens
  // connections, probes, and writes each connection's output once.
  void Step();
  // How long the driving loop may sleep before the next Step: 0 when
  // submissions wait, -1 when nothing needs timely attention.
  int TimeoutMs() const;
  // Answers everything pending UNAVAILABLE, closes the connections and
  // unbinds the thread. Later submissions are answered at once.
  void Detach();
  // The attached thread only: queues requests for the next Step, without a
  // lock or a wake-up.
  void SubmitLocal(std::vector<std::unique_ptr<Pending>>& batch);

  // Live Pending objects of this thread (the pending bound), for Submit's callers.
  std::atomic<int64_t>& live_pending() { return live_pending_; }
  int index() const { return index_; }
  ClientState& state() const { return state_; }
  int epoll_fd() const { return epoll_fd_; }

  // --- Loop thread only: called by Connection. ---
  void OnConnectionReady(Connection& conn, int64_t now_ns);
  void OnConnectionFailed(Connection& conn, bool was_ready, const std::string& why,
                          std::deque<std::unique_ptr<Pending>> in_flight, int64_t now_ns);
  void OnReply(Connection& conn, std::unique_ptr<Pending> p, const redisReply* reply,
               int64_t now_ns);
  void OnStaleReset(Connection& conn);
  void MarkDirty(Connection& conn);
  void ScheduleConnect(Connection& conn);
  uint64_t NextRandom();

 private:
  Status Open();
  void Run();
  // Dispatches `n` epoll events.
  void HandleEvents(const epoll_event* events, int n, int64_t now_ns);
  // One iteration's work after the events: route, tick, write.
  void Advance(int64_t now_ns);
  void DrainQueue(int64_t now_ns);
  bool Tick(int64_t now_ns);
  void FlushDirty(int64_t now_ns);
  int EpollTimeoutMs(int64_t now_ns, bool housekeeping) const;
  void ShutdownLoop();

  void Route(std::unique_ptr<Pending> p, int64_t now_ns);
  Node* ResolveNode(const Pending& p);
  Node* GetOrCreateNode(const std::string& id);
  void SyncSlotMap();
  // Sentinel: moves to the master the watcher last published, if new.
  void FollowMaster();
  void StartProbe(Node& node, int64_t now_ns);
  void StartSlotRefresh(int64_t now_ns);
  bool Redirect(Connection& conn, std::unique_ptr<Pending>& p, const redisReply* reply,
                int64_t now_ns);

  // Answers `p` (once): status and reply go to its callback; Stats count
  // user requests. The caller keeps ownership of `p`.
  void Finish(Pending& p, const Status& status, const redisReply* reply);
  void FailAll(std::deque<std::unique_ptr<Pending>>& list, const Status& status);
  void AddTimer(Pending& p);
  void RemoveTimer(Pending& p);
  void ExpireTimers(int64_t now_ns);

  ClientState& state_;
  const int index_;
  // state_.clock's MaxSleepNs: how long the loop may sleep before it reads
  // the clock again while a deadline is set (< 0: until the deadline).
  const int64_t max_sleep_ns_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<int64_t> live_pending_{0};
  // Driven loops: attached to a thread, detached (stopped for good).
  bool attached_ = false;
  bool detached_ = false;

  std::mutex queue_mu_;
  std::vector<std::unique_ptr<Pending>> queue_ ABSL_GUARDED_BY(queue_mu_);
  // A wake-up has been signalled and not yet consumed by a drain: further
  // submissions need not signal again.
  bool wake_pending_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(queue_mu_) = false;
  // The loop has exited: submissions are answered by the submitter.
  bool stopped_ ABSL_GUARDED_BY(queue_mu_) = false;

  // Loop-thread state.
  absl::flat_hash_map<std::string, std::unique_ptr<Node>> nodes_;
  std::vector<Node*> all_nodes_;  // nodes_ in creation order (never shrinks)
  std::vector<Node*> seeds_;
  size_t next_seed_ = 0;
  // Cluster: this thread's copy of the slot map (MOVED updates it at once).
  std::vector<Node*> slot_nodes_;
  uint64_t slot_map_version_ = 0;
  uint64_t master_version_ = 0;  // sentinel: the ClientState::master_version followed
  std::vector<std::unique_ptr<Pending>> drained_;
  // Driven loops: the attached thread's submissions (SubmitLocal), and
  // whether PollEvents saw the eventfd (other threads submitted).
  std::vector<std::unique_ptr<Pending>> local_queue_;
  bool woken_ = false;
  bool housekeeping_ = true;  // the last Tick found something to watch
  std::vector<Connection*> flush_list_;
  std::vector<Connection*> connect_list_;
  Pending* timers_head_ = nullptr;
  Pending* timers_tail_ = nullptr;
  bool refresh_in_flight_ = false;
  bool refresh_failing_ = false;
  int64_t next_refresh_ns_ = 0;
  size_t refresh_rotation_ = 0;
  uint64_t random_state_;
};

}  // namespace floodgate::redis::internal
