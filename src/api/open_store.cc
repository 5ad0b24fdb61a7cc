// OpenStore: see open_store.h.
#include "api/open_store.h"

#include <utility>

#include "common/store_url.h"
#include "engine/embedded_store.h"
#include "redis/remote_store.h"

namespace floodgate::api {

Result<std::unique_ptr<store::Store>> OpenStore(const Config& config, const Clock& clock) {
  if (config.store == "memory") {
    return std::unique_ptr<store::Store>(
        std::make_unique<engine::EmbeddedStore>(config.engine, clock));
  }
  auto url = ParseStoreUrl(config.store);
  if (!url.ok()) return url.status();
  auto remote = redis::RemoteStore::Create(*url, config.redis, clock);
  if (!remote.ok()) return remote.status();
  return std::unique_ptr<store::Store>(std::move(*remote));
}

}  // namespace floodgate::api
