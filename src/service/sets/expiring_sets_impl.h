// How the LimiterCore builds its ExpiringSets (floodgate/expiring_sets.h):
// on the sets' room of the store it picked.
#pragma once

#include <memory>

#include "floodgate/config.h"
#include "floodgate/expiring_sets.h"
#include "store/sets.h"

namespace floodgate::service {

// Sets on `store`, which must outlive the result.
std::unique_ptr<ExpiringSets> MakeExpiringSets(const SetsConfig& config, store::SetStore& store);

}  // namespace floodgate::service
