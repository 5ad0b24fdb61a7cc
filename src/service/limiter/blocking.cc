// The blocking forms: see blocking.h.
#include "service/limiter/blocking.h"

namespace floodgate::service {

Result<ThrottleResult> ThrottleAndWait(LimiterCore& core, const store::ThrottleOp& op) {
  Status status;
  ThrottleResult result;
  Waiter<ThrottleResult> waiter(core);
  if (core.Throttle(op, &result, &status, [&] { return waiter.Callback(); }) ==
      store::Answer::kLater) {
    status = waiter.Wait(&result);
  }
  if (!status.ok()) return status;
  return result;
}

Status ResetAndWait(LimiterCore& core, std::string_view rule, std::string_view key) {
  if (Status s = core.BlockingAllowed(); !s.ok()) return s;
  std::promise<Status> done;
  core.Reset(rule, key, [&done](const Status& s) { done.set_value(s); });
  return done.get_future().get();
}

Result<core::RefundResult> RefundAndWait(LimiterCore& core, const LimiterCore::RefundArgs& args) {
  if (Status s = core.BlockingAllowed(); !s.ok()) return s;
  std::promise<std::pair<Status, core::RefundResult>> answered;
  core.Refund(args, [&answered](const Status& s, const core::RefundResult& r) {
    answered.set_value({s, r});
  });
  auto [status, result] = answered.get_future().get();
  if (!status.ok()) return status;
  return result;
}

Result<core::RefundResult> RefundAndWait(LimiterCore& core, std::string_view rule,
                                         std::string_view key, int64_t cost,
                                         std::string_view tier) {
  return RefundAndWait(core, LimiterCore::RefundArgs{rule, key, cost, tier});
}

}  // namespace floodgate::service
