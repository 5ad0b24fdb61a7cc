// RemoteStore: see remote_store.h. Decisions wait in a batch (the caller's
// loop's, or one made for the call) and go out in as few script calls as
// the deployment allows, each answered by its deadline.
#include "redis/remote_store.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "redis/alert_stream.h"
#include "redis/control_store.h"
#include "redis/redis_sketch_board.h"
#include "redis/script_call.h"

namespace floodgate::redis {
namespace {

void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

ClientOptions OptionsFor(const StoreUrl& url, const RedisConfig& c, const Clock& clock) {
  ClientOptions o;
  o.url = url;
  o.clock = &clock;
  o.timeout_ms = c.timeout_ms;
  o.connect_timeout_ms = c.connect_timeout_ms;
  o.connections_per_node = c.connections_per_node;
  o.io_threads = c.io_threads;
  return o;
}

}  // namespace

// A decision waiting in a batch.
struct RemoteStore::Pending {
  const core::CompiledRule* rule;  // kept alive by `done` (see store.h)
  std::string_view tag;            // its fingerprint, likewise
  std::optional<int64_t> at_ms;
  std::string key;  // StateKey of the subject
  int64_t cost;
  int64_t sent_ms;      // the caller's clock when it came: the local cache's instant
  int64_t deadline_ns;  // when the answer is due, on the clock's MonotonicNs
  store::CheckDone done;
};

class RemoteStore::HeldBatch final : public store::Batch {
 public:
  HeldBatch(RemoteStore& store, int max_in_flight) : store_(store), max_in_flight_(max_in_flight) {}
  ~HeldBatch() override { Send(); }

  void Flush() override {
    timeout_from_ns_ = 0;
    if (pending_.empty()) return;
    // Held while the calls in flight are at the bound, unless there is a
    // full call's worth already (see LimiterCore::NewBatch).
    if (max_in_flight_ > 0 && pending_.size() < RedisStore::kMaxDecisionsPerCall &&
        in_flight_->load(std::memory_order_acquire) >= max_in_flight_) {
      return;
    }
    Send();
  }
  void FlushAll() override {
    timeout_from_ns_ = 0;
    Send();
  }
  size_t size() const override { return pending_.size(); }
  void CountTimeoutFrom(int64_t monotonic_ns) override { timeout_from_ns_ = monotonic_ns; }

  int64_t timeout_from_ns() const { return timeout_from_ns_; }
  void Add(Pending p) { pending_.push_back(std::move(p)); }
  // Sends every decision held, and empties the batch.
  void Send();

