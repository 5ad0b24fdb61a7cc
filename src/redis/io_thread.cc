// The Redis client's I/O loop. See io_thread.h.
//
// One iteration: wait on epoll (until the earliest deadline, or a few ms
// while something needs watching), read every ready connection and answer
// its replies, route everything submitted since the last iteration, expire
// deadlines and run timers, then write each connection that has output
// once. Everything submitted while the loop was busy thus shares one write
// per connection: that is the pipelining.
//
// A driven loop runs the same iteration in two halves on its caller's
// thread: PollEvents (the events, read without waiting: the caller's own
// epoll waited, woken by this loop's epoll descriptor) and Step (the
// rest), so that the caller can make its requests in between and have
// them written in the same iteration.
#include "redis/io_thread.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace floodgate::redis::internal {
namespace {

// While connections are connecting, circuits are open or requests wait,
// the loop wakes at least this often to check on them.
constexpr int64_t kHousekeepingNs = 5'000'000;
// CLUSTER SLOTS is read at most this often.
constexpr int64_t kMinRefreshIntervalNs = 100'000'000;
// Distinct nodes one thread will talk to (MOVED/ASK name new ones).
constexpr size_t kMaxNodes = 4096;

// The client whose I/O thread this is (for Client::Call's deadlock check).
thread_local const ClientState* t_loop_state = nullptr;
// The driven loops attached to this thread (one per client at most).
thread_local std::vector<IoThread*> t_attached;

constexpr int kMaxEvents = 256;

// A write to a socket the server closed must fail with EPIPE, not kill the
// process (OpenSSL writes without MSG_NOSIGNAL). SIGPIPE is synchronous, so
// blocking it on the writing thread is enough.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int64_t Ms(int64_t ns) { return ns / 1'000'000; }

Status DeadlineError(const Node* node, int64_t timeout_ms) {
  return Status(StatusCode::kDeadlineExceeded,
                "no reply from redis " + (node != nullptr ? node->id : std::string("node")) +
                    " within " + std::to_string(timeout_ms) + " ms");
}

}  // namespace

const ClientState* CurrentLoopState() { return t_loop_state; }

