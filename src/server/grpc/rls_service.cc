// RlsService and RlsCall: see rls_service.h.
//
// A call is decided in at most two rounds of Limiter calls, all of a round
// issued together (with a remote store they travel together, and with those
// of the other calls in the caller's batch):
//  - check round (only when it matters): every counted descriptor at cost 0,
//    to learn whether each has room for its hits; any that has not means no
//    descriptor is counted, and the answer is built from these figures;
//  - count round: every counted descriptor at its hits, each denial
//    consuming nothing.
// The check round is skipped when it cannot change anything: one counted
// descriptor (its own denial consumes nothing), or only shadow ones.
//
// A call keeps its storage from one call to the next (strings, vectors), so
// that a thread answering calls one after another allocates little.
#include "server/grpc/rls_service.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace floodgate::server {
namespace {

// A descriptor entry naming the check's priority class (Rule::priorities)
// rather than part of the subject: `- key: priority, value: batch`.
constexpr std::string_view kPriorityEntry = "priority";

uint32_t ClampU32(int64_t v) {
  if (v <= 0) return 0;
  return v > static_cast<int64_t>(UINT32_MAX) ? UINT32_MAX : static_cast<uint32_t>(v);
}

void SetLimit(const envoy::ReportedLimit& from, rls::CurrentLimit* to) {
  to->requests_per_unit = from.requests_per_unit;
  to->unit = from.unit;  // one enum, Envoy's (common/envoy_unit.h)
  to->name.assign(from.name);
}

// A status as a fresh one, keeping the name's storage.
void ResetStatus(rls::DescriptorStatus* st) {
  st->code = rls::Code::kOk;
  st->has_limit = false;
  st->current_limit.requests_per_unit = 0;
  st->current_limit.unit = rls::Unit::kUnknown;
  st->current_limit.name.clear();
  st->limit_remaining = 0;
  st->duration_until_reset_ms = -1;
}

// Whether a descriptor's decision puts it over its limit. In the check round
// (`peek`, cost 0) that is whether its hits would not fit; a fallback knows
// no room, only its policy.
bool Over(const Decision& d, int64_t hits, bool peek) {
  if (d.fallback != Fallback::kNone) return !d.allowed;
  return peek ? hits > d.remaining : !d.allowed || d.shadow_denied;
}

}  // namespace

void RlsService::SetRules(std::shared_ptr<const envoy::Rules> rules) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_ = std::move(rules);
}

std::shared_ptr<const envoy::Rules> RlsService::rules() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rules_;
}

RlsCall::Item& RlsCall::AddItem() {
  if (num_items_ == items_.size()) items_.emplace_back();
  return items_[num_items_++];
}

