// Limiter: the embedding API, each call one of a room's (see
// service/services.h), blocking where the store answers later.
#include "floodgate/limiter.h"

#include <utility>

#include "api/open_services.h"
#include "service/limiter/blocking.h"
#include "service/services.h"

namespace floodgate {

Result<std::unique_ptr<Limiter>> Limiter::Create(const Config& config, const Clock& clock) {
  auto services = api::OpenServices(config, clock);
  if (!services.ok()) return services.status();
  return std::unique_ptr<Limiter>(new Limiter(std::move(*services)));
}

Limiter::Limiter(std::unique_ptr<service::Services> services) : services_(std::move(services)) {}
Limiter::~Limiter() = default;

Result<Decision> Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                                std::string_view tier) {
  Decision decision;
  if (Status s = Check(rule, key, cost, tier, &decision); !s.ok()) return s;
  return decision;
}

Status Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                      std::string_view tier, Decision* decision) {
  return services_->core->CheckAndWait({rule, key, cost, tier}, decision);
}

void Limiter::CheckAsync(std::string_view rule, std::string_view key, int64_t cost,
                         std::string_view tier, CheckCallback done) {
  services_->core->CheckAsync({rule, key, cost, tier}, std::move(done));
}

Status Limiter::Reset(std::string_view rule, std::string_view key) {
  return service::ResetAndWait(*services_->core, rule, key);
}

Result<ThrottleResult> Limiter::Throttle(std::string_view key, int64_t max_burst, int64_t count,
                                         int64_t period_s, int64_t quantity) {
  return service::ThrottleAndWait(*services_->core, {key, max_burst, count, period_s, quantity});
}

Status Limiter::Reload(const Config& config) { return services_->Reload(config); }

int64_t Limiter::SweepExpired() { return services_->SweepExpired(); }

Limiter::Stats Limiter::GetStats() const { return services_->core->GetStats(); }

Status Limiter::StoreHealth() const { return services_->rooms.backend->Health(); }

Config Limiter::config() const { return services_->rules->config(); }

ExpiringSets& Limiter::sets() { return *services_->sets; }

Otp& Limiter::otp() { return *services_->otp; }

Alerts& Limiter::alerts() { return *services_->alerts; }

}  // namespace floodgate
