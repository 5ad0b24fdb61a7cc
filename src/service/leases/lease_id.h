// Lease ids: 128 bits from the system's CSPRNG as 32 lower-case hex
// digits, so that nobody can release or renew a lease they were not given
// by guessing its id.
#pragma once

#include <string>

namespace floodgate::service {

// Thread-safe. Aborts only if the CSPRNG fails (it cannot be seeded), as
// no id may be made without it.
std::string NewLeaseId();

}  // namespace floodgate::service
