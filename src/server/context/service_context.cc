// Helpers shared by the protocol sessions.
#include "server/context/service_context.h"

namespace floodgate::server {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Length is not secret-dependent in a way that helps an attacker guess the
  // token's bytes; the content comparison must not stop early.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace floodgate::server