int SleepMs(int64_t now_ns, int64_t deadline_ns, int64_t max_ns) {
  int64_t wait_ns = max_ns;
  if (deadline_ns >= 0) {
    const int64_t until = std::max<int64_t>(0, deadline_ns - now_ns);
    if (wait_ns < 0 || until < wait_ns) wait_ns = until;
  }
  if (wait_ns < 0) return -1;
  // Rounded up: waking before a deadline would only spin. (epoll's timeout
  // is whole milliseconds; an hour is plenty for an int.)
  return static_cast<int>(std::min<int64_t>((wait_ns + 999'999) / 1'000'000, 3'600'000));
}

IoThread* AttachedLoop(const ClientState& state) {
  for (IoThread* loop : t_attached) {
    if (&loop->state() == &state) return loop;
  }
  return nullptr;
}

IoThread::IoThread(ClientState& state, int index)
    : state_(state),
      index_(index),
      max_sleep_ns_(state.clock.MaxSleepNs()),
      // Seeded from the clock: a test's ManualClock makes the jitter repeatable.
      random_state_(0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(state.clock.MonotonicNs()) ^
                    (static_cast<uint64_t>(index) << 32)) {}

IoThread::~IoThread() {
  Join();
  // Connections close their sockets before the epoll descriptor goes.
  all_nodes_.clear();
  nodes_.clear();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status IoThread::Start() {
  if (Status s = Open(); !s.ok()) return s;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

Status IoThread::StartDriven() { return Open(); }

Status IoThread::Open() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return InternalError(std::string("epoll_create1: ") + std::strerror(errno));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return InternalError(std::string("eventfd: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    return InternalError(std::string("epoll_ctl: ") + std::strerror(errno));
  }
  const StoreUrl& url = state_.options.url;
  if (url.mode == StoreMode::kCluster) slot_nodes_.assign(kSlotCount, nullptr);
  // No thread runs the loop yet: this is still the only one touching its
  // state. Connect to the seeds at once, so that the first requests
  // find a connection (or one on its way). A sentinel URL's nodes are the
  // sentinels: its one seed is the master they named.
  std::vector<HostPort> seeds = url.nodes;
  if (url.mode == StoreMode::kSentinel) {
    master_version_ = state_.master_version();
    seeds = {state_.master()};
  }
  for (const HostPort& hp : seeds) {
    Node* node = GetOrCreateNode(hp.ToString());
    if (node == nullptr) return InvalidArgumentError("bad node " + hp.ToString());
    seeds_.push_back(node);
    for (auto& conn : node->conns) ScheduleConnect(*conn);
  }
  return Status::Ok();
}

void IoThread::Submit(std::unique_ptr<Pending> p) {
  std::vector<std::unique_ptr<Pending>> one;
  one.push_back(std::move(p));
  Submit(one);
}

void IoThread::Submit(std::vector<std::unique_ptr<Pending>>& batch) {
  const int64_t max = state_.options.max_pending_per_thread;
  for (auto& p : batch) {
    p->live_counter = &live_pending_;
    // Over the bound the request is still queued, marked, so that it is
    // answered (UNAVAILABLE) on the I/O thread like every other.
    if (live_pending_.fetch_add(1, std::memory_order_relaxed) >= max) p->rejected = true;
  }
  bool wake = false;
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopped = stopped_;
    if (!stopped) {
      for (auto& p : batch) queue_.push_back(std::move(p));
      if (!wake_pending_) {
        wake_pending_ = true;
        wake = true;
      }
    }
  }
  if (stopped) {
    // Only during ~Client (a callback submitting to a thread that already
    // exited): answered here, as the loop would have.
    const Status status = UnavailableError("redis client shut down");
    for (auto& p : batch) {
      if (p->done) p->done(status, nullptr);
    }
  } else if (wake) {
    Wake();
  }
  batch.clear();
}

void IoThread::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void IoThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_requested_ = true;
  }
  Wake();
}

void IoThread::Join() {
  if (thread_.joinable()) thread_.join();
}

uint64_t IoThread::NextRandom() {
  // xorshift64*: jitter only, no need for more.
  random_state_ ^= random_state_ >> 12;
  random_state_ ^= random_state_ << 25;
  random_state_ ^= random_state_ >> 27;
  return random_state_ * 0x2545F4914F6CDD1DULL;
}

void IoThread::Run() {
  BlockSigpipe();
  t_loop_state = &state_;
  epoll_event events[kMaxEvents];
  const Clock& clock = state_.clock;
  int64_t now = clock.MonotonicNs();
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, kMaxEvents, EpollTimeoutMs(now, housekeeping_));
    now = clock.MonotonicNs();
    HandleEvents(events, n, now);
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (stop_requested_) break;
      drained_.swap(queue_);
      wake_pending_ = false;
    }
    // Submitted after the reading above, perhaps after a ManualClock was
    // moved: routed at a reading no older than their submission.
    if (!drained_.empty()) now = clock.MonotonicNs();
    Advance(now);
  }
  ShutdownLoop();
}

void IoThread::HandleEvents(const epoll_event* events, int n, int64_t now_ns) {
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == nullptr) {
      uint64_t value;
      [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &value, sizeof(value));
      woken_ = true;
      continue;
    }
    static_cast<Connection*>(events[i].data.ptr)->HandleEvents(events[i].events, now_ns);
  }
}

void IoThread::Advance(int64_t now_ns) {
  if (state_.options.url.mode == StoreMode::kSentinel) FollowMaster();
  DrainQueue(now_ns);
  housekeeping_ = Tick(now_ns);
  FlushDirty(now_ns);
}

// --- Driven loops. ---

void IoThread::Attach() {
  if (attached_ || detached_) return;
  attached_ = true;
  BlockSigpipe();
  t_attached.push_back(this);
}

void IoThread::SubmitLocal(std::vector<std::unique_ptr<Pending>>& batch) {
  const int64_t max = state_.options.max_pending_per_thread;
  for (auto& p : batch) {
    p->live_counter = &live_pending_;
    if (live_pending_.fetch_add(1, std::memory_order_relaxed) >= max) p->rejected = true;
    local_queue_.push_back(std::move(p));
  }
  batch.clear();
}

