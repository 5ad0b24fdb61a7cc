// Cidr: one network of a list, an address and a prefix length, and its
// text form ("10.0.0.0/8", "2001:db8::/32", a bare address).
//
// Contract:
//  - A Cidr is IPv4 or IPv6 as its address is (common/ip_address.h), and
//    its prefix length counts that family's bits: 0..32 or 0..128.
//  - Its host bits (those past the prefix) are zero. ParseCidr and Of clear
//    them rather than refuse them, as Go's net.ParseCIDR, iptables and
//    nginx's allow/deny do: "10.1.2.3/8" is 10.0.0.0/8. A list copied from
//    a router's config ("192.0.2.1/24", an interface's address) then means
//    the network the operator had in mind.
//  - ParseCidr reads "address/length" or a bare address (/32 or /128). The
//    length is decimal: 0, or digits with no leading zero. An IPv6 text in
//    the IPv4-mapped range with a length of 96 or more is the IPv4 network
//    it maps ("::ffff:192.0.2.0/120" is 192.0.2.0/24), so that it matches
//    the IPv4 clients it names. Other IPv6 networks, ::/0 included, never
//    match an IPv4 address: 0.0.0.0/0 is every IPv4 address, ::/0 every
//    IPv6 one (as nginx's geo module matches mapped clients on its IPv4
//    entries).
//  - Refusals are INVALID_ARGUMENT, the text quoted first (cut at 64 bytes,
//    control bytes escaped), then what is wrong, e.g.
//      '10.0.0.0/33': prefix length 33 is past 32 for IPv4
//  - ToString writes the canonical text ("10.0.0.0/8": the address as
//    IpAddress writes it, the length always), which ParseCidr reads back as
//    the same Cidr.
//
// In common/ beside IpAddress: the config refuses a network that does not
// parse (check-config, a reload) without the lists' layer, and the lists,
// the trusted proxies and the control plane's network blocks read the same
// text the same way.
//
// A value type. Thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/ip_address.h"
#include "floodgate/status.h"

namespace floodgate {

class Cidr {
 public:
  // 0.0.0.0/0.
  Cidr() : address_(IpAddress::FromV4(0)) {}

  // The network of `prefix_len` bits of `address` in its family, host bits
  // cleared; nullopt when prefix_len is outside 0..32 (IPv4) or 0..128 (IPv6).
  static std::optional<Cidr> Of(const IpAddress& address, int prefix_len);

  // The network address, host bits zero.
  const IpAddress& address() const { return address_; }
  int prefix_len() const { return prefix_len_; }
  bool is_v4() const { return address_.is_v4(); }

  // Whether `address` is of the same family and shares the first
  // prefix_len() bits.
  bool Contains(const IpAddress& address) const;

  std::string ToString() const;

  friend bool operator==(const Cidr&, const Cidr&) = default;
  friend auto operator<=>(const Cidr&, const Cidr&) = default;

 private:
  Cidr(const IpAddress& address, int prefix_len)
      : address_(address), prefix_len_(static_cast<uint8_t>(prefix_len)) {}

  IpAddress address_;
  uint8_t prefix_len_ = 0;
};

// Largest prefix length of each family.
inline constexpr int kMaxPrefixLenV4 = 32;
inline constexpr int kMaxPrefixLenV6 = 128;

// The network `text` spells; see the contract for the forms and refusals.
Result<Cidr> ParseCidr(std::string_view text);

}  // namespace floodgate
