// OpenStore: see open_store.h.
#include "api/open_store.h"

#include <utility>

#include "common/store_url.h"
#include "engine/embedded_store.h"
#include "redis/remote_store.h"
#include "service/slices/sliced_store.h"

namespace floodgate::api {

Result<store::Rooms> OpenStore(const Config& config, const Clock& clock) {
  if (config.store == "memory") {
    return engine::EmbeddedStore::RoomsOf(
        std::make_unique<engine::EmbeddedStore>(config.engine, clock));
  }
  auto url = ParseStoreUrl(config.store);
  if (!url.ok()) return url.status();
  auto remote = redis::RemoteStore::Create(*url, config.redis, clock);
  if (!remote.ok()) return remote.status();
  store::Rooms rooms = redis::RemoteStore::RoomsOf(std::move(*remote));
  // Rules with `slices` are decided from slices of the shared state
  // (service/slices/); the rest pass through. Always in front of a shared
  // store, since a reload may add such a rule.
  auto sliced = std::make_unique<service::SlicedStore>(std::move(rooms.store), clock);
  rooms.slices = sliced.get();
  rooms.store = std::move(sliced);
  return rooms;
}

}  // namespace floodgate::api