bool RlsCall::Start(RlsService& service, const rls::Request& request, store::Batch* batch) {
  limiter_ = &service.limiter();
  status_ = Status::Ok();
  response_.overall_code = rls::Code::kOk;
  response_.response_headers.clear();
  outcomes_.clear();
  num_items_ = 0;
  local_.clear();
  locally_over_ = false;
  // envoyproxy/ratelimit's own checks, with its messages.
  if (request.domain.empty() || request.descriptors.empty()) {
    status_ = InvalidArgumentError(request.domain.empty()
                                       ? "rate limit domain must not be empty"
                                       : "rate limit descriptor list must not be empty");
    response_.statuses.clear();
    rules_.reset();
    return true;
  }
  rules_ = service.rules();
  domain_.assign(request.domain);
  now_ms_ = service.clock().NowMs();
  const size_t n = request.descriptors.size();
  response_.statuses.resize(n);
  for (rls::DescriptorStatus& st : response_.statuses) ResetStatus(&st);
  fallbacks_.assign(n, Fallback::kNone);
  matched_.assign(n, nullptr);
  if (metrics_.size() < n) metrics_.resize(n);

  // Match every descriptor, then drop the limits others replace.
  replaced_.clear();
  priorities_.assign(n, std::string_view());
  if (stripped_.size() < n) stripped_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<DescriptorEntry>& entries = request.descriptors[i].entries;
    for (const DescriptorEntry& e : entries) {
      if (e.key == kPriorityEntry) priorities_[i] = e.value;
    }
    if (priorities_[i].empty()) continue;
    stripped_[i].clear();
    for (const DescriptorEntry& e : entries) {
      if (e.key != kPriorityEntry) stripped_[i].push_back(e);
    }
  }
  if (rules_ != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      matched_[i] = rules_->Match(request.domain, Entries(request, i), &metrics_[i]);
      if (matched_[i] != nullptr) {
        for (const std::string& r : matched_[i]->replaces) replaced_.push_back(r);
      }
    }
  }
  const int64_t default_hits = std::max<int64_t>(1, request.hits_addend);
  for (size_t i = 0; i < n; ++i) {
    const envoy::MatchedLimit* m = matched_[i];
    if (m == nullptr) continue;
    if (!m->name.empty() &&
        std::find(replaced_.begin(), replaced_.end(), m->name) != replaced_.end()) {
      continue;
    }
    rls::DescriptorStatus& st = response_.statuses[i];
    if (m->kind == envoy::MatchedLimit::Kind::kUnlimited) {
      st.limit_remaining = UINT32_MAX;
      continue;
    }
    const std::optional<uint64_t>& own = request.descriptors[i].hits_addend;
    const uint64_t hits = own.has_value() ? *own : static_cast<uint64_t>(default_hits);
    st.has_limit = true;
    SetLimit(m->reported.front(), &st.current_limit);
    // No limit holds more than kMaxLimitCount, and nothing fits in a zero one.
    if (m->kind == envoy::MatchedLimit::Kind::kZero ||
        hits > static_cast<uint64_t>(kMaxLimitCount)) {
      const bool over = hits > 0;
      st.code = over && !m->shadow ? rls::Code::kOverLimit : rls::Code::kOk;
      if (m->kind == envoy::MatchedLimit::Kind::kZero) {
        const int64_t p = m->zero_period_ms;
        st.duration_until_reset_ms = p - (now_ms_ % p + p) % p;
      }
      if (over && !m->shadow) locally_over_ = true;
      local_.push_back(i);
      continue;
    }
    Item& item = AddItem();
    item.index = i;
    item.limit = m;
    envoy::SubjectKey(request.domain, Entries(request, i), &item.key);
    item.hits = static_cast<int64_t>(hits);
    item.priority = priorities_[i];
    item.status = Status::Ok();
  }

  if (num_items_ == 0) {
    Finish(/*peek=*/false);
    return true;
  }
  bool any_counted = false;
  for (size_t i = 0; i < num_items_; ++i) any_counted |= !items_[i].limit->shadow;
  // The check round matters only if one descriptor's denial could leave
  // another's count behind (see the file comment).
  peek_ = locally_over_ || (num_items_ > 1 && any_counted);
  if (!Issue(batch)) return false;
  return Advance(batch);
}

const std::vector<DescriptorEntry>& RlsCall::Entries(const rls::Request& request, size_t i) const {
  return priorities_[i].empty() ? request.descriptors[i].entries : stripped_[i];
}

bool RlsCall::Continue(store::Batch* batch) { return Advance(batch); }

bool RlsCall::Issue(store::Batch* batch) {
  // Each answer is written to its own item; the last one goes on. The
  // count covers this loop itself, so an answer given inline cannot end
  // the round while later items are still being issued.
  pending_.store(static_cast<int>(num_items_) + 1, std::memory_order_relaxed);
  for (size_t i = 0; i < num_items_; ++i) {
    Item& item = items_[i];
    // Two pointers: small enough for std::function to hold without
    // allocating.
    service::LimiterCore::CheckArgs args{item.limit->rule, item.key, peek_ ? 0 : item.hits, {}};
    args.priority = item.priority;
    limiter_->CheckAsync(
        args,
        [this, &item](const Status& s, const Decision& d) {
          item.status = s;
          item.decision = d;
          if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) owner_->Resume(this);
        },
        batch);
  }
  return pending_.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

bool RlsCall::Advance(store::Batch* batch) {
  if (!peek_) {
    Finish(/*peek=*/false);
    return true;
  }
  bool blocked = locally_over_;
  for (size_t i = 0; i < num_items_; ++i) {
    const Item& item = items_[i];
    if (!item.status.ok() || item.limit->shadow) continue;
    blocked |= Over(item.decision, item.hits, /*peek=*/true);
  }
  if (blocked) {
    Finish(/*peek=*/true);
    return true;
  }
  peek_ = false;
  if (!Issue(batch)) return false;
  Finish(/*peek=*/false);
  return true;
}

