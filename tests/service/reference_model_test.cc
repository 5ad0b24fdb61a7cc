// Property test: random traces through the engine (the public Limiter) and
// through a brute-force model written for clarity, not speed. The model keeps
// every admitted event and recomputes each limit from that history; GCRA is
// modelled as the equivalent leaky-bucket meter rather than with a TAT.
// Decisions and per-limit remaining figures must be equal at every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "floodgate/limiter.h"

namespace floodgate {
namespace {

struct Event {
  int64_t t;
  int64_t cost;
};

struct ModelLimit {
  int64_t n;         // count
  int64_t p;         // period in ms
  int64_t capacity;  // token bucket capacity / gcra limit
};

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int64_t SumWhere(const std::vector<Event>& h, auto pred) {
  int64_t s = 0;
  for (const Event& e : h) {
    if (pred(e)) s += e.cost;
  }
  return s;
}

// Whether `cost` fits at t, and the units remaining after (cost consumed iff fits).
struct ModelAnswer {
  bool fits;
  int64_t remaining_if_fits;
  int64_t remaining_if_not;
};

ModelAnswer Model(Algorithm a, const ModelLimit& l, const std::vector<Event>& h, int64_t t,
                  int64_t cost) {
  switch (a) {
    case Algorithm::kFixedWindow: {
      const int64_t w = FloorDiv(t, l.p);
      const int64_t used = SumWhere(h, [&](const Event& e) { return FloorDiv(e.t, l.p) == w; });
      return {used + cost <= l.n, l.n - used - cost, l.n - used};
    }
    case Algorithm::kSlidingLog: {
      const int64_t used = SumWhere(h, [&](const Event& e) { return e.t > t - l.p; });
      return {used + cost <= l.n, l.n - used - cost, l.n - used};
    }
    case Algorithm::kSlidingWindow: {
      const int64_t w = FloorDiv(t, l.p);
      const int64_t cur = SumWhere(h, [&](const Event& e) { return FloorDiv(e.t, l.p) == w; });
      const int64_t prev = SumWhere(h, [&](const Event& e) { return FloorDiv(e.t, l.p) == w - 1; });
      const int64_t weight = l.p - (t - w * l.p);
      auto remaining = [&](int64_t c) {
        const int64_t room = l.n * l.p - prev * weight - c * l.p;
        return room > 0 ? room / l.p : 0;
      };
      const bool fits = cost <= l.n && prev * weight + (cur + cost) * l.p <= l.n * l.p;
      return {fits, remaining(cur + cost), remaining(cur)};
    }
    case Algorithm::kTokenBucket: {
      // Tokens times p, replayed from a full bucket over the whole history.
      int64_t tokens = l.capacity * l.p;
      int64_t last = h.empty() ? t : h.front().t;
      for (const Event& e : h) {
        tokens = std::min(l.capacity * l.p, tokens + (e.t - last) * l.n) - e.cost * l.p;
        last = e.t;
      }
      tokens = std::min(l.capacity * l.p, tokens + (t - last) * l.n);
      return {cost * l.p <= tokens, (tokens - cost * l.p) / l.p, tokens / l.p};
    }
    case Algorithm::kGcra: {
      // Leaky-bucket meter: the level (in us) drains 1 per us; a request of
      // cost adds cost * T and conforms iff the level stays within T * limit.
      const int64_t T = l.p * 1000 / l.n;
      const int64_t tau = T * l.capacity;
      int64_t level = 0;
      int64_t last = h.empty() ? t : h.front().t;
      for (const Event& e : h) {
        level = std::max<int64_t>(0, level - (e.t - last) * 1000) + e.cost * T;
        last = e.t;
      }
      level = std::max<int64_t>(0, level - (t - last) * 1000);
      auto remaining = [&](int64_t lv) { return tau - lv > 0 ? (tau - lv) / T : 0; };
      const bool fits = cost <= l.capacity && level + cost * T <= tau;
      return {fits, remaining(level + cost * T), remaining(level)};
    }
  }
  return {};
}

class ReferenceModelTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(ReferenceModelTest, RandomTracesAgreeWithTheModel) {
  const Algorithm algorithm = GetParam();
  const char* kLimitTexts[] = {"3/s", "5/2s", "10/minute", "7/500ms", "4/10s", "20/5s"};
  std::mt19937_64 rng(0xF100D6A7E + static_cast<int>(algorithm));
  int steps_checked = 0, denials = 0;
  for (int trace = 0; trace < 120; ++trace) {
    Rule rule;
    rule.name = "r";
    rule.algorithm = algorithm;
    const int num_limits = 1 + static_cast<int>(rng() % 2);
    for (int i = 0; i < num_limits; ++i) {
      rule.limits.push_back(*ParseLimit(kLimitTexts[rng() % std::size(kLimitTexts)]));
    }
    std::vector<ModelLimit> model_limits;
    for (const Limit& l : rule.limits) {
      int64_t capacity = l.count;
      model_limits.push_back({l.count, l.PeriodMs(), capacity});
    }
    Config config;
    config.rules.push_back(rule);
    config.engine.sweep_interval_ms = 0;
    ManualClock clock(1'700'000'000'000 + static_cast<int64_t>(rng() % 100'000));
    auto limiter = Limiter::Create(config, clock);
    ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();

    std::map<std::string, std::vector<Event>> history;
    const int64_t max_gap = (rng() % 3 == 0) ? 2'000 : 200;
    for (int step = 0; step < 250; ++step) {
      clock.AdvanceMs(static_cast<int64_t>(rng() % (max_gap + 1)));
      const int64_t t = clock.NowMs();
      const std::string key = "k" + std::to_string(rng() % 3);
      int64_t cost = static_cast<int64_t>(rng() % 3);
      if (rng() % 20 == 0) cost = 5 + static_cast<int64_t>(rng() % 20);
      auto d = (*limiter)->Check("r", key, cost);
      ASSERT_TRUE(d.ok()) << d.status().ToString();

      auto& h = history[key];
      bool all_fit = true;
      std::vector<ModelAnswer> answers;
      for (const ModelLimit& ml : model_limits) {
        answers.push_back(Model(algorithm, ml, h, t, cost));
        all_fit = all_fit && answers.back().fits;
      }
      SCOPED_TRACE("trace " + std::to_string(trace) + " step " + std::to_string(step) +
                   " t=" + std::to_string(t) + " key=" + key + " cost=" + std::to_string(cost));
      ASSERT_EQ(d->allowed, all_fit);
      for (size_t i = 0; i < answers.size(); ++i) {
        EXPECT_EQ(d->limits[i].allowed, answers[i].fits) << "limit " << i;
        EXPECT_EQ(d->limits[i].remaining,
                  all_fit ? answers[i].remaining_if_fits : answers[i].remaining_if_not)
            << "limit " << i;
      }
      if (all_fit && cost > 0) h.push_back({t, cost});
      if (!all_fit) ++denials;
      ++steps_checked;
    }
  }
  EXPECT_EQ(steps_checked, 120 * 250);
  EXPECT_GT(denials, 1000);  // the traces really probe the limits
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ReferenceModelTest,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                           Algorithm::kSlidingLog, Algorithm::kTokenBucket,
                                           Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

}  // namespace
}  // namespace floodgate
