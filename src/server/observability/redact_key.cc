// SHA-256 through EVP_Digest (the one-shot SHA256() is deprecated in
// OpenSSL 3).
#include "server/observability/redact_key.h"

#include <openssl/evp.h>

namespace floodgate::server {

std::string RedactKey(std::string_view key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  std::string out = "sha256:";
  if (EVP_Digest(key.data(), key.size(), digest, &size, EVP_sha256(), nullptr) != 1 || size < 8) {
    out += "unavailable";  // never the key itself
    return out;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace floodgate::server
