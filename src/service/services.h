// Services: every room a server (or an embedding program) runs, made and
// wired to each other in one place (Open), on the store api::OpenServices
// picked for the config (api/open_services.h), and handed whole to the
// fronts and to the public Limiter.
//
//   core      decides: checks, CL.THROTTLE, resets, refunds (LimiterCore)
//   rules     the rules in force, compiled (RuleBook)
//   controls  blocks and overrides as decisions read them (Controls)
//   control   the control plane: overrides, blocks, runtime rules, change
//             log, kept in the store (ControlPlane)
//   leases    concurrency rules (Leases)
//   waiting   requests held until they could succeed (Waiting)
//   reservations  estimates charged, settled at what a request cost
//             (Reservations; null on a store without a ledger)
//   subjects  a rule's subject from the request, and its lists (Subjects)
//   sets, otp, alerts   the features of floodgate/expiring_sets.h, otp.h,
//             alerts.h
//   rooms     where state lives (store/rooms.h): the decisions, each
//             feature's interface, and the backend the server runs (its
//             loop drivers, health, figures, nodes)
//
// Each room is given references to the rooms it uses, never this; the
// order below is the order they are made in, and (reversed, with the
// store's shutdown moved before the rooms its answers call) the order
// they stop in.
#pragma once

#include <memory>
#include <string>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/expiring_sets.h"
#include "floodgate/otp.h"
#include "floodgate/status.h"
#include "service/alerts/alerts_impl.h"
#include "service/control/control_plane.h"
#include "service/leases/leases.h"
#include "service/limiter/controls.h"
#include "service/limiter/limiter_core.h"
#include "service/limiter/rule_set.h"
#include "service/reservations/reservations.h"
#include "service/snapshots/state_keeper.h"
#include "service/subjects/subjects.h"
#include "service/waiting/waiting.h"
#include "store/rooms.h"

namespace floodgate::service {

struct Services {
  // Every room, on the store `rooms` opened (made with `clock`, which
  // must outlive them); each feature is given its own room of it. Errors:
  // the config's (a rule that does not compile), the control plane's start.
  static Result<std::unique_ptr<Services>> Open(const Config& config, const Clock& clock,
                                                store::Rooms rooms);

  explicit Services(const Clock& c) : clock(c) {}
  // Stops what runs on its own (waiting, the control plane, the alerts'
  // delivery, which hands pending events to the store's log), then the
  // store (its shutdown answers requests in flight, whose callbacks use
  // the rooms), then the rest.
  ~Services();
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  // A new config file: its rules, lists, trusted proxies and JWT keys in
  // force (the control plane's kept). An error (a rule that does not
  // compile, a list or key file that does not read) changes nothing.
  Status Reload(const Config& config);
  // What keeps the store's state in data_dir across restarts
  // (service/snapshots/state_keeper.h); null without a data_dir or for a store whose
  // state lives outside the process (Redis). Must not outlive this.
  std::unique_ptr<StateKeeper> NewStateKeeper(const std::string& data_dir, int64_t interval_ms);
  // Frees what expired by now in the store; how many entries.
  int64_t SweepExpired() { return rooms.store->SweepExpired(clock.NowMs()); }

  const Clock& clock;
  store::Rooms rooms;
  FallbackCounts fallbacks;
  std::unique_ptr<AlertsImpl> alerts;
  std::unique_ptr<RuleBook> rules;
  std::unique_ptr<Controls> controls;
  std::unique_ptr<LimiterCore> core;
  std::unique_ptr<Leases> leases;
  std::unique_ptr<Waiting> waiting;
  std::unique_ptr<Reservations> reservations;
  std::unique_ptr<ExpiringSets> sets;
  std::unique_ptr<Otp> otp;
  std::unique_ptr<ControlPlane> control;
  std::unique_ptr<Subjects> subjects;
};

}  // namespace floodgate::service
