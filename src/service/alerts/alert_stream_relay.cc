// AlertStreamRelay: see alert_stream_relay.h.
#include "service/alerts/alert_stream_relay.h"

#include <algorithm>
#include <span>
#include <unordered_set>

#include "common/log.h"

namespace floodgate::service {
namespace {

// Entries per script call: a call runs atomically, holding Redis.
constexpr size_t kAddBatch = 100;
constexpr size_t kIdBatch = 500;
constexpr size_t kClaimBatch = 100;

template <typename T, typename F>
Status InChunks(const std::vector<T>& items, size_t chunk, F call, size_t* done) {
  *done = 0;
  while (*done < items.size()) {
    const size_t n = std::min(chunk, items.size() - *done);
    if (Status s = call(std::span<const T>(items.data() + *done, n)); !s.ok()) return s;
    *done += n;
  }
  return Status::Ok();
}

}  // namespace

AlertStreamRelay::AlertStreamRelay(store::AlertLog& stream, AlertDelivery& delivery,
                                   Options options)
    : stream_(stream),
      delivery_(delivery),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock::Default()) {}

void AlertStreamRelay::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

AlertStreamRelay::~AlertStreamRelay() { Stop({}); }

bool AlertStreamRelay::Publish(PendingAlert alert) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || outbox_.size() >= options_.outbox_capacity) return false;
    outbox_.push_back(std::move(alert));
    kick_ = true;
  }
  wake_.notify_one();
  return true;
}

void AlertStreamRelay::Finished(const PendingAlert& alert) {
  if (alert.stream_id.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    acks_.push_back(alert.stream_id);
    kick_ = true;
  }
  wake_.notify_one();
}

size_t AlertStreamRelay::outbox_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outbox_.size();
}

bool AlertStreamRelay::WaitFlushed(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return flushed_.wait_for(lock, timeout, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return outbox_.empty() && acks_.empty();
  });
}

void AlertStreamRelay::NoteFailure(const char* what, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_.MonotonicNs();
    if (now < next_failure_log_ns_) return;
    next_failure_log_ns_ = now + int64_t{10} * 1'000'000'000;
  }
  Log(LogLevel::kWarn, "alert stream unavailable; retrying",
      {{"step", what}, {"error", status.message()}});
}

void AlertStreamRelay::Run() {
  const int64_t touch_every_ns = std::max<int64_t>(1, options_.claim_after_ms / 3) * 1'000'000;
  const int64_t poll_ns = options_.poll_ms * 1'000'000;
  const int64_t start = clock_.MonotonicNs();
  int64_t next_touch = start + touch_every_ns;
  int64_t next_round = start + poll_ns;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (stop_) return;
    // A round when something was published or finished, or every poll_ms.
    if (const int64_t now = clock_.MonotonicNs(); !kick_ && now < next_round) {
      wake_.wait_for(lock, std::chrono::nanoseconds(clock_.SleepNs(now, next_round)),
                     [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return kick_ || stop_; });
      continue;
    }
    kick_ = false;
    lock.unlock();
    const int64_t now = clock_.MonotonicNs();
    const bool touch = now >= next_touch;
    if (touch) next_touch = now + touch_every_ns;
    next_round = now + poll_ns;
    const bool more = Round(touch);
    lock.lock();
    if (more) kick_ = true;
  }
}

