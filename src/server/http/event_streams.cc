// One thread for every stream: the events of a second are made once and
// handed to each stream's loop (ConnectionRef::Complete), which writes them
// within the connection's output bounds: a reader that stops reading is
// closed by its loop like any other (output_soft_limit), never blocks this
// thread or the others' events.
#include "server/http/event_streams.h"

#include <algorithm>
#include <memory>

namespace floodgate::server {

EventStreams::EventStreams(std::function<std::string(int64_t tick, bool streaming)> tick,
                           const Clock& clock)
    : tick_(std::move(tick)), clock_(clock) {
  ticker_.Start([this] { Run(); });
}

EventStreams::~EventStreams() { Stop(); }

void EventStreams::Stop() { ticker_.Stop(); }

bool EventStreams::Add(const ConnectionRef& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  if (streams_.size() >= kMaxEventStreams) return false;
  streams_.push_back(ref);
  return true;
}

void EventStreams::Remove(const ConnectionRef& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(streams_, [&](const ConnectionRef& r) {
    return r.loop == ref.loop && r.fd == ref.fd && r.generation == ref.generation;
  });
}

size_t EventStreams::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

void EventStreams::Run() {
  for (int64_t tick = 0;; ++tick) {
    // Just past the next whole second. A tick that overran (a slow store)
    // is not made up for in a burst: the next is past the next second.
    // Which second is the wall clock's; the wait for it is timed on the
    // monotonic reading of the same clock, as every wait is, so that a
    // ManualClock drives the ticks (tests) and the thread sleeps in real
    // time at most the clock's MaxSleepNs before it reads the clock again.
    const int64_t now_ms = clock_.NowMs();
    const int64_t due_ns =
        clock_.MonotonicNs() + (1000 - now_ms % 1000 + kTickAfterMs) * int64_t{1'000'000};
    for (int64_t now = clock_.MonotonicNs(); now < due_ns; now = clock_.MonotonicNs()) {
      if (!ticker_.SleepFor(clock_.SleepNs(now, due_ns))) return;
    }
    if (ticker_.stopping()) return;
    // Made outside the lock: it reads the server's counters and may wait
    // for the store; streams opened meanwhile get the next tick's.
    bool streaming;
    {
      std::lock_guard<std::mutex> lock(mu_);
      streaming = !streams_.empty();
    }
    const std::string text = tick_(tick, streaming);
    std::vector<ConnectionRef> streams;
    if (!text.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      streams = streams_;
    }
    auto shared = std::make_shared<const std::string>(text);
    for (const ConnectionRef& ref : streams) {
      ref.Complete(kStreamTag, [shared](std::string* out) { out->append(*shared); });
    }
  }
}

}  // namespace floodgate::server
