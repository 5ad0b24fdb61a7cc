// OpenServices: see open_services.h.
#include "api/open_services.h"

#include <utility>

#include "api/open_store.h"

namespace floodgate::api {

Result<std::unique_ptr<service::Services>> OpenServices(const Config& config, const Clock& clock) {
  auto store = OpenStore(config, clock);
  if (!store.ok()) return store.status();
  return service::Services::Open(config, clock, std::move(*store));
}

}  // namespace floodgate::api
