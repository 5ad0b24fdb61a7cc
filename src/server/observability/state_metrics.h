// The state snapshot's metric families (data_dir: service/snapshots/state_keeper.h).
#pragma once

#include <string>

#include "service/snapshots/state_keeper.h"

namespace floodgate::server {

void AppendStateMetrics(const service::StateKeeper& keeper, std::string* out);

}  // namespace floodgate::server
