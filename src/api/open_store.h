// The store a config names, picked once: the only code that knows every
// store implementation. Above it, nothing asks which store it has (see
// store/store.h); the fronts and features get their rooms (api/open_services.h)
// and never the store's type. A store opens as store::Rooms (store/rooms.h):
// the decisions and each feature's own interface, all owned by the one store.
//
//   config.store == "memory"          the embedded store (engine/)
//   redis://, rediss://, redis+…://   the Redis store (redis/), one of the
//                                     deployments common/store_url.h names
#pragma once

#include <memory>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/status.h"
#include "store/rooms.h"

namespace floodgate::api {

// The store for config.store, with its rooms, on `clock` (which must
// outlive it). Errors: a URL that does not parse, bad Redis settings
// (INVALID_ARGUMENT).
Result<store::Rooms> OpenStore(const Config& config, const Clock& clock);

}  // namespace floodgate::api
