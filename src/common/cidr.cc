// Cidr and ParseCidr: see cidr.h. The masking, and the mapped range read as
// IPv4, are here and nowhere else, so every list and lookup agree on them.
#include "common/cidr.h"

#include <string>

#include "common/text.h"

namespace floodgate {
namespace {

// The first 96 bits of an IPv4-mapped address are the mapped prefix.
constexpr int kMappedPrefixLen = 96;

// `address`'s 128 bits with every bit from `prefix_len` on cleared.
IpAddress MaskV6(const IpAddress& address, int prefix_len) {
  uint64_t high = address.high64(), low = address.low64();
  if (prefix_len <= 64) {
    high = prefix_len == 0 ? 0 : high & (~uint64_t{0} << (64 - prefix_len));
    low = 0;
  } else {
    low &= ~uint64_t{0} << (128 - prefix_len);
  }
  return IpAddress::FromV6Words(high, low);
}

Status CidrError(std::string_view text, std::string_view what) {
  return InvalidArgumentError(text::QuoteForMessage(text, 64, '\'') + ": " + std::string(what));
}

}  // namespace

std::optional<Cidr> Cidr::Of(const IpAddress& address, int prefix_len) {
  if (address.is_v4()) {
    if (prefix_len < 0 || prefix_len > kMaxPrefixLenV4) return std::nullopt;
    const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
    return Cidr(IpAddress::FromV4(address.v4() & mask), prefix_len);
  }
  if (prefix_len < 0 || prefix_len > kMaxPrefixLenV6) return std::nullopt;
  // Clearing bits never turns an IPv6 address into a mapped one: that
  // would need bits 80..95 kept (a length of 96 or more) and a nonzero bit
  // before them cleared (a length under 80).
  return Cidr(MaskV6(address, prefix_len), prefix_len);
}

bool Cidr::Contains(const IpAddress& address) const {
  if (address.is_v4() != is_v4()) return false;
  if (is_v4()) return *Of(address, prefix_len_) == *this;
  return MaskV6(address, prefix_len_) == address_;
}

std::string Cidr::ToString() const {
  return address_.ToString() + "/" + std::to_string(prefix_len_);
}

Result<Cidr> ParseCidr(std::string_view text) {
  if (text.empty()) return CidrError(text, "no address");
  const size_t slash = text.find('/');
  const std::string_view address_text = text.substr(0, slash);
  const bool v6_text = address_text.find(':') != std::string_view::npos;
  const char* family = v6_text ? "IPv6" : "IPv4";
  const int max_len = v6_text ? kMaxPrefixLenV6 : kMaxPrefixLenV4;

  if (address_text.empty()) return CidrError(text, "no address before '/'");
  const std::optional<IpAddress> address = IpAddress::Parse(address_text);
  if (!address) {
    const std::string what = std::string("not an ") + family + " address";
    if (slash == std::string_view::npos) return CidrError(text, what);
    return CidrError(text, text::QuoteForMessage(address_text, 64, '\'') + " is " + what);
  }

  int prefix_len = max_len;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (digits.empty()) return CidrError(text, "no prefix length after '/'");
    for (char c : digits) {
      if (c < '0' || c > '9') {
        return CidrError(text, "prefix length " + text::QuoteForMessage(digits, 16, '\'') +
                                   " is not a decimal number");
      }
    }
    if (digits.size() > 1 && digits[0] == '0') {
      return CidrError(
          text, "prefix length " + text::QuoteForMessage(digits, 16, '\'') + " has a leading zero");
    }
    // Four digits or more are past any family's bits; the value is not
    // needed, and a long run of them cannot overflow anything.
    if (digits.size() > 3) {
      return CidrError(text, "prefix length " + std::string(digits.substr(0, 16)) +
                                 (digits.size() > 16 ? "..." : "") + " is past " +
                                 std::to_string(max_len) + " for " + family);
    }
    prefix_len = 0;
    for (char c : digits) prefix_len = prefix_len * 10 + (c - '0');
    if (prefix_len > max_len) {
      return CidrError(text, "prefix length " + std::to_string(prefix_len) + " is past " +
                                 std::to_string(max_len) + " for " + family);
    }
  }

  // An IPv6 text of the mapped range counts its length over 128 bits; the
  // IPv4 network it names has 96 fewer. Shorter than the mapped prefix, it
  // spans more than the IPv4 space and stays an IPv6 network.
  if (v6_text && address->is_v4()) {
    if (prefix_len >= kMappedPrefixLen) return *Cidr::Of(*address, prefix_len - kMappedPrefixLen);
    return *Cidr::Of(MaskV6(*address, prefix_len), prefix_len);
  }
  return *Cidr::Of(*address, prefix_len);
}

}  // namespace floodgate
