// The fake store's reservations (tests/testing/fake_store.h) on the golden
// reservation vectors, so that tests of the layers above on it see a
// ledger as the real stores keep one; and its "later:" subjects answered
// from its thread.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <utility>

#include "floodgate/clock.h"
#include "testing/fake_store.h"
#include "testing/reservation_vectors.h"

namespace floodgate {
namespace {

Status HoldAndWait(store::ReservationLedger& ledger, const store::HoldOp& op,
                   store::Answer* answer) {
  std::promise<Status> done;
  Status status;
  *answer = ledger.Hold(op, &status, [&done]() -> store::Done<> {
    return [&done](const Status& s) { done.set_value(s); };
  });
  if (*answer == store::Answer::kNow) return status;
  return done.get_future().get();
}

std::pair<Status, store::TakeResult> TakeAndWait(store::ReservationLedger& ledger,
                                                 const store::TakeOp& op, store::Answer* answer) {
  std::promise<std::pair<Status, store::TakeResult>> done;
  store::TakeResult result;
  Status status;
  *answer = ledger.Take(op, &result, &status, [&done]() -> store::Done<store::TakeResult> {
    return [&done](const Status& s, const store::TakeResult& r) { done.set_value({s, r}); };
  });
  if (*answer == store::Answer::kNow) return {status, result};
  return done.get_future().get();
}

TEST(FakeStoreReservationsTest, MatchesTheReservationVectorsNowAndLater) {
  const auto cases = testing::LoadReservationVectors();
  ASSERT_GE(cases.size(), 8u);
  ManualClock clock;
  auto fake = std::make_unique<testing::FakeStore>(clock);
  testing::FakeStore* store = fake.get();
  store::Rooms rooms = testing::FakeStore::RoomsOf(std::move(fake));
  ASSERT_NE(rooms.reservations, nullptr);
  int steps = 0, index = 0;
  for (const char* prefix : {"", "later:"}) {
    for (const auto& rc : cases) {
      SCOPED_TRACE(std::string(prefix) + rc.name);
      const std::string tag = "c" + std::to_string(index++) + ":";
      for (size_t i = 0; i < rc.steps.size(); ++i) {
        SCOPED_TRACE("step " + std::to_string(i));
        const auto& step = rc.steps[i];
        const std::string rule = tag + step.rule;
        const std::string subject = prefix + step.key;
        store::Answer answer;
        if (step.hold) {
          const Status s = HoldAndWait(*rooms.reservations,
                                       testing::HoldOpOf(step, rule, subject, &step.t_ms), &answer);
          testing::ExpectReservationMatches(step, s, nullptr);
        } else {
          const auto [s, r] = TakeAndWait(
              *rooms.reservations, testing::TakeOpOf(step, rule, subject, &step.t_ms), &answer);
          testing::ExpectReservationMatches(step, s, &r);
        }
        EXPECT_EQ(answer, *prefix == '\0' ? store::Answer::kNow : store::Answer::kLater);
        ++steps;
      }
    }
  }
  EXPECT_GE(steps, 90);
  EXPECT_EQ(store->reservation_calls(), steps);
}

}  // namespace
}  // namespace floodgate
