// LeaseLedger: see lease_ledger.h.
#include "service/leases/lease_ledger.h"

#include <algorithm>

namespace floodgate::service {
namespace {

std::string LedgerKey(std::string_view rule, std::string_view lease) {
  std::string key;
  key.reserve(rule.size() + 1 + lease.size());
  key.append(rule).push_back('\0');
  key.append(lease);
  return key;
}

}  // namespace

LeaseLedger::RuleStats& LeaseLedger::StatsOf(std::string_view rule) {
  return stats_[std::string(rule)];
}

void LeaseLedger::Granted(std::string_view rule, std::string_view lease, int64_t expires_at_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  RuleStats& stats = StatsOf(rule);
  ++stats.acquired;
  if (leases_.size() >= kMaxTracked) {
    ++stats.untracked;
    return;
  }
  std::string key = LedgerKey(rule, lease);
  auto [it, added] = leases_.try_emplace(key, Tracked{std::string(rule), expires_at_ms});
  if (!added) {  // the same id again: a refresh
    by_expiry_.erase({it->second.expires_at_ms, key});
    it->second.expires_at_ms = expires_at_ms;
  } else {
    ++stats.held;
  }
  by_expiry_.emplace(expires_at_ms, std::move(key));
}

void LeaseLedger::Refused(std::string_view rule) {
  std::lock_guard<std::mutex> lock(mu_);
  ++StatsOf(rule).refused;
}

void LeaseLedger::Released(std::string_view rule, std::string_view lease) {
  std::lock_guard<std::mutex> lock(mu_);
  RuleStats& stats = StatsOf(rule);
  ++stats.released;
  auto it = leases_.find(LedgerKey(rule, lease));
  if (it == leases_.end()) return;  // granted elsewhere, or untracked
  by_expiry_.erase({it->second.expires_at_ms, it->first});
  leases_.erase(it);
  --stats.held;
}

void LeaseLedger::Renewed(std::string_view rule, std::string_view lease, int64_t expires_at_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = leases_.find(LedgerKey(rule, lease));
  if (it == leases_.end()) return;
  by_expiry_.erase({it->second.expires_at_ms, it->first});
  it->second.expires_at_ms = expires_at_ms;
  by_expiry_.emplace(expires_at_ms, it->first);
}

int64_t LeaseLedger::Sweep(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now_ms) {
    auto it = leases_.find(by_expiry_.begin()->second);
    if (it != leases_.end()) {
      RuleStats& stats = StatsOf(it->second.rule);
      --stats.held;
      ++stats.expired;
      leases_.erase(it);
      ++n;
    }
    by_expiry_.erase(by_expiry_.begin());
  }
  return n;
}

std::vector<std::pair<std::string, LeaseLedger::RuleStats>> LeaseLedger::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, RuleStats>> out(stats_.begin(), stats_.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace floodgate::service
