// ReplyQueue: a connection's replies kept in request order when some of
// them finish later than requests that came after them (Redis round trips).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "server/net/session.h"

namespace floodgate::server {

// Not thread-safe: one session's, on its loop.
//
// Requests are answered in order. A synchronous reply goes straight to the
// connection's output when nothing is in flight ahead of it (the common
// case costs nothing); otherwise it waits in a segment behind the pending
// ones. Completing a pending segment releases every finished segment at the
// front of the queue.
class ReplyQueue {
 public:
  // Where the next synchronous reply goes.
  std::string* Target(std::string* output) {
    if (segments_.empty()) return output;
    if (!segments_.back().ready) Push(true);
    return &segments_.back().data;
  }

  // A place for a reply that will arrive later; Complete() it with the tag.
  uint64_t Reserve() {
    Push(false);
    ++in_flight_;
    return segments_.back().tag;
  }

  // Writes the reply of request `tag` with `write(std::string* reply)` (a
  // Completion, or any callable of that shape), then moves every finished
  // reply at the front to `output`. Unknown tags are ignored.
  template <typename Write>
  void Complete(uint64_t tag, Write&& write, std::string* output) {
    if (segments_.empty() || tag < segments_.front().tag) return;
    const uint64_t index = tag - segments_.front().tag;
    if (index >= segments_.size() || segments_[index].ready) return;
    --in_flight_;
    if (index > 0) {  // behind a pending reply: the front is still pending
      write(&segments_[index].data);
      segments_[index].ready = true;
      return;
    }
    // First in line: a reserved segment holds nothing yet, so the reply goes
    // straight to the output, as one known at once would.
    write(output);
    segments_.pop_front();
    while (!segments_.empty() && segments_.front().ready) {
      output->append(segments_.front().data);
      segments_.pop_front();
    }
  }

  // Replies started and not completed.
  size_t in_flight() const { return in_flight_; }

 private:
  struct Segment {
    uint64_t tag;
    bool ready;
    std::string data;
  };
  void Push(bool ready) { segments_.push_back(Segment{next_tag_++, ready, {}}); }

  // Oldest first, tags consecutive; the front one, if any, is pending (a
  // ready one at the front is released at once).
  std::deque<Segment> segments_;
  uint64_t next_tag_ = 1;
  size_t in_flight_ = 0;
};

// A session whose replies keep request order through a ReplyQueue: its
// completions and its requests in flight are the queue's. Not thread-safe,
// as any session.
class QueuedSession : public Session {
 public:
  void OnCompletion(uint64_t tag, Completion completion, std::string* output) override {
    replies_.Complete(tag, std::move(completion), output);
  }

  size_t InFlight() const override { return replies_.in_flight(); }

 protected:
  ReplyQueue replies_;
};

}  // namespace floodgate::server