void IoThread::PollEvents() {
  if (detached_) return;
  epoll_event events[kMaxEvents];
  const int n = epoll_wait(epoll_fd_, events, kMaxEvents, 0);
  if (n > 0) HandleEvents(events, n, state_.clock.MonotonicNs());
}

void IoThread::Step() {
  if (detached_) return;
  // Other threads' submissions: the eventfd they wrote woke PollEvents.
  if (woken_) {
    woken_ = false;
    std::lock_guard<std::mutex> lock(queue_mu_);
    drained_.swap(queue_);
    wake_pending_ = false;
  }
  // The attached thread's come after them, in the order submitted.
  if (drained_.empty()) {
    drained_.swap(local_queue_);
  } else {
    for (auto& p : local_queue_) drained_.push_back(std::move(p));
    local_queue_.clear();
  }
  // Read after taking the submissions: none was made after it.
  Advance(state_.clock.MonotonicNs());
}

int IoThread::TimeoutMs() const {
  if (detached_) return -1;
  // Submitted by callbacks during the last step: the next one is due now.
  if (!local_queue_.empty()) return 0;
  return EpollTimeoutMs(state_.clock.MonotonicNs(), housekeeping_);
}

void IoThread::Detach() {
  if (detached_) return;
  detached_ = true;
  // Still attached while it answers: callbacks that submit again land in
  // local_queue_, which ShutdownLoop answers too.
  ShutdownLoop();
  if (attached_) {
    attached_ = false;
    for (size_t i = 0; i < t_attached.size(); ++i) {
      if (t_attached[i] == this) {
        t_attached.erase(t_attached.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
}

int IoThread::EpollTimeoutMs(int64_t now_ns, bool housekeeping) const {
  if (!connect_list_.empty() || !flush_list_.empty()) return 0;
  const int64_t deadline = timers_head_ != nullptr ? timers_head_->deadline_ns : -1;
  int64_t max_ns = housekeeping ? kHousekeepingNs : -1;
  // Something is timed on a clock that does not follow real time (a test's
  // ManualClock): read it again soon, it may have been moved meanwhile.
  if (max_sleep_ns_ >= 0 && (deadline >= 0 || housekeeping)) {
    max_ns = max_ns < 0 ? max_sleep_ns_ : std::min(max_ns, max_sleep_ns_);
  }
  return SleepMs(now_ns, deadline, max_ns);
}

void IoThread::DrainQueue(int64_t now_ns) {
  if (drained_.empty()) return;
  SyncSlotMap();
  uint64_t requests = 0;
  for (auto& p : drained_) {
    if (p->kind == PendingKind::kUser || p->kind == PendingKind::kPinned) ++requests;
  }
  Bump(state_.counters.requests, requests);
  for (auto& p : drained_) {
    if (!p->rejected && p->invalid.empty()) {
      // Its caller's deadline passed before it could be sent (a caller that
      // held it back, a busy loop): answered now, never written. Says
      // nothing about the node.
      if (p->deadline_ns <= now_ns) {
        Finish(*p,
               Status(StatusCode::kDeadlineExceeded,
                      "the request's deadline passed before it could be sent to redis"),
               nullptr);
        continue;
      }
      AddTimer(*p);
    }
    Route(std::move(p), now_ns);
  }
  drained_.clear();
}

bool IoThread::Tick(int64_t now_ns) {
  ExpireTimers(now_ns);
  if (!connect_list_.empty()) {
    std::vector<Connection*> opening;
    opening.swap(connect_list_);
    for (Connection* conn : opening) conn->Open(now_ns);
  }
  SyncSlotMap();
  bool busy = false;
  // By index: probes and redirects may add nodes while this runs.
  for (size_t i = 0; i < all_nodes_.size(); ++i) {
    Node& node = *all_nodes_[i];
    // Requests that timed out while waiting for a connection.
    while (!node.waiting.empty() && node.waiting.front()->answered) node.waiting.pop_front();
    if (!node.waiting.empty()) busy = true;
    for (auto& conn : node.conns) busy |= conn->CheckTimers(now_ns);
    if (node.breaker->state() != CircuitBreaker::State::kClosed && !node.retired) {
      busy = true;
      if (node.breaker->TryStartProbe(now_ns)) StartProbe(node, now_ns);
    }
  }
  if (state_.options.url.mode == StoreMode::kCluster && index_ == 0) {
    StartSlotRefresh(now_ns);
    busy |= refresh_in_flight_ || state_.slot_refresh_wanted();
  }
  return busy;
}

void IoThread::FlushDirty(int64_t now_ns) {
  // Connections opened by Tick come back here in the next round.
  for (size_t i = 0; i < flush_list_.size(); ++i) {
    Connection* conn = flush_list_[i];
    conn->in_flush_list = false;
    conn->Flush(now_ns);
  }
  flush_list_.clear();
}

void IoThread::MarkDirty(Connection& conn) {
  if (conn.in_flush_list) return;
  conn.in_flush_list = true;
  flush_list_.push_back(&conn);
}

void IoThread::ScheduleConnect(Connection& conn) {
  if (conn.state() != Connection::State::kIdle) return;
  conn.MarkScheduled();
  connect_list_.push_back(&conn);
}

// --- Routing. ---

Node* IoThread::GetOrCreateNode(const std::string& id) {
  if (auto it = nodes_.find(id); it != nodes_.end()) return it->second.get();
  Result<HostPort> address = ParseHostPort(id);
  if (!address.ok()) return nullptr;
  const std::string canonical = address->ToString();
  if (auto it = nodes_.find(canonical); it != nodes_.end()) return it->second.get();
  if (nodes_.size() >= kMaxNodes) return nullptr;
  auto node = std::make_unique<Node>();
  node->id = canonical;
  node->address = *std::move(address);
  node->breaker = state_.BreakerFor(canonical);
  const int conns = state_.options.connections_per_node;
  for (int i = 0; i < conns; ++i) node->conns.push_back(std::make_unique<Connection>(*this, *node));
  Node* raw = node.get();
  nodes_.emplace(canonical, std::move(node));
  all_nodes_.push_back(raw);
  return raw;
}

Node* IoThread::ResolveNode(const Pending& p) {
  if (!p.node.empty()) return GetOrCreateNode(p.node);
  if (state_.options.url.mode != StoreMode::kCluster) return seeds_.front();
  if (Node* node = slot_nodes_[p.slot]; node != nullptr) return node;
  // No map yet, or a slot nobody serves: ask a seed, whose MOVED will say
  // where the slot lives.
  state_.RequestSlotRefresh();
  Node* seed = seeds_[next_seed_ % seeds_.size()];
  ++next_seed_;
  return seed;
}

void IoThread::FollowMaster() {
  const uint64_t version = state_.master_version();
  if (version == master_version_) return;
  master_version_ = version;
  Node* next = GetOrCreateNode(state_.master().ToString());
  Node* old = seeds_.front();
  if (next == nullptr || next == old) return;
  next->retired = false;
  old->retired = true;
  seeds_.front() = next;
  for (auto& conn : next->conns) ScheduleConnect(*conn);
  // Requests not yet written go to the new master; those written to the old
  // one are answered UNAVAILABLE as its connections close, so nothing more
  // reaches a server that may come back as a replica.
  while (!old->waiting.empty()) {
    std::unique_ptr<Pending> p = std::move(old->waiting.front());
    old->waiting.pop_front();
    if (p->answered) continue;
    p->target = next;
    next->waiting.push_back(std::move(p));
  }
  // Closed as at shutdown: not a failure of the node (no breaker count, no
  // warning), only the end of its use.
  const Status gone =
      UnavailableError("redis " + old->id + ": no longer the master the sentinels name for '" +
                       state_.options.url.master_name + "'");
  for (auto& conn : old->conns) {
    std::deque<std::unique_ptr<Pending>> in_flight = conn->Shutdown();
    FailAll(in_flight, gone);
  }
}

void IoThread::SyncSlotMap() {
  if (state_.options.url.mode != StoreMode::kCluster) return;
  const uint64_t version = state_.slot_map_version();
  if (version == slot_map_version_) return;
  slot_map_version_ = version;
  const std::shared_ptr<const SlotMap> map = state_.slot_map();
  if (map == nullptr) return;
  std::vector<Node*> by_index;
  for (const std::string& id : map->nodes()) by_index.push_back(GetOrCreateNode(id));
  for (int s = 0; s < kSlotCount; ++s) {
    const int n = map->NodeOf(s);
    slot_nodes_[s] = n >= 0 ? by_index[n] : nullptr;
  }
}

// The connection for a request on `slot` (its key's slot, in every mode):
// the same one for every request on a key while it is up, so that a
// client's pipelined requests on one key run in Redis in the order sent
// (requests on two connections run in whatever order Redis reads them).
// Another ready one only while that one is down.
static Connection* NextReady(Node& node, int slot) {
  const size_t n = node.conns.size();
  if (n == 0) return nullptr;
  if (Connection* home = node.conns[static_cast<size_t>(slot) % n].get(); home->ready()) {
    return home;
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (node.next_conn + i) % n;
    if (node.conns[index]->ready()) {
      node.next_conn = index + 1;
      return node.conns[index].get();
    }
  }
  return nullptr;
}

void IoThread::Route(std::unique_ptr<Pending> p, int64_t now_ns) {
  if (p->answered) return;
  if (p->rejected) {
    Bump(state_.counters.queue_full);
    Finish(*p,
           UnavailableError(
               "redis client queue full: " + std::to_string(state_.options.max_pending_per_thread) +
               " requests pending on one I/O thread"),
           nullptr);
    return;
  }
  if (!p->invalid.empty()) {
    Finish(*p, InvalidArgumentError(p->invalid), nullptr);
    return;
  }
  Node* node = ResolveNode(*p);
  if (node == nullptr) {
    Finish(*p, InvalidArgumentError("bad redis node '" + p->node + "' (expected host:port)"),
           nullptr);
    return;
  }
  p->target = node;
  if (p->kind != PendingKind::kProbe && !node->breaker->Allow()) {
    if (p->kind == PendingKind::kUser || p->kind == PendingKind::kPinned) {
      Bump(state_.counters.circuit_rejections);
    }
    Finish(*p,
           UnavailableError("redis " + node->id + ": circuit open after repeated failures" +
                            (node->last_error.empty() ? "" : " (last: " + node->last_error + ")")),
           nullptr);
    return;
  }
  if (Connection* conn = NextReady(*node, p->slot); conn != nullptr) {
    conn->Enqueue(std::move(p));
    // Bring the node's other connections back when their backoff allows.
    for (auto& c : node->conns) {
      if (c->state() == Connection::State::kIdle && c->retry_at_ns() <= now_ns) {
        ScheduleConnect(*c);
      }
    }
    return;
  }
  bool connecting = false;
  for (auto& c : node->conns) connecting |= c->connecting();
  if (!connecting) {
    // A probe may not wait for a backoff: it is what ends the open period.
    Connection* idle = nullptr;
    int64_t soonest = INT64_MAX;
    for (auto& c : node->conns) {
      soonest = std::min(soonest, c->retry_at_ns());
      if (idle == nullptr && (c->retry_at_ns() <= now_ns || p->kind == PendingKind::kProbe)) {
        idle = c.get();
      }
    }
    if (idle == nullptr) {
      Finish(
          *p,
          UnavailableError("redis " + node->id + ": not connected (retrying in " +
                           std::to_string(Ms(soonest - now_ns) + 1) + " ms" +
                           (node->last_error.empty() ? "" : "; last: " + node->last_error) + ")"),
          nullptr);
      return;
    }
    ScheduleConnect(*idle);
  }
  node->waiting.push_back(std::move(p));
}

void IoThread::OnConnectionReady(Connection& conn, int64_t now_ns) {
  Node& node = conn.node();
  if (node.down) {
    node.down = false;
    Log(LogLevel::kInfo, "redis connected", {{"node", node.id}});
  }
  std::deque<std::unique_ptr<Pending>> waiting;
  waiting.swap(node.waiting);
  for (auto& p : waiting) {
    if (p->answered) continue;
    const int slot = p->slot;
    NextReady(node, slot)->Enqueue(std::move(p));
  }
}

void IoThread::OnConnectionFailed(Connection& conn, bool was_ready, const std::string& why,
                                  std::deque<std::unique_ptr<Pending>> in_flight, int64_t now_ns) {
  Node& node = conn.node();
  Bump(was_ready ? state_.counters.connections_lost : state_.counters.connect_failures);
  node.last_error = why;
  if (!node.down) {
    node.down = true;
    Log(LogLevel::kWarn, "redis connection failed", {{"node", node.id}, {"error", why}});
  }
  if (node.breaker->RecordFailure(now_ns)) {
    Log(LogLevel::kWarn, "redis circuit open", {{"node", node.id}, {"error", why}});
  }
  const Status status = UnavailableError("redis " + node.id + ": " + why);
  FailAll(in_flight, status);
  if (state_.options.url.mode == StoreMode::kCluster) state_.RequestSlotRefresh();
  // The master gone: the sentinels may be naming another already.
  if (state_.options.url.mode == StoreMode::kSentinel) state_.RequestMasterRefresh();
  // Requests waiting for a connection: if none of the node's connections is
  // ready or on its way, none will come in time.
  bool hope = false;
  for (auto& c : node.conns) hope |= c->ready() || c->connecting();
  if (!hope && !node.waiting.empty()) {
    std::deque<std::unique_ptr<Pending>> waiting;
    waiting.swap(node.waiting);
    FailAll(waiting, status);
  }
}

void IoThread::OnStaleReset(Connection& conn) { Bump(state_.counters.stale_resets); }

void IoThread::OnReply(Connection& conn, std::unique_ptr<Pending> p, const redisReply* reply,
                       int64_t now_ns) {
  conn.node().breaker->RecordSuccess();
  if (p->kind == PendingKind::kAsking) return;
  if (p->answered) {
    // The late reply of a request that timed out: dropped, in order.
    Bump(state_.counters.stale_replies);
    conn.RemoveStale();
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR && state_.options.url.mode == StoreMode::kSentinel &&
      IsReadOnlyError(reply)) {
    // The master became a replica (a failover): nothing was written. A
    // backend error, so the rule's on_backend_error decides, until the
    // watcher names the new master.
    state_.RequestMasterRefresh();
    Finish(*p,
           UnavailableError("redis " + conn.node().id +
                            ": a replica now (READONLY); following the sentinels' failover"),
           nullptr);
    return;
  }
  if (p->kind == PendingKind::kUser && reply->type == REDIS_REPLY_ERROR &&
      state_.options.url.mode == StoreMode::kCluster) {
    if (Redirect(conn, p, reply, now_ns)) return;
    if (IsErrorWithPrefix(reply, "CLUSTERDOWN")) state_.RequestSlotRefresh();
  }
  Finish(*p, Status::Ok(), reply);
}

bool IoThread::Redirect(Connection& conn, std::unique_ptr<Pending>& p, const redisReply* reply,
                        int64_t now_ns) {
  const bool moved = IsErrorWithPrefix(reply, "MOVED");
  const bool ask = !moved && IsErrorWithPrefix(reply, "ASK");
  if (!moved && !ask) return false;
  // "MOVED <slot> <host>:<port>" (the host may be empty: the same host).
  const std::string_view text(reply->str, reply->len);
  const size_t sp1 = text.find(' ');
  const size_t sp2 = text.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return false;
  const std::string_view slot_text = text.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string address(text.substr(sp2 + 1));
  int slot = 0;
  for (char c : slot_text) {
    if (c < '0' || c > '9' || slot >= kSlotCount) return false;
    slot = slot * 10 + (c - '0');
  }
  if (slot_text.empty() || slot >= kSlotCount) return false;
  if (!address.empty() && address.front() == ':') {
    std::string host = conn.node().address.host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    address = host + address;
  }
  if (p->redirects >= state_.options.max_redirects) {
    Finish(*p, UnavailableError("too many cluster redirects (last: " + std::string(text) + ")"),
           nullptr);
    return true;
  }
  Node* target = GetOrCreateNode(address);
  if (target == nullptr) {
    Finish(*p, UnavailableError("cluster redirect to a bad address: " + std::string(text)),
           nullptr);
    return true;
  }
  ++p->redirects;
  p->conn = nullptr;
  if (moved) {
    Bump(state_.counters.moved);
    slot_nodes_[slot] = target;
    p->node.clear();
    p->asking = false;
    state_.RequestSlotRefresh();
  } else {
    Bump(state_.counters.ask);
    p->node = target->id;
    p->asking = true;
  }
  Route(std::move(p), now_ns);
  return true;
}

// --- Probes and slot map refreshes. ---

void IoThread::StartProbe(Node& node, int64_t now_ns) {
  const ClientOptions& options = state_.options;
  auto p = std::make_unique<Pending>();
  p->kind = PendingKind::kProbe;
  p->node = node.id;
  static constexpr std::string_view kPing[] = {"PING"};
  AppendCommand(p->command, kPing);
  // Room to connect as well as to answer: the probe usually opens a new connection.
  p->timeout_ms = options.connect_timeout_ms + options.timeout_ms;
  p->deadline_ns = now_ns + p->timeout_ms * 1'000'000;
  p->live_counter = &live_pending_;
  live_pending_.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<CircuitBreaker> breaker = node.breaker;
  std::string id = node.id;
  const Clock* clock = &state_.clock;
  p->done = [breaker, id, clock](Status status, const redisReply* reply) {
    if (status.ok() && reply->type != REDIS_REPLY_ERROR) {
      if (breaker->ProbeSucceeded()) Log(LogLevel::kInfo, "redis circuit closed", {{"node", id}});
    } else {
      breaker->ProbeFailed(clock->MonotonicNs());
    }
  };
  AddTimer(*p);
  Route(std::move(p), now_ns);
}

void IoThread::StartSlotRefresh(int64_t now_ns) {
  if (refresh_in_flight_ || now_ns < next_refresh_ns_) return;
  if (!state_.TakeSlotRefreshRequest()) return;
  // Rotate over the known masters and the seeds, so that one dead node
  // cannot stall refreshes.
  std::vector<Node*> candidates;
  if (const std::shared_ptr<const SlotMap> map = state_.slot_map(); map != nullptr) {
    for (const std::string& id : map->nodes()) {
      if (Node* node = GetOrCreateNode(id); node != nullptr) candidates.push_back(node);
    }
  }
  candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
  Node* target = candidates[refresh_rotation_ % candidates.size()];
  ++refresh_rotation_;

  const ClientOptions& options = state_.options;
  auto p = std::make_unique<Pending>();
  p->kind = PendingKind::kRefresh;
  p->node = target->id;
  static constexpr std::string_view kSlots[] = {"CLUSTER", "SLOTS"};
  AppendCommand(p->command, kSlots);
  p->timeout_ms = options.connect_timeout_ms + options.timeout_ms;
  p->deadline_ns = now_ns + p->timeout_ms * 1'000'000;
  p->live_counter = &live_pending_;
  live_pending_.fetch_add(1, std::memory_order_relaxed);
  HostPort queried = target->address;
  p->done = [this, queried](Status status, const redisReply* reply) {
    refresh_in_flight_ = false;
    next_refresh_ns_ = state_.clock.MonotonicNs() + kMinRefreshIntervalNs;
    Result<SlotMap> map =
        status.ok() ? SlotMap::FromClusterSlots(reply, queried) : Result<SlotMap>(status);
    if (!map.ok()) {
      // Logged once per run of failures: a cluster that is down would
      // otherwise log ten lines a second.
      if (!refresh_failing_) {
        refresh_failing_ = true;
        Log(LogLevel::kWarn, "redis cluster slot map refresh failed",
            {{"node", queried.ToString()}, {"error", map.status().message()}});
      }
      state_.RequestSlotRefresh();  // again, from the next candidate
      return;
    }
    refresh_failing_ = false;
    state_.PublishSlotMap(std::move(map).value());
  };
  refresh_in_flight_ = true;
  AddTimer(*p);
  Route(std::move(p), now_ns);
}

// --- Answers and deadlines. ---

void IoThread::Finish(Pending& p, const Status& status, const redisReply* reply) {
  RemoveTimer(p);
  if (p.answered) return;
  p.answered = true;
  if (p.kind == PendingKind::kUser || p.kind == PendingKind::kPinned) {
    Counters& counters = state_.counters;
    if (status.ok()) {
      Bump(counters.replies);
      if (reply->type == REDIS_REPLY_ERROR) Bump(counters.error_replies);
    } else if (status.code() == StatusCode::kDeadlineExceeded) {
      Bump(counters.timeouts);
    } else if (status.code() == StatusCode::kUnavailable) {
      Bump(counters.unavailable);
    }
  }
  if (p.done) {
    ReplyCallback done = std::move(p.done);
    done(status, reply);
  }
}

void IoThread::FailAll(std::deque<std::unique_ptr<Pending>>& list, const Status& status) {
  for (auto& p : list) {
    if (!p->answered) Finish(*p, status, nullptr);
  }
  list.clear();
}

void IoThread::AddTimer(Pending& p) {
  // Deadlines arrive almost in order (one timeout for all), so the walk
  // from the tail is usually zero steps.
  Pending* after = timers_tail_;
  while (after != nullptr && after->deadline_ns > p.deadline_ns) after = after->prev;
  p.prev = after;
  p.next = after != nullptr ? after->next : timers_head_;
  if (p.next != nullptr) {
    p.next->prev = &p;
  } else {
    timers_tail_ = &p;
  }
  if (after != nullptr) {
    after->next = &p;
  } else {
    timers_head_ = &p;
  }
  p.timed = true;
}

void IoThread::RemoveTimer(Pending& p) {
  if (!p.timed) return;
  if (p.prev != nullptr) {
    p.prev->next = p.next;
  } else {
    timers_head_ = p.next;
  }
  if (p.next != nullptr) {
    p.next->prev = p.prev;
  } else {
    timers_tail_ = p.prev;
  }
  p.prev = p.next = nullptr;
  p.timed = false;
}

void IoThread::ExpireTimers(int64_t now_ns) {
  while (timers_head_ != nullptr && timers_head_->deadline_ns <= now_ns) {
    Pending& p = *timers_head_;
    // Written already: its reply will still come, and be dropped.
    if (p.conn != nullptr) p.conn->AddStale();
    if (p.target != nullptr && p.kind != PendingKind::kProbe &&
        p.target->breaker->RecordFailure(now_ns)) {
      Log(LogLevel::kWarn, "redis circuit open",
          {{"node", p.target->id}, {"error", "requests time out"}});
    }
    Finish(p, DeadlineError(p.target, p.timeout_ms), nullptr);
  }
}

// --- Shutdown. ---

void IoThread::ShutdownLoop() {
  const Status status = UnavailableError("redis client shut down");
  for (size_t i = 0; i < all_nodes_.size(); ++i) {
    Node& node = *all_nodes_[i];
    std::deque<std::unique_ptr<Pending>> waiting;
    waiting.swap(node.waiting);
    FailAll(waiting, status);
    for (auto& conn : node.conns) {
      std::deque<std::unique_ptr<Pending>> in_flight = conn->Shutdown();
      FailAll(in_flight, status);
    }
  }
  // The queues, and whatever the callbacks submit meanwhile (to this loop
  // too), until they stay empty; then further submissions are refused.
  while (true) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      drained_.swap(queue_);
      for (auto& p : local_queue_) drained_.push_back(std::move(p));
      local_queue_.clear();
      if (drained_.empty()) {
        stopped_ = true;
        break;
      }
    }
    for (auto& p : drained_) Finish(*p, status, nullptr);
    drained_.clear();
  }
}

}  // namespace floodgate::redis::internal