bool AlertStreamRelay::Round(bool touch) {
  std::vector<PendingAlert> outbox;
  std::vector<std::string> acks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox.swap(outbox_);
    acks.swap(acks_);
  }
  size_t done = 0;
  std::vector<std::string> queued;
  Status s = InChunks(
      outbox, kAddBatch,
      [&](std::span<const PendingAlert> chunk) -> Status {
        auto trimmed = stream_.Add(chunk);
        if (!trimmed.ok()) return trimmed.status();
        if (*trimmed > 0 && options_.on_trimmed) options_.on_trimmed(*trimmed);
        for (const PendingAlert& a : chunk) queued.push_back(a.event_id);
        return Status::Ok();
      },
      &done);
  if (!queued.empty() && options_.on_queued) options_.on_queued(queued);
  if (!s.ok()) NoteFailure("add", s);
  size_t acked = 0;
  Status a = InChunks(
      acks, kIdBatch, [&](std::span<const std::string> chunk) { return stream_.Ack(chunk); },
      &acked);
  if (!a.ok()) NoteFailure("ack", a);
  {
    // What failed waits for the next round, in front of what came since.
    std::lock_guard<std::mutex> lock(mu_);
    if (done < outbox.size()) {
      outbox_.insert(outbox_.begin(), std::make_move_iterator(outbox.begin() + done),
                     std::make_move_iterator(outbox.end()));
    }
    if (acked < acks.size()) acks_.insert(acks_.begin(), acks.begin() + acked, acks.end());
    if (outbox_.empty() && acks_.empty()) flushed_.notify_all();
  }

  std::vector<PendingAlert> held;
  if (touch) {
    held = delivery_.Snapshot();
    std::vector<std::string> ids;
    for (const PendingAlert& p : held) {
      if (!p.stream_id.empty()) ids.push_back(p.stream_id);
    }
    size_t touched = 0;
    if (Status t = InChunks(
            ids, kIdBatch, [&](std::span<const std::string> chunk) { return stream_.Touch(chunk); },
            &touched);
        !t.ok()) {
      NoteFailure("touch", t);
    }
    auto forgot = stream_.Forget(kForgetAfterClaims * options_.claim_after_ms);
    if (!forgot.ok()) {
      NoteFailure("forget", forgot.status());
    } else if (*forgot > 0) {
      Log(LogLevel::kInfo, "alert stream: forgot the consumers of stopped servers",
          {{"consumers", std::to_string(*forgot)}});
    }
  }

  const size_t room = std::min(delivery_.Room(), kClaimBatch);
  if (room == 0) return false;
  auto claimed = stream_.Claim(room, options_.claim_after_ms);
  if (!claimed.ok()) {
    NoteFailure("claim", claimed.status());
    return false;
  }
  if (claimed->empty()) return false;
  // An entry this server holds (retrying) can come back from a claim if its
  // touch came late: it is not delivered twice from here.
  if (held.empty()) held = delivery_.Snapshot();
  std::unordered_set<std::string> holding;
  for (const PendingAlert& p : held) holding.insert(p.stream_id);
  for (PendingAlert& p : *claimed) {
    if (holding.contains(p.stream_id)) continue;
    // No room after all (events emitted meanwhile): the entry stays pending
    // for this consumer and comes back to a claim after claim_after_ms.
    (void)delivery_.Add(std::move(p));
  }
  return claimed->size() == room;
}

int64_t AlertStreamRelay::Stop(std::vector<PendingAlert> unfinished) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return 0;
    stop_ = stopped_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<PendingAlert> outbox;
  std::vector<std::string> acks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox.swap(outbox_);
    acks.swap(acks_);
    flushed_.notify_all();
  }
  int64_t lost = 0;
  std::vector<PendingAlert> claimed;
  for (PendingAlert& p : unfinished) {
    // Events never appended (none, normally: only claimed ones reach the
    // delivery) join the outbox.
    (p.stream_id.empty() ? outbox : claimed).push_back(std::move(p));
  }
  size_t done = 0;
  if (Status s = InChunks(
          outbox, kAddBatch,
          [&](std::span<const PendingAlert> chunk) { return stream_.Add(chunk).status(); }, &done);
      !s.ok()) {
    lost = static_cast<int64_t>(outbox.size() - done);
    Log(LogLevel::kError, "alert events lost at shutdown: the stream is unavailable",
        {{"events", std::to_string(lost)}, {"error", s.message()}});
  }
  if (Status s = InChunks(
          acks, kIdBatch, [&](std::span<const std::string> chunk) { return stream_.Ack(chunk); },
          &done);
      !s.ok()) {
    Log(LogLevel::kWarn,
        "delivered alert events not acknowledged; another server may send them "
        "again (the receiver sees the same event_id)",
        {{"error", s.message()}});
  }
  if (Status s = InChunks(
          claimed, kAddBatch,
          [&](std::span<const PendingAlert> chunk) { return stream_.Release(chunk); }, &done);
      !s.ok()) {
    Log(LogLevel::kWarn,
        "pending alert events not handed back; they stay claimed by this server and are "
        "taken over after alert_delivery.claim_after",
        {{"events", std::to_string(claimed.size() - done)}, {"error", s.message()}});
  }
  // Holding nothing now (normally), this server's name leaves the group.
  if (Status s = stream_.Leave(); !s.ok()) {
    Log(LogLevel::kWarn,
        "alert stream: this server's consumer stays in the group; the other servers forget it",
        {{"error", s.message()}});
  }
  return lost;
}

}  // namespace floodgate::service
