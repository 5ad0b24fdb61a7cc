// Services: see services.h. Open makes the rooms in the order services.h
// lists them, each given the rooms it uses.
#include "service/services.h"

#include <utility>

#include "service/otp/otp_impl.h"
#include "service/sets/expiring_sets_impl.h"

namespace floodgate::service {

Services::~Services() {
  waiting.reset();  // answers what it holds; its attempts use the store
  control.reset();  // its thread reads the store and applies records
  if (alerts != nullptr) alerts->Shutdown();
  rooms.store.reset();
}

std::unique_ptr<StateKeeper> Services::NewStateKeeper(const std::string& data_dir,
                                                      int64_t interval_ms) {
  if (data_dir.empty() || rooms.snapshots == nullptr) return nullptr;
  return std::make_unique<StateKeeper>(*rooms.snapshots, data_dir, interval_ms, clock);
}

Result<std::unique_ptr<Services>> Services::Open(const Config& config, const Clock& clock,
                                                 store::Rooms rooms) {
  if (rooms.store == nullptr) return InvalidArgumentError("Services::Open: no store");
  Result<std::shared_ptr<const SubjectRules>> subject_rules = SubjectRules::Build(config);
  if (!subject_rules.ok()) return subject_rules.status();
  auto s = std::make_unique<Services>(clock);
  s->subjects = std::make_unique<Subjects>();
  s->subjects->Publish(*std::move(subject_rules));
  s->rooms = std::move(rooms);
  store::Store& st = *s->rooms.store;
  const store::Backend& backend = *s->rooms.backend;
  s->alerts = std::make_unique<AlertsImpl>(config.alert_delivery, s->rooms.alert_log, clock);
  // A rule set with a rule with alerts is published only once the alerts'
  // delivery runs: a decision may emit as soon as it is.
  AlertsImpl& alerts = *s->alerts;
  s->rules = std::make_unique<RuleBook>(st, [&alerts](const RuleSet& rules) {
    for (const auto& [name, entry] : rules.rules) {
      if (entry.base.alerts != nullptr) return alerts.Start();
    }
    return Status::Ok();
  });
  if (Status loaded = s->rules->Load(config); !loaded.ok()) return loaded;
  s->controls = std::make_unique<Controls>(*s->rules);
  s->core = std::make_unique<LimiterCore>(clock, st, backend, *s->rules, *s->controls, alerts,
                                          s->fallbacks);
  s->leases = std::make_unique<Leases>(clock, *s->rooms.leases, backend, *s->rules, *s->controls,
                                       s->fallbacks);
  s->waiting = std::make_unique<Waiting>(clock, *s->core, *s->leases);
  // A store without a ledger (a test's fake) takes no reservations.
  if (s->rooms.reservations != nullptr) {
    s->reservations = std::make_unique<Reservations>(*s->core, *s->rooms.reservations);
  }
  s->sets = MakeExpiringSets(config.sets, *s->rooms.sets);
  auto otp = MakeOtp(config.otp, *s->rooms.otp, clock);
  if (!otp.ok()) return otp.status();
  s->otp = std::move(*otp);

  RuleBook& rules = *s->rules;
  Controls& controls = *s->controls;
  ControlPlane::Hooks hooks;
  hooks.apply = [&controls](const ControlRecords& records) { controls.Apply(records); };
  hooks.file_rule = [&rules](std::string_view name) { return rules.FileRule(name); };
  hooks.rule = [&rules](std::string_view name) { return rules.RuleNamed(name); };
  hooks.add_block = [&controls](const BlockRecord& b) { controls.AddBlock(b); };
  s->control = std::make_unique<ControlPlane>(clock, std::move(hooks));
  ControlPlane& control = *s->control;
  controls.SetAutoBlock(
      [&control](std::string_view rule, std::string_view subject, int64_t until_ms,
                 std::string_view reason) { control.AutoBlock(rule, subject, until_ms, reason); });
  if (Status started = control.Start(s->rooms.control, {config.data_dir}); !started.ok())
    return started;
  return s;
}

Status Services::Reload(const Config& config) {
  // Read every file before anything changes: a broken list keeps the old.
  Result<std::shared_ptr<const SubjectRules>> subject_rules = SubjectRules::Build(config);
  if (!subject_rules.ok()) return subject_rules.status();
  if (Status s = rules->Load(config); !s.ok()) return s;
  subjects->Publish(*std::move(subject_rules));
  return Status::Ok();
}

}  // namespace floodgate::service
