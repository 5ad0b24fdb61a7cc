// How the Limiter builds its ExpiringSets (floodgate/expiring_sets.h): on
// the embedded store (a MemoryStore variant) or on Redis (a Client).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/expiring_sets.h"
#include "redis/client.h"

namespace floodgate::service {

// Sets in `memory` under `variant` (registered with engine::SetStore::Layout())
// when `client` is null, else on Redis through `client`. Every pointer must
// outlive the result.
std::unique_ptr<ExpiringSets> MakeExpiringSets(const SetsConfig& config, const Clock& clock,
                                               engine::MemoryStore* memory, uint32_t variant,
                                               redis::Client* client);

}  // namespace floodgate::service
