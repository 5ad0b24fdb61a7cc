// Ids a caller must be given, never guess: 128 bits from the system's CSPRNG
// as 32 lower-case hex digits. Leases (service/leases/) and reservations
// (service/reservations/) are named by them, so that nobody can release a
// lease or settle a reservation they were not given.
#pragma once

#include <string>

namespace floodgate {

// Thread-safe. Aborts only if the CSPRNG fails (it cannot be seeded), as
// no id may be made without it.
std::string NewRandomId();

}  // namespace floodgate
