// The blocking forms of LimiterCore's calls: each waits for an answer that
// comes later, and refuses (INTERNAL) on a thread that runs the store's
// I/O, which would have to answer itself (LimiterCore::BlockingAllowed).
// For embedding programs, the CLI and tests; the fronts never block.
#pragma once

#include <future>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "service/limiter/limiter_core.h"

namespace floodgate::service {

// Waits for one later answer of T...: built on every blocking call,
// answered now or not, it holds nothing that costs to make until Callback
// (an answer now is most of them).
template <typename... T>
class Waiter {
 public:
  explicit Waiter(const LimiterCore& core) : core_(core) {}
  store::Done<T...> Callback() {
    if (Status s = core_.BlockingAllowed(); !s.ok()) {
      refusal_.emplace(std::move(s));
      return [](const Status&, const T&...) {};
    }
    promise_.emplace();
    return [p = &*promise_](const Status& s, const T&... value) {
      p->set_value({s, std::tuple<T...>(value...)});
    };
  }
  // The answer, after Callback.
  Status Wait(T*... out) {
    if (refusal_.has_value()) return *refusal_;
    auto [status, values] = promise_->get_future().get();
    std::tie(*out...) = values;
    return status;
  }

 private:
  const LimiterCore& core_;
  std::optional<Status> refusal_;
  std::optional<std::promise<std::pair<Status, std::tuple<T...>>>> promise_;
};

// CL.THROTTLE, waiting for the answer.
Result<ThrottleResult> ThrottleAndWait(LimiterCore& core, const store::ThrottleOp& op);
// FG.RESET, waiting for the answer.
Status ResetAndWait(LimiterCore& core, std::string_view rule, std::string_view key);
// A refund, waiting for the answer.
Result<core::RefundResult> RefundAndWait(LimiterCore& core, const LimiterCore::RefundArgs& args);
Result<core::RefundResult> RefundAndWait(LimiterCore& core, std::string_view rule,
                                         std::string_view key, int64_t cost,
                                         std::string_view tier = {});

}  // namespace floodgate::service
