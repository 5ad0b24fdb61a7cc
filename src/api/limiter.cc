// Limiter: the embedding API, each call one of LimiterCore's (see
// service/limiter_core.h), blocking where the store answers later.
#include "floodgate/limiter.h"

#include <utility>

#include "api/open_store.h"
#include "service/limiter_core.h"

namespace floodgate {

Result<std::unique_ptr<Limiter>> Limiter::Create(const Config& config, const Clock& clock) {
  auto core = api::OpenLimiterCore(config, clock);
  if (!core.ok()) return core.status();
  return std::unique_ptr<Limiter>(new Limiter(std::move(*core)));
}

Limiter::Limiter(std::unique_ptr<service::LimiterCore> core) : core_(std::move(core)) {}
Limiter::~Limiter() = default;

Result<Decision> Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                                std::string_view tier) {
  Decision decision;
  if (Status s = Check(rule, key, cost, tier, &decision); !s.ok()) return s;
  return decision;
}

Status Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                      std::string_view tier, Decision* decision) {
  return core_->CheckAndWait({rule, key, cost, tier}, decision);
}

void Limiter::CheckAsync(std::string_view rule, std::string_view key, int64_t cost,
                         std::string_view tier, CheckCallback done) {
  core_->CheckAsync({rule, key, cost, tier}, std::move(done));
}

Status Limiter::Reset(std::string_view rule, std::string_view key) {
  return core_->ResetAndWait(rule, key);
}

Result<ThrottleResult> Limiter::Throttle(std::string_view key, int64_t max_burst, int64_t count,
                                         int64_t period_s, int64_t quantity) {
  return core_->ThrottleAndWait({key, max_burst, count, period_s, quantity});
}

Status Limiter::Reload(const Config& config) { return core_->Reload(config); }

int64_t Limiter::SweepExpired() { return core_->SweepExpired(); }

Limiter::Stats Limiter::GetStats() const { return core_->GetStats(); }

Status Limiter::StoreHealth() const { return core_->StoreHealth(); }

Config Limiter::config() const { return core_->config(); }

ExpiringSets& Limiter::sets() { return core_->sets(); }

Otp& Limiter::otp() { return core_->otp(); }

Alerts& Limiter::alerts() { return core_->alerts(); }

}  // namespace floodgate
