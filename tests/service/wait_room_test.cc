// WaitRoom on its own: held requests tried at their retry time, in arrival
// order per subject, given up at their deadline, bounded per rule, dropped
// unanswered when their owner goes, all ended by a time when the server
// stops, with attempts answered now or later on another thread.
#include "service/waiting/wait_room.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"

namespace floodgate::service {
namespace {

// What happened to the test's requests, in order.
struct Journal {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;

  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
    cv.notify_all();
  }
  bool WaitFor(size_t n, int ms = 5000) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return events.size() >= n; });
  }
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

// Threads standing in for a store's I/O threads, joined by the test before
// its room goes: an answer may still be on its way into the room after the
// journal shows it, and a store's threads outlive no room in floodgate.
// (Declared after the room, so that its destructor joins them first.)
struct IoThreads {
  ~IoThreads() { JoinAll(); }
  std::mutex mu;
  std::vector<std::thread> all;
  template <typename F>
  void Start(F&& f) {
    std::lock_guard<std::mutex> lock(mu);
    all.emplace_back(std::forward<F>(f));
  }
  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.swap(all);
    }
    for (std::thread& t : threads) t.join();
  }
};

// Admitted once `room` (shared) has a unit left, else denied for `retry_ms`
// (polled every `poll_ms` when above 0); answered on one of `io` (null: at
// once, on the room's thread).
class Fake final : public HeldRequest {
 public:
  Fake(std::string name, Journal& journal, std::atomic<int>& room, int64_t retry_ms,
       IoThreads* io = nullptr, int64_t poll_ms = 0)
      : name_(std::move(name)),
        journal_(journal),
        room_(room),
        retry_ms_(retry_ms),
        poll_ms_(poll_ms),
        io_(io) {}

  void Try(AttemptDone done) override {
    auto decide = [this, done = std::move(done)]() mutable {
      int left = room_.load();
      while (left > 0 && !room_.compare_exchange_weak(left, left - 1)) {
      }
      if (left > 0) {
        journal_.Add(name_ + ":admitted");
        done({true, 0});
      } else {
        done({false, retry_ms_, poll_ms_});
      }
    };
    if (io_ != nullptr) {
      io_->Start(std::move(decide));  // a store's I/O thread
    } else {
      decide();
    }
  }
  void GiveUp(int64_t) override { journal_.Add(name_ + ":gave_up"); }

 private:
  const std::string name_;
  Journal& journal_;
  std::atomic<int>& room_;
  const int64_t retry_ms_;
  const int64_t poll_ms_;
  IoThreads* const io_;
};

class WaitRoomTest : public ::testing::Test {
 protected:
  int64_t Now() const { return clock_.NowMs(); }
  SystemClock clock_;
  Journal journal_;
  std::atomic<int> room_{0};
};

