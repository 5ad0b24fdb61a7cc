// Random ids: see random_id.h.
#include "common/random_id.h"

#include <openssl/rand.h>

#include <cstdlib>

#include "common/log.h"

namespace floodgate {

std::string NewRandomId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    Log(LogLevel::kError, "the CSPRNG failed: no id can be made", {});
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (size_t i = 0; i < sizeof(bytes); ++i) {
    id[2 * i] = kHex[bytes[i] >> 4];
    id[2 * i + 1] = kHex[bytes[i] & 0xf];
  }
  return id;
}

}  // namespace floodgate