 private:
  RemoteStore& store_;
  const int max_in_flight_;  // 0: no bound
  int64_t timeout_from_ns_ = 0;
  // Calls sent and not answered; decremented on the store's I/O thread.
  std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
  std::vector<Pending> pending_;
  std::vector<char> taken_;  // scratch for Send
};

Result<std::unique_ptr<RemoteStore>> RemoteStore::Create(const StoreUrl& url,
                                                         const RedisConfig& config,
                                                         const Clock& clock) {
  auto redis = RedisStore::Create(OptionsFor(url, config, clock));
  if (!redis.ok()) return redis.status();
  return std::unique_ptr<RemoteStore>(new RemoteStore(std::move(*redis), config, clock));
}

RemoteStore::RemoteStore(std::unique_ptr<RedisStore> redis, const RedisConfig& config,
                         const Clock& clock)
    : clock_(clock),
      redis_(std::move(redis)),
      sets_(redis_->client()),
      otp_(redis_->client()),
      leases_(redis_->client()),
      reservations_(redis_->client()),
      timeout_ns_(config.timeout_ms * 1'000'000) {
  if (config.local_cache) {
    deny_cache_ =
        std::make_unique<LocalDenyCache>(static_cast<size_t>(config.local_cache_max_entries));
  }
}

// The client's shutdown answers what is in flight; those answers' callbacks
// may still use the members above, so it goes first.
RemoteStore::~RemoteStore() { redis_.reset(); }

Result<std::string> RemoteStore::Describe(const core::CompiledRule& rule, uint32_t) {
  return Fingerprint(rule);
}

store::Answer RemoteStore::Check(const store::CheckOp& op, Decision* decision, Status* status,
                                 store::CheckLater later, store::Batch* batch) {
  if (batch != nullptr) {
    return Queue(op, decision, status, later, static_cast<HeldBatch*>(batch));
  }
  HeldBatch one(*this, 0);
  return Queue(op, decision, status, later, &one);  // sent as `one` goes
}

store::Answer RemoteStore::Queue(const store::CheckOp& op, Decision* decision, Status* status,
                                 store::CheckLater later, HeldBatch* batch) {
  // The instant the request leaves: a denial until T is remembered from
  // here, so a slow reply can only shorten the local denial.
  const int64_t sent_ms = op.at_ms != nullptr ? *op.at_ms
                          : op.read_ms > 0    ? op.read_ms
                                              : clock_.NowMs();
  std::string key = StateKey(op.variant.rule->name, op.variant.rule->tier, op.subject);
  // The cache holds the rules' own denials: a priority class's view or a
  // settle's charge (CompiledRule::kept_back) decides with other capacities.
  if (deny_cache_ != nullptr && op.variant.rule->kept_back == 0 &&
      deny_cache_->Lookup(key, op.cost, sent_ms, decision)) {
    Bump(local_cache_denials_);
    *status = Status::Ok();
    return store::Answer::kNow;
  }
  // The answer is due one timeout after the request came (here, or when the
  // loop began a wait that left it unread), whether it goes to Redis at once
  // or waits in a batch for a call in flight.
  const int64_t from =
      batch->timeout_from_ns() > 0 ? batch->timeout_from_ns() : clock_.MonotonicNs();
  batch->Add(Pending{op.variant.rule, op.variant.tag,
                     op.at_ms != nullptr ? std::optional<int64_t>(*op.at_ms) : std::nullopt,
                     std::move(key), op.cost, sent_ms, from + timeout_ns_, later()});
  return store::Answer::kLater;
}

void RemoteStore::HeldBatch::Send() {
  std::vector<Pending>& checks = pending_;
  if (checks.empty()) return;
  RedisStore& redis = *store_.redis_;
  const size_t per_call = redis.batches() ? RedisStore::kMaxDecisionsPerCall : 1;
  redis::Batch out;
  taken_.assign(checks.size(), 0);
  // Due already (held back too long: a loop that could not flush in time):
  // failed now, not sent.
  const int64_t now_ns = store_.clock_.MonotonicNs();
  for (size_t i = 0; i < checks.size(); ++i) {
    if (checks[i].deadline_ns > now_ns) continue;
    taken_[i] = 1;
    Bump(store_.held_timeouts_);
    Bump(store_.backend_errors_);
    checks[i].done(
        Status(StatusCode::kDeadlineExceeded, "the Redis store's timeout passed before sending"),
        Decision{}, nullptr);
  }
  // What one script call's answers need.
  struct Entry {
    int64_t cost;
    int64_t sent_ms;
    int64_t kept_back;  // the rule's (CompiledRule::kept_back)
    store::CheckDone done;
  };
  for (size_t first = 0; first < checks.size(); ++first) {
    if (taken_[first]) continue;
    const Pending& head = checks[first];
    // One call: this check and the next ones of the same variant and
    // instant, in arrival order (a subject named twice is decided in order).
    std::vector<std::string> keys;
    std::vector<int64_t> costs;
    std::vector<Entry> entries;
    // The call is due when its earliest decision is.
    int64_t deadline_ns = head.deadline_ns;
    for (size_t i = first; i < checks.size() && keys.size() < per_call; ++i) {
      Pending& c = checks[i];
      if (taken_[i] || c.rule != head.rule || c.at_ms != head.at_ms) continue;
      taken_[i] = 1;
      deadline_ns = std::min(deadline_ns, c.deadline_ns);
      keys.push_back(std::move(c.key));
      costs.push_back(c.cost);
      entries.push_back(Entry{c.cost, c.sent_ms, c.rule->kept_back, std::move(c.done)});
    }
    // Moving a vector keeps its elements in place: the spans stay valid
    // while the callback below takes the vectors.
    const std::span<const std::string> key_span(keys);
    const std::span<const int64_t> cost_span(costs);
    in_flight_->fetch_add(1, std::memory_order_relaxed);
    redis.CheckMany(
        *head.rule, head.tag, key_span, cost_span, head.at_ms, head.sent_ms,
        [store = &store_, keys = std::move(keys), entries = std::move(entries),
         in_flight = in_flight_](size_t i, const Status& s, const Decision& d,
                                 const core::AlertOutcome* alerts) mutable {
          // Before any answer: the first one may wake the batch's owner,
          // whose next Flush must see the call done.
          if (i == 0) in_flight->fetch_sub(1, std::memory_order_release);
          Entry& e = entries[i];
          if (!s.ok()) {
            // A key of the wrong type fails its decision alone: made
            // visible (counted, logged once a minute), then answered as
            // any other failure.
            store->client().NoteWrongType(s.message(), std::span<const std::string>(&keys[i], 1));
            Bump(store->backend_errors_);
            e.done(s, Decision{}, nullptr);
            return;
          }
          if (store->deny_cache_ != nullptr && !d.allowed && e.kept_back == 0) {
            store->deny_cache_->Remember(keys[i], e.cost, e.sent_ms, d);
          }
          e.done(s, d, alerts);
        },
        &out, deadline_ns);
  }
  checks.clear();
  redis.client().Send(std::move(out));
}

std::unique_ptr<store::Batch> RemoteStore::NewBatch(int max_calls_in_flight) {
  return std::make_unique<HeldBatch>(*this, max_calls_in_flight);
}

store::Answer RemoteStore::Throttle(const store::ThrottleOp& op, ThrottleResult*, Status*,
                                    store::Later<ThrottleResult> later) {
  redis_->Throttle(op.key, op.max_burst, op.count, op.period_s, op.quantity,
                   op.at_ms != nullptr ? std::optional<int64_t>(*op.at_ms) : std::nullopt,
                   [this, done = later()](const Status& s, const ThrottleResult& r) mutable {
                     if (!s.ok()) Bump(backend_errors_);
                     done(s, r);
                   });
  return store::Answer::kLater;
}

store::Answer RemoteStore::Reset(const store::ResetOp& op, Status*, store::Later<> later) {
  if (deny_cache_ != nullptr) {
    deny_cache_->Forget(StateKey(op.rule, "", op.subject));
    for (const std::string& tier : op.tiers)
      deny_cache_->Forget(StateKey(op.rule, tier, op.subject));
  }
  redis_->Reset(op.rule, op.tiers, op.subject,
                [done = later()](const Status& s) mutable { done(s); });
  return store::Answer::kLater;
}

store::Answer RemoteStore::Refund(const store::RefundOp& op, core::RefundResult*, Status*,
                                  store::Later<core::RefundResult> later) {
  const core::CompiledRule& rule = *op.variant.rule;
  std::string key = StateKey(rule.name, rule.tier, op.subject);
  // A denial remembered here may no longer hold once units come back: the
  // next decision goes to Redis. (Other servers' caches keep theirs until
  // they expire, at worst the wait Redis gave them.)
  if (deny_cache_ != nullptr) deny_cache_->Forget(key);
  const int64_t clock_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
  redis_->Refund(rule, op.variant.tag, key, op.cost,
                 op.at_ms != nullptr ? std::optional<int64_t>(*op.at_ms) : std::nullopt, clock_ms,
                 [this, done = later()](const Status& s, const core::RefundResult& r) mutable {
                   if (!s.ok()) Bump(backend_errors_);
                   done(s, r);
                 });
  return store::Answer::kLater;
}

Status RemoteStore::BlockingAllowed() const {
  if (!redis_->client().RunsIoHere()) return Status::Ok();
  return InternalError(
      "a blocking call on the Redis store from a thread that runs its I/O would wait for "
      "itself; use the *Async forms");
}

Result<std::unique_ptr<LoopDriver>> RemoteStore::NewLoopDriver() {
  return redis_->client().NewLoopDriver();
}

Status RemoteStore::Health() const { return redis_->client().Health(); }

RemoteStore::Usage RemoteStore::GetUsage() const {
  const Client::Stats c = redis_->client().GetStats();
  Usage n;
  n.kind = "redis";
  n.backend_errors =
      backend_errors_.load(std::memory_order_relaxed) + leases_.errors() + reservations_.errors();
  n.local_cache_denials = local_cache_denials_.load(std::memory_order_relaxed);
  n.local_cache_entries = deny_cache_ != nullptr ? static_cast<int64_t>(deny_cache_->size()) : 0;
  n.open_circuits = c.open_circuits;
  n.backend_timeouts =
      static_cast<int64_t>(c.timeouts) + held_timeouts_.load(std::memory_order_relaxed);
  n.wrong_type = static_cast<int64_t>(c.wrong_type);
  return n;
}

std::vector<store::Metric> RemoteStore::Metrics() const {
  const Usage n = GetUsage();
  return {
      {"floodgate_backend_errors_total", "counter",
       "Decisions answered by the rule's on_backend_error because Redis failed or was late.",
       n.backend_errors},
      {"floodgate_backend_timeouts_total", "counter",
       "Redis requests not answered within the timeout.", n.backend_timeouts},
      {"floodgate_backend_open_circuits", "gauge",
       "Redis nodes whose circuit is open (requests fail at once until a probe succeeds).",
       n.open_circuits},
      {"floodgate_local_cache_denials_total", "counter",
       "Denials answered by the local over-limit cache, without a Redis round trip.",
       n.local_cache_denials},
      {"floodgate_local_cache_entries", "gauge", "Subjects in the local over-limit cache.",
       n.local_cache_entries},
      {"floodgate_store_wrong_type_total", "counter",
       "Decisions and operations that failed on a Redis key of another type than floodgate "
       "keeps there (logged once per key per minute).",
       n.wrong_type},
  };
}

std::vector<store::NodeHealth> RemoteStore::ProbeNodes() {
  std::vector<store::NodeHealth> nodes;
  Client& client = redis_->client();
  for (const std::string& address : client.Masters()) {
    store::NodeHealth n;
    n.address = address;
    const int64_t start = clock_.MonotonicNs();
    auto reply = client.CallNode(address, {"PING"});
    const int64_t took = clock_.MonotonicNs() - start;
    if (!reply.ok()) {
      n.error = reply.status().message();
      // The client refuses a node whose breaker is open without trying it.
      n.circuit_open = n.error.find("circuit open") != std::string::npos;
    } else if ((*reply)->type == REDIS_REPLY_ERROR) {
      n.error = DescribeReply(reply->get());
    } else {
      n.up = true;
      n.latency_ms = static_cast<double>(took) / 1e6;
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

store::Rooms RemoteStore::RoomsOf(std::unique_ptr<RemoteStore> store) {
  store::Rooms rooms;
  rooms.backend = store.get();
  rooms.leases = &store->leases_;
  rooms.sets = &store->sets_;
  rooms.otp = &store->otp_;
  rooms.reservations = &store->reservations_;
  // Each opens on the store's client, shared by every server on this Redis.
  Client* client = &store->client();
  const Clock* clock = &store->clock_;
  rooms.alert_log = [client](const store::AlertLogOptions& options) {
    AlertStream::Options o;
    o.consumer = options.consumer;
    o.max_len = options.max_len;
    o.ttl_ms = options.ttl_ms;
    return std::unique_ptr<store::AlertLog>(std::make_unique<AlertStream>(*client, std::move(o)));
  };
  rooms.control =
      [client](const store::ControlStoreOptions&) -> Result<std::unique_ptr<store::ControlStore>> {
    return std::unique_ptr<store::ControlStore>(std::make_unique<RedisControlStore>(*client));
  };
  rooms.sketch_board = [client, clock] {
    return std::unique_ptr<store::SketchBoard>(std::make_unique<RedisSketchBoard>(*client, *clock));
  };
  rooms.store = std::move(store);
  return rooms;
}

}  // namespace floodgate::redis
