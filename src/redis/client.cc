// The Redis client's public face: option checks, submission to the I/O
// threads, the blocking helpers, statistics; and the state the I/O threads
// share (breakers, slot map). See client.h; the loop is in io_thread.cc.
#include "redis/client.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "redis/client_loop_driver.h"
#include "redis/client_state.h"
#include "redis/io_thread.h"
#include "redis/sentinel.h"

namespace floodgate::redis {
namespace internal {

ClientState::ClientState(ClientOptions options_in, std::shared_ptr<TlsContext> tls_in)
    : options(std::move(options_in)),
      clock(options.clock != nullptr ? *options.clock : SystemClock::Default()),
      tls(std::move(tls_in)) {}

ClientState::~ClientState() = default;

HostPort ClientState::master() const {
  std::lock_guard<std::mutex> lock(master_mu_);
  return master_;
}

void ClientState::PublishMaster(const HostPort& master) {
  {
    std::lock_guard<std::mutex> lock(master_mu_);
    master_ = master;
  }
  master_version_.fetch_add(1, std::memory_order_acq_rel);
  for (auto& thread : threads) thread->Wake();
}

void ClientState::RequestMasterRefresh() {
  if (sentinel != nullptr) sentinel->RequestRefresh();
}

std::shared_ptr<CircuitBreaker> ClientState::BreakerFor(const std::string& id) {
  std::lock_guard<std::mutex> lock(breakers_mu_);
  std::shared_ptr<CircuitBreaker>& breaker = breakers_[id];
  if (breaker == nullptr) {
    breaker = std::make_shared<CircuitBreaker>(options.circuit_failure_threshold,
                                               options.circuit_open_ms * 1'000'000,
                                               &counters.open_circuits, &counters.circuit_opens);
  }
  return breaker;
}

bool ClientState::CircuitOpen(const std::string& id) const {
  std::lock_guard<std::mutex> lock(breakers_mu_);
  auto it = breakers_.find(id);
  return it != breakers_.end() && it->second->state() != CircuitBreaker::State::kClosed;
}

std::shared_ptr<const SlotMap> ClientState::slot_map() const {
  std::lock_guard<std::mutex> lock(map_mu_);
  return map_;
}

void ClientState::PublishSlotMap(SlotMap map) {
  {
    std::lock_guard<std::mutex> lock(map_mu_);
    map_ = std::make_shared<const SlotMap>(std::move(map));
    map_version_.fetch_add(1, std::memory_order_release);
  }
  Bump(counters.slot_map_refreshes);
  map_cv_.notify_all();
}

std::shared_ptr<const SlotMap> ClientState::WaitForSlotMap(int64_t timeout_ns) {
  const int64_t deadline = clock.MonotonicNs() + timeout_ns;
  std::unique_lock<std::mutex> lock(map_mu_);
  for (int64_t now = clock.MonotonicNs(); map_ == nullptr && now < deadline;
       now = clock.MonotonicNs()) {
    map_cv_.wait_for(lock, std::chrono::nanoseconds(clock.SleepNs(now, deadline)));
  }
  return map_;
}

void ClientState::RequestSlotRefresh() {
  if (!refresh_wanted_.exchange(true) && !threads.empty()) threads.front()->Wake();
}

namespace {

// Builds a Pending for `args`; empty commands are refused (Redis answers
// nothing to an empty array, which would shift every later reply).
template <typename Strings>
std::unique_ptr<Pending> MakePending(std::string_view key, const Strings& args,
                                     ReplyCallback done) {
  auto p = std::make_unique<Pending>();
  if (args.empty()) {
    p->invalid = "empty redis command";
  } else {
    AppendCommand(p->command, args);
  }
  p->slot = KeySlot(key);
  p->done = std::move(done);
  return p;
}

}  // namespace
}  // namespace internal

using internal::ClientState;
using internal::IoThread;
using internal::Pending;
using internal::PendingKind;

// --- Batch. ---

Batch::Batch() = default;
Batch::~Batch() = default;
Batch::Batch(Batch&&) noexcept = default;
Batch& Batch::operator=(Batch&&) noexcept = default;

// Until Client::Send(Batch) stamps it, a Pending's deadline_ns is the one
// its caller asked for (0: none).
void Batch::Add(std::string_view key, std::span<const std::string_view> args, ReplyCallback done,
                int64_t deadline_ns) {
  items_.push_back(internal::MakePending(key, args, std::move(done)));
  items_.back()->deadline_ns = deadline_ns;
}

void Batch::Add(std::string_view key, std::span<const std::string> args, ReplyCallback done,
                int64_t deadline_ns) {
  items_.push_back(internal::MakePending(key, args, std::move(done)));
  items_.back()->deadline_ns = deadline_ns;
}

// --- Client. ---

namespace {

Status CheckOptions(const ClientOptions& o) {
  auto bad = [](const std::string& what) {
    return InvalidArgumentError("redis client options: " + what);
  };
  if (o.url.nodes.empty()) return bad("the store URL names no host");
  const bool sentinel = o.url.mode == StoreMode::kSentinel;
  if (o.url.mode != StoreMode::kCluster && !sentinel && o.url.nodes.size() != 1) {
    return bad("standalone and proxy URLs name exactly one host");
  }
  if (o.url.mode != StoreMode::kStandalone && !sentinel && o.url.db >= 0) {
    return bad("a database number needs a standalone or sentinel URL");
  }
  if (sentinel && o.url.master_name.empty()) return bad("a sentinel URL names its master");
  if (sentinel && o.url.tls) {
    // The sentinels are asked over hiredis' blocking API, which speaks no TLS.
    return bad(
        "TLS with redis-sentinel:// is not supported yet: reach the sentinels and the "
        "master in plain TCP (redis-sentinel://...), or name the master with rediss://");
  }
  if (o.timeout_ms < 1 || o.timeout_ms > 3'600'000) return bad("timeout_ms must be 1..3600000");
  if (o.connect_timeout_ms < 1 || o.connect_timeout_ms > 3'600'000) {
    return bad("connect_timeout_ms must be 1..3600000");
  }
  if (o.connections_per_node < 1 || o.connections_per_node > 64) {
    return bad("connections_per_node must be 1..64");
  }
  if (o.io_threads < 1 || o.io_threads > 64) return bad("io_threads must be 1..64");
  if (o.reconnect_backoff_initial_ms < 1 ||
      o.reconnect_backoff_max_ms < o.reconnect_backoff_initial_ms ||
      o.reconnect_backoff_max_ms > 3'600'000) {
    return bad("reconnect backoff must satisfy 1 <= initial <= max <= 3600000 ms");
  }
  if (o.circuit_failure_threshold < 1) return bad("circuit_failure_threshold must be >= 1");
  if (o.circuit_open_ms < 1 || o.circuit_open_ms > 3'600'000) {
    return bad("circuit_open_ms must be 1..3600000");
  }
  if (o.max_pending_per_thread < 1) return bad("max_pending_per_thread must be >= 1");
  if (o.max_stale_per_connection < 1) return bad("max_stale_per_connection must be >= 1");
  if (o.stale_reset_ms < 1) return bad("stale_reset_ms must be >= 1");
  if (o.max_redirects < 0 || o.max_redirects > 64) return bad("max_redirects must be 0..64");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (Status s = CheckOptions(options); !s.ok()) return s;
  // A sentinel URL: the master first, so that nothing starts without one.
  std::optional<HostPort> master;
  if (options.url.mode == StoreMode::kSentinel) {
    Result<HostPort> found = internal::AskSentinels(options.url, options.connect_timeout_ms);
    if (!found.ok()) return found.status();
    master = *std::move(found);
  }
  std::shared_ptr<TlsContext> tls;
  if (options.url.tls) {
    Result<std::shared_ptr<TlsContext>> context = TlsContext::Create(options.url.tls_options);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }
  auto state = std::make_unique<ClientState>(std::move(options), std::move(tls));
  if (master.has_value()) {
    state->PublishMaster(*master);  // no thread yet to wake
    state->sentinel = std::make_unique<internal::SentinelWatcher>(
        state->options.url, state->options.connect_timeout_ms, state->clock,
        [raw = state.get()](const HostPort& m) { raw->PublishMaster(m); });
  }
  const int threads = state->options.io_threads;
  for (int i = 0; i < threads; ++i) {
    state->threads.push_back(std::make_unique<IoThread>(*state, i));
  }
  std::unique_ptr<Client> client(new Client(std::move(state)));
  for (auto& thread : client->state_->threads) {
    if (Status s = thread->Start(); !s.ok()) return s;  // ~Client stops the started ones
  }
  // Read the slot map at once.
  if (client->state_->options.url.mode == StoreMode::kCluster) {
    client->state_->RequestSlotRefresh();
  }
  if (master.has_value()) client->state_->sentinel->Start(*master);
  return client;
}

Client::Client(std::unique_ptr<ClientState> state) : state_(std::move(state)) {}

Client::~Client() {
  // First, so that nothing is published to threads that are stopping; the
  // watcher itself stays until the state goes, since the I/O threads may
  // still ask it to refresh.
  if (state_->sentinel != nullptr) state_->sentinel->Stop();
  for (auto& thread : state_->threads) thread->Stop();
  for (auto& thread : state_->threads) thread->Join();
}

const ClientOptions& Client::options() const { return state_->options; }

const Clock& Client::clock() const { return state_->clock; }

Result<std::unique_ptr<LoopDriver>> Client::NewLoopDriver() {
  const int index = state_->options.io_threads + state_->next_loop_index.fetch_add(1);
  auto loop = std::make_unique<IoThread>(*state_, index);
  if (Status s = loop->StartDriven(); !s.ok()) return s;
  return std::unique_ptr<LoopDriver>(new internal::ClientLoopDriver(std::move(loop)));
}

bool Client::RunsIoHere() const {
  return internal::CurrentLoopState() == state_.get() || internal::AttachedLoop(*state_) != nullptr;
}

namespace {

// Callers keep to one I/O loop each, so that one caller's requests share
// that loop's writes: a thread driving a loop of this client uses it (with
// no lock and no wake-up: the thread steps it itself after its requests),
// any other thread one of the I/O threads.
void SubmitFromCaller(ClientState& state, std::vector<std::unique_ptr<Pending>>& batch) {
  if (IoThread* attached = internal::AttachedLoop(state); attached != nullptr) {
    attached->SubmitLocal(batch);
    return;
  }
  if (state.threads.size() == 1) return state.threads.front()->Submit(batch);
  thread_local const size_t hash = std::hash<std::thread::id>{}(std::this_thread::get_id());
  state.threads[hash % state.threads.size()]->Submit(batch);
}

void SubmitFromCaller(ClientState& state, std::unique_ptr<Pending> p) {
  std::vector<std::unique_ptr<Pending>> one;
  one.push_back(std::move(p));
  SubmitFromCaller(state, one);
}

}  // namespace

namespace {

// The deadline of a request submitted now: timeout_ms from now, or the
// caller's own when that is earlier (0: none).
// Due by the store's timeout, or by the caller's earlier `asked_ns`.
void SetDeadline(Pending& p, int64_t now_ns, const ClientOptions& options, int64_t asked_ns) {
  const int64_t deadline = now_ns + options.timeout_ms * 1'000'000;
  p.deadline_ns = asked_ns > 0 && asked_ns < deadline ? asked_ns : deadline;
  p.timeout_ms = (p.deadline_ns - now_ns) / 1'000'000;
}

// Submits one request from the caller's thread, due by SetDeadline.
void SubmitOne(ClientState& state, std::unique_ptr<Pending> p, int64_t asked_ns) {
  SetDeadline(*p, state.clock.MonotonicNs(), state.options, asked_ns);
  SubmitFromCaller(state, std::move(p));
}

// `p`, sent to `node` whatever its key routes to.
std::unique_ptr<Pending> PinnedTo(const std::string& node, std::unique_ptr<Pending> p) {
  p->kind = PendingKind::kPinned;
  p->node = node;
  return p;
}

}  // namespace

void Client::Send(std::string_view key, std::span<const std::string_view> args, ReplyCallback done,
                  int64_t deadline_ns) {
  SubmitOne(*state_, internal::MakePending(key, args, std::move(done)), deadline_ns);
}

void Client::Send(std::string_view key, std::span<const std::string> args, ReplyCallback done,
                  int64_t deadline_ns) {
  SubmitOne(*state_, internal::MakePending(key, args, std::move(done)), deadline_ns);
}

void Client::Send(Batch&& batch) {
  if (batch.items_.empty()) return;
  const int64_t now = state_->clock.MonotonicNs();
  for (auto& p : batch.items_) SetDeadline(*p, now, state_->options, p->deadline_ns);
  SubmitFromCaller(*state_, batch.items_);
  batch.items_.clear();
}

void Client::SendToNode(const std::string& node, std::span<const std::string_view> args,
                        ReplyCallback done) {
  SubmitOne(*state_, PinnedTo(node, internal::MakePending("", args, std::move(done))), 0);
}

void Client::SendToNode(const std::string& node, std::span<const std::string> args,
                        ReplyCallback done) {
  SubmitOne(*state_, PinnedTo(node, internal::MakePending("", args, std::move(done))), 0);
}

namespace {

// A blocking call's rendezvous with its callback.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  OwnedReply reply;
};

ReplyCallback WaiterCallback(std::shared_ptr<Waiter> waiter) {
  return [waiter = std::move(waiter)](Status status, const redisReply* reply) {
    OwnedReply copy;
    if (status.ok()) {
      copy = CopyReply(*reply);
      if (copy == nullptr) status = InternalError("out of memory copying a redis reply");
    }
    std::lock_guard<std::mutex> lock(waiter->mu);
    waiter->status = std::move(status);
    waiter->reply = std::move(copy);
    waiter->done = true;
    waiter->cv.notify_one();
  };
}

Result<OwnedReply> Wait(Waiter& waiter) {
  // No timeout here: every request is answered within the client's timeout.
  std::unique_lock<std::mutex> lock(waiter.mu);
  waiter.cv.wait(lock, [&] { return waiter.done; });
  if (!waiter.status.ok()) return waiter.status;
  return std::move(waiter.reply);
}

Status CallOnLoopError() {
  return InternalError(
      "redis Client::Call from a thread that runs the client's I/O (an I/O thread, or one "
      "driving a loop) would deadlock");
}

}  // namespace

Result<OwnedReply> Client::Call(std::string_view key, std::span<const std::string_view> args) {
  if (RunsIoHere()) return CallOnLoopError();
  auto waiter = std::make_shared<Waiter>();
  Send(key, args, WaiterCallback(waiter));
  return Wait(*waiter);
}

Result<OwnedReply> Client::Call(std::string_view key, std::span<const std::string> args) {
  if (RunsIoHere()) return CallOnLoopError();
  auto waiter = std::make_shared<Waiter>();
  Send(key, args, WaiterCallback(waiter));
  return Wait(*waiter);
}

Result<OwnedReply> Client::Call(std::string_view key, std::span<const std::string> args,
                                int64_t deadline_ns) {
  if (RunsIoHere()) return CallOnLoopError();
  auto waiter = std::make_shared<Waiter>();
  Send(key, args, WaiterCallback(waiter), deadline_ns);
  return Wait(*waiter);
}

Result<OwnedReply> Client::CallNode(const std::string& node,
                                    std::span<const std::string_view> args) {
  if (RunsIoHere()) return CallOnLoopError();
  auto waiter = std::make_shared<Waiter>();
  SendToNode(node, args, WaiterCallback(waiter));
  return Wait(*waiter);
}

bool Client::NoteWrongType(std::string_view message, std::span<const std::string> keys) {
  WrongType what;
  if (!ParseWrongType(message, &what)) return false;
  std::string_view key;
  if (what.key_index >= 1 && static_cast<size_t>(what.key_index) <= keys.size()) {
    key = keys[static_cast<size_t>(what.key_index) - 1];
  } else if (!keys.empty()) {
    key = keys.front();
  }
  state_->wrong_types.Report(key, what, state_->clock.MonotonicNs());
  return true;
}

Status Client::Health() const {
  const StoreUrl& url = state_->options.url;
  std::vector<std::string> needed;
  bool any_will_do = false;  // a cluster without a map: one seed is enough
  if (url.mode == StoreMode::kSentinel) {
    const std::string master = state_->master().ToString();
    if (state_->CircuitOpen(master)) {
      return UnavailableError("redis circuit open for the master " + master +
                              " that the sentinels name for '" + url.master_name +
                              "' (waiting for them to follow a failover)");
    }
    return Status::Ok();
  } else if (url.mode != StoreMode::kCluster) {
    needed.push_back(url.nodes.front().ToString());
  } else if (std::shared_ptr<const SlotMap> map = state_->slot_map(); map != nullptr) {
    needed = map->nodes();
  } else {
    for (const HostPort& seed : url.nodes) needed.push_back(seed.ToString());
    any_will_do = true;
  }
  std::string open;
  size_t open_count = 0;
  for (const std::string& node : needed) {
    if (!state_->CircuitOpen(node)) continue;
    ++open_count;
    if (!open.empty()) open += ", ";
    open += node;
  }
  if (any_will_do) {
    if (open_count < needed.size()) {
      return UnavailableError(
          "redis cluster: no slot map yet (no seed has answered CLUSTER SLOTS)");
    }
    return UnavailableError("redis circuit open for every seed: " + open);
  }
  if (open_count > 0) return UnavailableError("redis circuit open for " + open);
  return Status::Ok();
}

std::vector<std::string> Client::Masters() {
  const ClientOptions& options = state_->options;
  if (options.url.mode == StoreMode::kSentinel) return {state_->master().ToString()};
  if (options.url.mode != StoreMode::kCluster) return {options.url.nodes.front().ToString()};
  std::shared_ptr<const SlotMap> map = state_->slot_map();
  if (map == nullptr) {
    state_->RequestSlotRefresh();
    map = state_->WaitForSlotMap((options.connect_timeout_ms + options.timeout_ms) * 1'000'000);
  }
  if (map == nullptr) return {};
  return map->nodes();
}

Client::Stats Client::GetStats() const {
  const internal::Counters& c = state_->counters;
  constexpr auto r = std::memory_order_relaxed;
  Stats s;
  s.requests = c.requests.load(r);
  s.replies = c.replies.load(r);
  s.error_replies = c.error_replies.load(r);
  s.timeouts = c.timeouts.load(r);
  s.unavailable = c.unavailable.load(r);
  s.backend_errors = s.timeouts + s.unavailable;
  s.circuit_rejections = c.circuit_rejections.load(r);
  s.queue_full = c.queue_full.load(r);
  s.open_circuits = c.open_circuits.load(r);
  s.circuit_opens = c.circuit_opens.load(r);
  s.connections = c.connections.load(r);
  s.connects = c.connects.load(r);
  s.reconnects = c.reconnects.load(r);
  s.connect_failures = c.connect_failures.load(r);
  s.connections_lost = c.connections_lost.load(r);
  s.stale_replies = c.stale_replies.load(r);
  s.stale_resets = c.stale_resets.load(r);
  s.moved = c.moved.load(r);
  s.ask = c.ask.load(r);
  s.slot_map_refreshes = c.slot_map_refreshes.load(r);
  s.writes = c.writes.load(r);
  s.commands_written = c.commands_written.load(r);
  s.wrong_type = state_->wrong_types.count();
  return s;
}

}  // namespace floodgate::redis
