// OTP cryptography: see otp_codes.h.
#include "service/otp/otp_codes.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstring>

#include "floodgate/rule.h"

namespace floodgate::service {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* bytes, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xf]);
  }
  return out;
}

bool RandomBytes(unsigned char* out, size_t n) { return RAND_bytes(out, static_cast<int>(n)) == 1; }

}  // namespace

Result<std::string> GenerateCode(int digits) {
  if (digits < 4 || digits > 10) {
    return InvalidArgumentError("a code has 4 to 10 digits, not " + std::to_string(digits));
  }
  uint64_t modulus = 1;
  for (int i = 0; i < digits; ++i) modulus *= 10;
  // The largest multiple of the modulus that fits: values at or above it
  // would make the low codes likelier, so they are drawn again.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % modulus;
  uint64_t value = 0;
  do {
    unsigned char bytes[sizeof(value)];
    if (!RandomBytes(bytes, sizeof(bytes))) {
      return InternalError("the system's random number generator failed");
    }
    std::memcpy(&value, bytes, sizeof(value));
  } while (value >= limit);
  value %= modulus;
  std::string code(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i) {
    code[static_cast<size_t>(i)] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return code;
}

std::string CodeHmac(std::string_view secret, std::string_view subject, std::string_view code) {
  std::string message = "floodgate-otp-v1";
  message.push_back('\0');
  const uint64_t length = subject.size();
  for (int i = 0; i < 8; ++i) message.push_back(static_cast<char>(length >> (8 * i)));
  message.append(subject);
  message.append(code);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
           &mac_size) == nullptr) {
    // Only a broken OpenSSL gets here. No HMAC is 64 'x's, so nothing will
    // match this and verification fails closed.
    return std::string(64, 'x');
  }
  return Hex(mac, mac_size);
}

Result<std::string> RandomEventId() {
  unsigned char bytes[8];
  if (!RandomBytes(bytes, sizeof(bytes))) {
    return InternalError("the system's random number generator failed");
  }
  return Hex(bytes, sizeof(bytes));
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool IsWellFormedCode(std::string_view code, int digits) {
  if (code.size() != static_cast<size_t>(digits)) return false;
  for (char c : code) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

Status CheckSubject(std::string_view subject) {
  const std::string what =
      "subject must be 1 to " + std::to_string(kMaxKeyBytes) +
      " bytes of UTF-8 text without spaces or control characters, like +15550100 or "
      "ana@example.com";
  if (subject.empty() || subject.size() > kMaxKeyBytes) {
    return InvalidArgumentError(what + "; got " + std::to_string(subject.size()) + " bytes");
  }
  for (size_t i = 0; i < subject.size();) {
    const auto c = static_cast<unsigned char>(subject[i]);
    if (c <= 0x20 || c == 0x7f) return InvalidArgumentError(what);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, each
    // continuation byte 10xxxxxx, no overlong forms, no surrogates, at
    // most U+10FFFF (RFC 3629).
    const size_t n = c >= 0xc2 && c <= 0xdf   ? 2
                     : c >= 0xe0 && c <= 0xef ? 3
                     : c >= 0xf0 && c <= 0xf4 ? 4
                                              : 0;
    if (n == 0 || i + n > subject.size()) return InvalidArgumentError(what);
    uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(subject[i + k]);
      if ((cc & 0xc0) != 0x80) return InvalidArgumentError(what);
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0)) {
      return InvalidArgumentError(what);
    }
    i += n;
  }
  return Status::Ok();
}

}  // namespace floodgate::service
