// OpenServices: every room of a server (service/services.h) on the store
// the config names (api/open_store.h): what Limiter::Create and
// `floodgate serve` run.
#pragma once

#include <memory>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/status.h"
#include "service/services.h"
#include "store/rooms.h"

namespace floodgate::api {

// Every room on OpenStore's store for `config`, on `clock` (which must
// outlive them). Errors: the config's (a rule that does not compile, a bad
// store URL), the store's, the control plane's start.
Result<std::unique_ptr<service::Services>> OpenServices(const Config& config, const Clock& clock);

}  // namespace floodgate::api
