// ClientAddress: see client_address.h.
#include "service/subjects/client_address.h"

#include <optional>
#include <vector>

#include "common/text.h"

namespace floodgate::service {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The list's elements, right-most first, at most kMaxForwardedHops + 1 (one
// more than is read tells a list that was too long).
std::vector<std::string_view> RightmostElements(std::string_view list) {
  std::vector<std::string_view> out;
  while (out.size() <= kMaxForwardedHops) {
    const size_t comma = list.rfind(',');
    if (comma == std::string_view::npos) {
      out.push_back(Trim(list));
      break;
    }
    out.push_back(Trim(list.substr(comma + 1)));
    list = list.substr(0, comma);
  }
  return out;
}

// A Forwarded element's for= value (`for=192.0.2.1;proto=https`), its
// quotes removed; empty when it has none. Parameter names are
// case-insensitive (RFC 7239, section 4).
std::string_view ForValue(std::string_view element) {
  while (!element.empty()) {
    const size_t semi = element.find(';');
    const std::string_view pair = Trim(element.substr(0, semi));
    element = semi == std::string_view::npos ? std::string_view() : element.substr(semi + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || !text::EqualsIgnoreCase(Trim(pair.substr(0, eq)), "for")) {
      continue;
    }
    std::string_view value = Trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return {};
}

}  // namespace

std::optional<IpAddress> ParseForwardedHop(std::string_view hop) {
  hop = Trim(hop);
  if (hop.empty()) return std::nullopt;
  if (hop.front() == '[') {  // [v6] or [v6]:port
    const size_t close = hop.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = hop.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
    return IpAddress::Parse(hop.substr(1, close - 1));
  }
  // One colon: IPv4 with a port. More: IPv6 without brackets (no port).
  const size_t colon = hop.find(':');
  if (colon != std::string_view::npos && hop.find(':', colon + 1) == std::string_view::npos) {
    hop = hop.substr(0, colon);
  }
  return IpAddress::Parse(hop);
}

IpAddress ClientAddress(const IpAddress& peer, const CidrSet& trusted_proxies,
                        const ForwardedHeaders& headers) {
  if (trusted_proxies.empty() || !trusted_proxies.Contains(peer)) return peer;
  const bool xff = !Trim(headers.x_forwarded_for).empty();
  const std::string_view list = xff ? headers.x_forwarded_for : headers.forwarded;
  if (Trim(list).empty()) return peer;
  IpAddress client = peer;
  const std::vector<std::string_view> hops = RightmostElements(list);
  for (size_t i = 0; i < hops.size() && i < kMaxForwardedHops; ++i) {
    const std::optional<IpAddress> hop = ParseForwardedHop(xff ? hops[i] : ForValue(hops[i]));
    if (!hop.has_value()) return client;
    client = *hop;
    if (!trusted_proxies.Contains(client)) return client;
  }
  return client;
}

}  // namespace floodgate::service
