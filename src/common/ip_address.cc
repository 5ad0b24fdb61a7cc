// IpAddress: see ip_address.h. Reading leans on inet_pton, which has
// parsed addresses for every socket program for decades; writing is ours,
// because glibc's inet_ntop prints some IPv6 addresses with an IPv4 tail
// (::0.2.0.3 for ::2:3) where RFC 5952 wants hex.
#include "common/ip_address.h"

#include <arpa/inet.h>

#include <bit>
#include <cstring>

namespace floodgate {
namespace {

// ::ffff:0:0/96, the IPv4-mapped prefix.
constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// The longest text inet_pton can accept: eight groups of four hex digits,
// or six and a dotted quad ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
// 45 bytes). Anything longer is refused without a copy.
constexpr size_t kMaxAddressText = 45;

// Lookups convert every address to words, so these are a load or a store
// and a byte swap rather than a loop over bytes.
uint64_t LoadBigEndian64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

void StoreBigEndian64(uint64_t v, uint8_t* p) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof(v));
}

}  // namespace

IpAddress IpAddress::FromV4(uint32_t address) {
  IpAddress a;
  std::memcpy(a.bytes_.data(), kMappedPrefix.data(), kMappedPrefix.size());
  a.bytes_[12] = static_cast<uint8_t>(address >> 24);
  a.bytes_[13] = static_cast<uint8_t>(address >> 16);
  a.bytes_[14] = static_cast<uint8_t>(address >> 8);
  a.bytes_[15] = static_cast<uint8_t>(address);
  return a;
}

IpAddress IpAddress::FromV6Bytes(const std::array<uint8_t, 16>& bytes) {
  IpAddress a;
  a.bytes_ = bytes;
  return a;
}

IpAddress IpAddress::FromV6Words(uint64_t high, uint64_t low) {
  IpAddress a;
  StoreBigEndian64(high, a.bytes_.data());
  StoreBigEndian64(low, a.bytes_.data() + 8);
  return a;
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  if (text.empty() || text.size() > kMaxAddressText) return std::nullopt;
  char buffer[kMaxAddressText + 1];
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  // inet_pton stops at the NUL: a NUL inside the text would let a prefix
  // of it pass for the whole.
  if (std::memchr(buffer, '\0', text.size()) != nullptr) return std::nullopt;
  if (text.find(':') == std::string_view::npos) {
    uint8_t four[4];
    if (inet_pton(AF_INET, buffer, four) != 1) return std::nullopt;
    return FromV4(uint32_t{four[0]} << 24 | uint32_t{four[1]} << 16 | uint32_t{four[2]} << 8 |
                  four[3]);
  }
  IpAddress a;
  if (inet_pton(AF_INET6, buffer, a.bytes_.data()) != 1) return std::nullopt;
  return a;
}

bool IpAddress::is_v4() const {
  return std::memcmp(bytes_.data(), kMappedPrefix.data(), kMappedPrefix.size()) == 0;
}

uint32_t IpAddress::v4() const {
  return uint32_t{bytes_[12]} << 24 | uint32_t{bytes_[13]} << 16 | uint32_t{bytes_[14]} << 8 |
         bytes_[15];
}

uint64_t IpAddress::high64() const { return LoadBigEndian64(bytes_.data()); }
uint64_t IpAddress::low64() const { return LoadBigEndian64(bytes_.data() + 8); }

std::string IpAddress::ToString() const {
  std::string out;
  if (is_v4()) {
    for (int i = 12; i < 16; ++i) {
      if (i > 12) out += '.';
      out += std::to_string(bytes_[i]);
    }
    return out;
  }
  uint16_t groups[8];
  for (int i = 0; i < 8; ++i)
    groups[i] = static_cast<uint16_t>(bytes_[2 * i] << 8 | bytes_[2 * i + 1]);
  // RFC 5952 4.2: "::" stands for the longest run of zero groups, the first
  // on a tie, and never for a single group.
  int best_start = -1, best_length = 1;
  for (int i = 0; i < 8;) {
    if (groups[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && groups[j] == 0) ++j;
    if (j - i > best_length) {
      best_start = i;
      best_length = j - i;
    }
    i = j;
  }
  constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    if (i == best_start) {
      out += "::";
      i += best_length - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const int digit = (groups[i] >> shift) & 0xf;
      if (digit != 0 || started || shift == 0) {
        out += kHex[digit];
        started = true;
      }
    }
  }
  return out;
}

}  // namespace floodgate