void RlsCall::Finish(bool peek) {
  rls::Response& r = response_;
  for (size_t i = 0; i < num_items_; ++i) {
    Item& item = items_[i];
    rls::DescriptorStatus& st = r.statuses[item.index];
    if (!item.status.ok()) {
      // NOT_FOUND: the rule went away in a reload after this request was
      // matched; the descriptor has no limit any more.
      if (item.status.code() == StatusCode::kNotFound) {
        ResetStatus(&st);
        continue;
      }
      if (status_.ok()) status_ = item.status;
      continue;
    }
    const Decision& d = item.decision;
    const bool over = Over(d, item.hits, peek);
    const bool shadow = item.limit->shadow || (!peek && d.shadow_denied);
    st.code = over && !shadow ? rls::Code::kOverLimit : rls::Code::kOk;
    fallbacks_[item.index] = d.fallback;
    st.limit_remaining = over || d.fallback != Fallback::kNone ? 0 : ClampU32(d.remaining);
    if (d.num_limits > 0) {
      const int b = std::clamp(d.binding, 0, d.num_limits - 1);
      if (static_cast<size_t>(b) < item.limit->reported.size()) {
        SetLimit(item.limit->reported[b], &st.current_limit);
      }
      // A fallback knows no reset: duration_until_reset stays unset.
      if (d.fallback != Fallback::kNone) continue;
      const LimitStatus& ls = d.limits[b];
      int64_t reset = d.reset_after_ms;
      if (ls.window_end_ms > now_ms_) reset = std::max(reset, ls.window_end_ms - now_ms_);
      st.duration_until_reset_ms = std::max<int64_t>(0, reset);
    }
  }
  if (!status_.ok()) {
    r.statuses.clear();
    return;
  }
  r.overall_code = rls::Code::kOk;
  for (const rls::DescriptorStatus& st : r.statuses) {
    if (st.code == rls::Code::kOverLimit) r.overall_code = rls::Code::kOverLimit;
  }
  for (size_t i = 0; i < num_items_; ++i) {
    const Item& item = items_[i];
    const bool over = Over(item.decision, item.hits, peek);
    const bool shadow_over = item.status.ok() && over && item.limit->shadow;
    outcomes_.push_back({metrics_[item.index], r.statuses[item.index].code, shadow_over});
  }
  for (const size_t i : local_) outcomes_.push_back({metrics_[i], r.statuses[i].code, false});
  // A fallback decision is named; it knows no figures, so no RateLimit-*
  // headers then (the other descriptors' alone would tell half the story).
  Fallback fallback = Fallback::kNone;
  for (const Fallback f : fallbacks_) {
    if (f != Fallback::kNone) fallback = f;
  }
  if (fallback != Fallback::kNone) {
    r.response_headers.push_back({"floodgate-fallback", std::string(FallbackName(fallback))});
  }
  // The descriptor closest to its limit gives the headers; one over its
  // limit always does (the last such), as in envoyproxy/ratelimit.
  if (rules_ != nullptr && rules_->options().response_headers && fallback == Fallback::kNone) {
    const rls::DescriptorStatus* pick = nullptr;
    uint32_t least = UINT32_MAX;
    for (const rls::DescriptorStatus& st : r.statuses) {
      if (!st.has_limit) continue;
      if (st.code == rls::Code::kOverLimit) {
        pick = &st;
        least = 0;
      } else if (st.limit_remaining < least) {
        pick = &st;
        least = st.limit_remaining;
      }
    }
    if (pick != nullptr) {
      const int64_t reset_ms = std::max<int64_t>(0, pick->duration_until_reset_ms);
      r.response_headers = {
          {"RateLimit-Limit", std::to_string(pick->current_limit.requests_per_unit)},
          {"RateLimit-Remaining", std::to_string(pick->limit_remaining)},
          {"RateLimit-Reset", std::to_string((reset_ms + 999) / 1000)}};
    }
  }
  // What bound each descriptor over its limit, as its rule writes it, as
  // the HTTP front's Floodgate-Limit field: "api;3/hour, login;5/minute".
  std::string bound;
  for (size_t i = 0; i < num_items_; ++i) {
    const Item& item = items_[i];
    if (!item.status.ok() || r.statuses[item.index].code != rls::Code::kOverLimit) continue;
    const Decision& d = item.decision;
    if (d.fallback != Fallback::kNone || d.blocked) continue;
    if (!bound.empty()) bound += ", ";
    bound += item.limit->rule;
    bound += ';';
    bound += d.binding_limit.ToString();
  }
  if (!bound.empty()) r.response_headers.push_back({"floodgate-limit", std::move(bound)});
}

}  // namespace floodgate::server
