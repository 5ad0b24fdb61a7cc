// ClientAddress: who a request is from when it came through proxies, the
// address `{ip}` and `{ip/N}` in a rule's key stand for.
//
// Contract:
//  - A peer that is not a trusted proxy (server.trusted_proxies; none by
//    default) is the client, whatever its headers say: anyone can send
//    X-Forwarded-For.
//  - From a trusted proxy, the hops its header lists are read right to left
//    (the nearest proxy appends last): trusted ones are passed over, the
//    first untrusted one is the client. Every hop trusted: the left-most.
//    Nothing listed: the peer.
//  - A hop that is not an address (garbage, RFC 7239's "unknown" or an
//    obfuscated "_name") ends the walk: the client is the hop to its right
//    (the last trusted one read, or the peer), never anything to its left,
//    which whoever sent the request may have written.
//  - One header is read: X-Forwarded-For when the request has it (nginx's
//    $proxy_add_x_forwarded_for, HAProxy's forwardfor and Envoy append to
//    it), else Forwarded (its for= parameters). A proxy that writes only
//    Forwarded must drop a client's X-Forwarded-For (docs: keys from
//    requests, trusted proxies).
//  - Hops may carry a port (1.2.3.4:80, [2001:db8::1]:443) and brackets;
//    IPv4-mapped IPv6 is IPv4 (common/ip_address.h). At most
//    kMaxForwardedHops hops are read from the right: a longer list ends the
//    walk there, as a malformed hop does.
//
// Pure and thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/ip_address.h"
#include "service/lists/cidr_set.h"

namespace floodgate::service {

inline constexpr size_t kMaxForwardedHops = 32;

// The headers a proxy writes, each a request's lines of it joined by ","
// (empty: absent).
struct ForwardedHeaders {
  std::string_view x_forwarded_for;
  std::string_view forwarded;
};

IpAddress ClientAddress(const IpAddress& peer, const CidrSet& trusted_proxies,
                        const ForwardedHeaders& headers);

// One hop's text as X-Forwarded-For or a Forwarded for= value writes it
// (quotes already removed): an address, bracketed or not, with or without a
// port. nullopt when it is none.
std::optional<IpAddress> ParseForwardedHop(std::string_view hop);

}  // namespace floodgate::service