TEST_F(WaitRoomTest, TriedAtTheRetryTimeThenAdmitted) {
  WaitRoom room(clock_);
  const int64_t start = Now();
  ASSERT_TRUE(room.Hold("r", 10, "s", 1, start + 2000, 100,
                        std::make_unique<Fake>("a", journal_, room_, 50)));
  EXPECT_TRUE(room.Busy("s"));
  EXPECT_EQ(room.waiting(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  room_ = 1;  // room comes; the next try (every 50 ms) takes it
  ASSERT_TRUE(journal_.WaitFor(1));
  EXPECT_EQ(journal_.Get(), std::vector<std::string>{"a:admitted"});
  EXPECT_GE(Now() - start, 150);
  // The room counts the outcome just after the attempt answered.
  for (int i = 0; i < 100 && room.waiting() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(room.waiting(), 0);
  const auto stats = room.Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].second.admitted, 1);
  EXPECT_EQ(stats[0].second.held, 1);
  EXPECT_FALSE(room.Busy("s"));
}

TEST_F(WaitRoomTest, ArrivalOrderPerSubjectAndWakeTriesAtOnce) {
  WaitRoom room(clock_);
  // Past the 10 s retry: a denied waiter waits rather than gives up.
  const int64_t deadline = Now() + 20'000;
  IoThreads io;
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(room.Hold("r", 10, "s", 0, deadline, 10'000,
                          std::make_unique<Fake>(name, journal_, room_, 10'000, &io)));
  }
  // Nothing would be tried for 10 s; a wake with room for two tries now.
  room_ = 2;
  room.Wake("s");
  ASSERT_TRUE(journal_.WaitFor(2));
  room_ = 1;
  room.Wake("s");
  ASSERT_TRUE(journal_.WaitFor(3));
  EXPECT_EQ(journal_.Get(), (std::vector<std::string>{"a:admitted", "b:admitted", "c:admitted"}));
  io.JoinAll();
}

TEST_F(WaitRoomTest, GivenUpByTheDeadlineOrAtOnceWhenTheRetryIsTooLate) {
  WaitRoom room(clock_);
  const int64_t start = Now();
  ASSERT_TRUE(room.Hold("r", 10, "s", 0, start + 3000, 0,
                        std::make_unique<Fake>("late", journal_, room_, 5000)));
  ASSERT_TRUE(room.Hold("r", 10, "t", 0, start + 300, 0,
                        std::make_unique<Fake>("soon", journal_, room_, 100)));
  // "late" can never make it: given up at its first try, not at its deadline.
  ASSERT_TRUE(journal_.WaitFor(1));
  EXPECT_EQ(journal_.Get()[0], "late:gave_up");
  EXPECT_LT(Now() - start, 2000);
  ASSERT_TRUE(journal_.WaitFor(2));
  EXPECT_EQ(journal_.Get()[1], "soon:gave_up");
  EXPECT_GE(Now() - start, 200);
  EXPECT_LE(Now() - start, 1000);
  EXPECT_EQ(room.waiting(), 0);
  EXPECT_EQ(room.Stats()[0].second.timed_out, 2);
}

TEST_F(WaitRoomTest, AWaitThatPollsIsHeldToItsDeadline) {
  WaitRoom room(clock_);
  // Room could come any moment (polled every 100 ms), though the denial
  // names a retry far past the deadline: held to the deadline, not given up
  // at the last poll before it (~200 ms) or at once.
  const int64_t start = Now();
  ASSERT_TRUE(room.Hold("r", 10, "s", 0, start + 250, 100,
                        std::make_unique<Fake>("polled", journal_, room_, 60'000, nullptr, 100)));
  ASSERT_TRUE(journal_.WaitFor(1));
  EXPECT_EQ(journal_.Get()[0], "polled:gave_up");
  EXPECT_GE(Now() - start, 250);
  EXPECT_LE(Now() - start, 2000);
  // First tried after its deadline: tried at the deadline instead.
  ASSERT_TRUE(room.Hold("r", 10, "t", 0, Now() + 50, 100,
                        std::make_unique<Fake>("short", journal_, room_, 60'000, nullptr, 100)));
  ASSERT_TRUE(journal_.WaitFor(2));
  EXPECT_EQ(journal_.Get()[1], "short:gave_up");
  EXPECT_EQ(room.Stats()[0].second.timed_out, 2);
}

TEST_F(WaitRoomTest, RoomThatComesUnannouncedBeforeTheDeadlineAdmitsAtTheLastTry) {
  WaitRoom room(clock_);
  // Polled every 200 ms from 0: tries at ~200 and ~400, the last at the
  // 500 ms deadline. Room comes (no Wake) at ~430, after the last poll:
  // only the try at the deadline sees it.
  const int64_t start = Now();
  IoThreads io;
  ASSERT_TRUE(room.Hold("r", 10, "s", 0, start + 500, 200,
                        std::make_unique<Fake>("late", journal_, room_, 60'000, &io, 200)));
  std::this_thread::sleep_for(std::chrono::milliseconds(430) -
                              std::chrono::milliseconds(Now() - start));
  room_ = 1;
  ASSERT_TRUE(journal_.WaitFor(1));
  EXPECT_EQ(journal_.Get(), std::vector<std::string>{"late:admitted"});
  EXPECT_GE(Now() - start, 430);
  io.JoinAll();
}

TEST_F(WaitRoomTest, ATryDueAtTheDeadlineIsMade) {
  WaitRoom room(clock_);
  // The retry the denial names is the deadline itself: tried there, and
  // admitted (rather than given up for having reached the deadline).
  const int64_t start = Now();
  ASSERT_TRUE(room.Hold("r", 10, "s", 0, start + 200, 200,
                        std::make_unique<Fake>("edge", journal_, room_, 200)));
  room_ = 1;
  ASSERT_TRUE(journal_.WaitFor(1));
  EXPECT_EQ(journal_.Get(), std::vector<std::string>{"edge:admitted"});
  EXPECT_GE(Now() - start, 200);
}

TEST_F(WaitRoomTest, EndByAnswersEveryWaitByThenHeldBeforeOrAfter) {
  WaitRoom room(clock_);
  const int64_t start = Now();
  // Each could wait a minute; the server stops, and all end by 600 ms.
  ASSERT_TRUE(room.Hold("r", 10, "s", 0, start + 60'000, 10'000,
                        std::make_unique<Fake>("before", journal_, room_, 10'000)));
  ASSERT_TRUE(room.Hold("r", 10, "t", 0, start + 60'000, 50,
                        std::make_unique<Fake>("admitted", journal_, room_, 50)));
  room.EndBy(start + 600);
  ASSERT_TRUE(room.Hold("r", 10, "u", 0, start + 60'000, 10'000,
                        std::make_unique<Fake>("after", journal_, room_, 10'000)));
  room_ = 1;  // room for one, which the waiter tried every 50 ms takes
  ASSERT_TRUE(journal_.WaitFor(3));
  EXPECT_GE(Now() - start, 600);
  EXPECT_LT(Now() - start, 10'000);  // not at their retry, nor their deadline
  auto got = journal_.Get();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got,
            (std::vector<std::string>{"admitted:admitted", "after:gave_up", "before:gave_up"}));
  const auto stats = room.Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].second.timed_out, 2);
  EXPECT_EQ(stats[0].second.admitted, 1);
}

TEST_F(WaitRoomTest, MaxWaitersPerRule) {
  WaitRoom room(clock_);
  const int64_t deadline = Now() + 5000;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(room.Hold("r", 3, "s" + std::to_string(i), 0, deadline, 10'000,
                          std::make_unique<Fake>("x", journal_, room_, 10'000)));
  }
  EXPECT_FALSE(room.Hold("r", 3, "s9", 0, deadline, 10'000,
                         std::make_unique<Fake>("x", journal_, room_, 10'000)));
  EXPECT_TRUE(room.Hold("other", 3, "s9", 0, deadline, 10'000,
                        std::make_unique<Fake>("x", journal_, room_, 10'000)));
  const auto stats = room.Stats();
  EXPECT_EQ(stats[1].first, "r");
  EXPECT_EQ(stats[1].second.full, 1);
  EXPECT_EQ(stats[1].second.waiting, 3);
}

TEST_F(WaitRoomTest, CancelDropsAnOwnersWaitersUnansweredAndNeverTriesThem) {
  {
    WaitRoom room(clock_);
    const int64_t deadline = Now() + 5000;
    ASSERT_TRUE(room.Hold("r", 10, "s", 7, deadline, 50,
                          std::make_unique<Fake>("gone1", journal_, room_, 50)));
    ASSERT_TRUE(room.Hold("r", 10, "s", 8, deadline, 50,
                          std::make_unique<Fake>("kept", journal_, room_, 50)));
    ASSERT_TRUE(room.Hold("r", 10, "u", 7, deadline, 50,
                          std::make_unique<Fake>("gone2", journal_, room_, 50)));
    room.Cancel(7);
    EXPECT_EQ(room.waiting(), 1);
    room_ = 5;
    ASSERT_TRUE(journal_.WaitFor(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(journal_.Get(), std::vector<std::string>{"kept:admitted"});
    EXPECT_EQ(room_.load(), 4);  // nothing spent for the cancelled ones
    const auto stats = room.Stats();
    EXPECT_EQ(stats[0].second.cancelled, 2);
    EXPECT_EQ(stats[0].second.waiting, 0);
  }
}

TEST_F(WaitRoomTest, DestructionGivesUpOnWhatIsHeld) {
  {
    WaitRoom room(clock_);
    ASSERT_TRUE(room.Hold("r", 10, "s", 0, Now() + 60'000, 60'000,
                          std::make_unique<Fake>("a", journal_, room_, 60'000)));
  }
  EXPECT_EQ(journal_.Get(), std::vector<std::string>{"a:gave_up"});
}

TEST_F(WaitRoomTest, TickRunsOnTheRoomsThread) {
  std::atomic<int> ticks{0};
  WaitRoom room(clock_);
  room.SetTick(10, [&](int64_t) { ticks.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(35));
  // The room sleeps until a timer or the tick: it must wake for the tick.
  room.Wake("nothing");
  for (int i = 0; i < 100 && ticks.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(ticks.load(), 2);
}

}  // namespace
}  // namespace floodgate::service
