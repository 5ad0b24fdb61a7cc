// IpAddress: an IPv4 or IPv6 address as one 16-byte value, its text form
// and the reading of it.
//
// Contract:
//  - An IPv4 address is held in its IPv4-mapped IPv6 form (::ffff:a.b.c.d),
//    and an IPv4-mapped IPv6 address is an IPv4 address: 1.2.3.4 from an
//    IPv4 socket and ::ffff:1.2.3.4 from a dual-stack one are the same value
//    (equal, is_v4(), printed "1.2.3.4"). There is no way to hold the mapped
//    form as IPv6, so no caller can match one of the two and miss the other.
//  - Every other address is IPv6, the deprecated IPv4-compatible ::a.b.c.d
//    and NAT64's 64:ff9b::a.b.c.d included: neither is a client's IPv4
//    address as a socket reports it.
//  - Parse reads a dotted quad (four decimal parts of 0..255, no leading
//    zeros: "010" is octal to inet_aton, so it is refused rather than
//    guessed) or an RFC 4291 IPv6 text, with or without an IPv4 tail. No
//    zone ("%eth0"), brackets, port or whitespace.
//  - ToString writes a dotted quad, or RFC 5952's IPv6 text (lower-case hex,
//    no leading zeros, the longest run of two or more zero groups as "::",
//    the first such run on a tie); Parse reads it back as the same value.
//
// In common/ although the network lists (service/lists/) are its first
// user: the fronts read client addresses from X-Forwarded-For and
// Forwarded (protocol/ sits beside service/, not above it) and the peer's
// address from its socket (server/net/), and all of them must agree on
// what an address is, mapped form included.
//
// A value type. Thread-compatible.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate {

class IpAddress {
 public:
  // "::", the unspecified IPv6 address.
  IpAddress() = default;

  // `address` in host order: 0x0a000001 is 10.0.0.1.
  static IpAddress FromV4(uint32_t address);
  // 16 bytes in network order; an IPv4-mapped address gives an IPv4 one.
  static IpAddress FromV6Bytes(const std::array<uint8_t, 16>& bytes);
  // The same from the first and last 8 bytes as big-endian integers.
  static IpAddress FromV6Words(uint64_t high, uint64_t low);
  // The address `text` spells (see the contract), or nullopt.
  static std::optional<IpAddress> Parse(std::string_view text);

  bool is_v4() const;
  // The IPv4 address in host order. Requires is_v4().
  uint32_t v4() const;
  // The 16 bytes in network order (an IPv4 address in its mapped form).
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }
  // The first and last 8 bytes as big-endian integers: the address as two
  // words, for comparisons and masks.
  uint64_t high64() const;
  uint64_t low64() const;

  std::string ToString() const;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
  friend auto operator<=>(const IpAddress&, const IpAddress&) = default;

 private:
  std::array<uint8_t, 16> bytes_{};
};

}  // namespace floodgate
