// Rooms: a store as it is opened (api/open_store.h), the decisions and each
// feature's own way to its state. The service (service/) receives one and
// hands each feature its room alone: the sets their SetStore, OTP its
// OtpStore, the leases their LeaseStore, the reservations their
// ReservationLedger, the control plane its opener, and so on, so that no
// feature sees another's interface and Store does not grow a method per
// feature.
//
// Ownership: `store` owns the whole backend, one object (the embedded
// store, the Redis store, a test's fake) that holds every room's
// implementation among its members (engine/set_store.h inside
// engine::EmbeddedStore, redis/lease_store.h inside redis::RemoteStore …).
// The pointers point into it and the openers may use it: they are valid as
// long as `store` is, whoever holds the Rooms, and a moved Rooms keeps them
// valid (the object does not move). A user keeps a room no longer than the Rooms' owner
// (LimiterCore) keeps `store`. What an opener opens is the user's own,
// and must go before `store` does too.
//
// One owner and borrowed pointers rather than shared ownership: the rooms
// share one client (Redis) or one MemoryStore (embedded), which must close
// once, after every room is done; a single owner says when.
#pragma once

#include <memory>

#include "store/alert_log.h"
#include "store/backend.h"
#include "store/control.h"
#include "store/lease_ops.h"
#include "store/otp.h"
#include "store/reservations.h"
#include "store/sets.h"
#include "store/sketch_board.h"
#include "store/slices.h"
#include "store/snapshots.h"
#include "store/store.h"

namespace floodgate::store {

struct Rooms {
  // The decisions (store/store.h), and the owner of everything below.
  std::unique_ptr<Store> store;
  // Each backend has these: never null in a Rooms a backend made.
  Backend* backend = nullptr;
  LeaseStore* leases = nullptr;
  SetStore* sets = nullptr;
  OtpStore* otp = nullptr;
  // Reservations (store/reservations.h): every backend has one, the
  // tests' fake store too.
  ReservationLedger* reservations = nullptr;
  // Null: the state outlives the process (Redis), nothing to save.
  Snapshots* snapshots = nullptr;
  // Null: no slices (the embedded store decides locally already).
  SliceView* slices = nullptr;

  // Rooms their users open when they start, with options of their own,
  // and own. Empty where the backend has none.
  // None on the embedded store: the events stay in this process.
  AlertLogOpener alert_log;
  // Every backend has one; a test's fake may not (changes are refused).
  ControlStoreOpener control;
  // None on the embedded store: nobody shares its state.
  SketchBoardOpener sketch_board;
};

}  // namespace floodgate::store
