// The first error on OpenSSL's (per-thread) queue as text, and the queue
// cleared: what every TLS message of floodgate's (the Redis client's, the
// listeners') ends with.
#pragma once

#include <openssl/err.h>

#include <string>

namespace floodgate {

inline std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown TLS error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  // "error:0A000086:SSL routines::certificate verify failed" -> the reason.
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? std::string(reason) : std::string(buf);
}

}  // namespace floodgate
