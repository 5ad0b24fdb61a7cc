// ExpiringSets: argument checks, the store (embedded or Redis), counters.
#include "floodgate/expiring_sets.h"

#include <atomic>
#include <future>
#include <string>
#include <utility>

#include "common/enum_table.h"
#include "floodgate/rule.h"
#include "service/sets/expiring_sets_impl.h"

namespace floodgate {
namespace {

Status BytesError(std::string_view what, std::string_view value, size_t max) {
  if (value.empty()) return InvalidArgumentError(std::string(what) + " must not be empty");
  if (value.size() > max) {
    return InvalidArgumentError(std::string(what) + " is " + std::to_string(value.size()) +
                                " bytes; the limit is " + std::to_string(max));
  }
  return Status::Ok();
}

bool NeedsMember(SetOp op) {
  return op == SetOp::kAdd || op == SetOp::kRemove || op == SetOp::kContains;
}

void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

constexpr EnumName<SetOp> kSetOpNames[] = {{SetOp::kAdd, "add"},
                                           {SetOp::kRemove, "remove"},
                                           {SetOp::kContains, "contains"},
                                           {SetOp::kCount, "count"},
                                           {SetOp::kMembers, "members"}};

std::string_view SetOpName(SetOp op) { return ValueIn(kSetOpNames, op, "unknown"); }

struct ExpiringSets::Impl {
  Impl(const SetsConfig& c, store::SetStore& s) : config(c), store(s) {}

  Status Validate(const SetRequest& r) const {
    if (Status s = BytesError("key", r.key, kMaxKeyBytes); !s.ok()) return s;
    if (NeedsMember(r.op)) {
      if (Status s = BytesError("member", r.member, kMaxSetMemberBytes); !s.ok()) return s;
    }
    if (r.op == SetOp::kAdd && (r.ttl_ms < 1 || r.ttl_ms > config.max_ttl_ms)) {
      return InvalidArgumentError("ttl_ms must be between 1 and " +
                                  std::to_string(config.max_ttl_ms) + " (sets.max_ttl), got " +
                                  std::to_string(r.ttl_ms));
    }
    return Status::Ok();
  }

  // Counts a finished operation.
  void Count(SetOp op, const Status& s) {
    if (s.ok()) {
      Bump(op == SetOp::kAdd ? adds : op == SetOp::kRemove ? removes : reads);
    } else if (s.code() == StatusCode::kResourceExhausted && op == SetOp::kAdd) {
      Bump(full);
    } else if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
               s.code() == StatusCode::kInternal) {
      Bump(backend_errors);
    }
  }

  const SetsConfig config;
  store::SetStore& store;
  std::atomic<int64_t> adds{0}, removes{0}, reads{0}, full{0}, backend_errors{0};
};

ExpiringSets::ExpiringSets(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExpiringSets::~ExpiringSets() = default;

void ExpiringSets::RunAsync(const SetRequest& request, Callback done) {
  if (Status s = impl_->Validate(request); !s.ok()) return done(s, SetReply{});
  Impl& impl = *impl_;
  SetReply reply;
  Status status;
  const store::Answer answer = impl.store.Run(
      request, impl.config.max_members, &reply, &status, [&]() -> store::Done<SetReply> {
        return
            [&impl, op = request.op, done = std::move(done)](const Status& s, const SetReply& r) {
              impl.Count(op, s);
              done(s, r);
            };
      });
  if (answer == store::Answer::kLater) return;
  impl.Count(request.op, status);
  done(status, status.ok() ? reply : SetReply{});
}

Result<SetReply> ExpiringSets::Run(const SetRequest& request) {
  std::promise<std::pair<Status, SetReply>> promise;
  auto future = promise.get_future();
  RunAsync(request, [&promise](const Status& s, const SetReply& reply) {
    promise.set_value({s, reply});
  });
  auto [status, reply] = future.get();
  if (!status.ok()) return status;
  return std::move(reply);
}

Result<bool> ExpiringSets::Add(std::string_view key, std::string_view member, int64_t ttl_ms) {
  auto r = Run(SetRequest{SetOp::kAdd, key, member, ttl_ms});
  if (!r.ok()) return r.status();
  return r->value == 1;
}

Result<bool> ExpiringSets::Remove(std::string_view key, std::string_view member) {
  auto r = Run(SetRequest{SetOp::kRemove, key, member, 0});
  if (!r.ok()) return r.status();
  return r->value == 1;
}

Result<bool> ExpiringSets::Contains(std::string_view key, std::string_view member) {
  auto r = Run(SetRequest{SetOp::kContains, key, member, 0});
  if (!r.ok()) return r.status();
  return r->value == 1;
}

Result<int64_t> ExpiringSets::Count(std::string_view key) {
  auto r = Run(SetRequest{SetOp::kCount, key, {}, 0});
  if (!r.ok()) return r.status();
  return r->value;
}

Result<std::vector<SetMember>> ExpiringSets::Members(std::string_view key) {
  auto r = Run(SetRequest{SetOp::kMembers, key, {}, 0});
  if (!r.ok()) return r.status();
  return std::move(r->members);
}

ExpiringSets::Stats ExpiringSets::GetStats() const {
  Stats s;
  s.adds = impl_->adds.load(std::memory_order_relaxed);
  s.removes = impl_->removes.load(std::memory_order_relaxed);
  s.reads = impl_->reads.load(std::memory_order_relaxed);
  s.full = impl_->full.load(std::memory_order_relaxed);
  s.backend_errors = impl_->backend_errors.load(std::memory_order_relaxed);
  return s;
}

namespace service {

std::unique_ptr<ExpiringSets> MakeExpiringSets(const SetsConfig& config, store::SetStore& store) {
  return std::make_unique<ExpiringSets>(std::make_unique<ExpiringSets::Impl>(config, store));
}

}  // namespace service
}  // namespace floodgate
