// SubjectKey: a rule's key template (common/key_template.h) evaluated for
// one request: each part's value from the request, the literals between.
//
// Contract:
//  - {ip} is the client address as IpAddress writes it; {ip/...} the
//    network of the client's family's prefix, as Cidr writes it
//    ("203.0.113.0/24", "2001:db8:1:2::/64").
//  - {method}, {path:N}, {query:NAME} and {host} read the original
//    request (OriginalRequest): behind a trusted proxy, what its
//    X-Original-* fields say; otherwise the request itself. {path:N} is the
//    Nth non-empty segment of the path, {query:NAME} the first parameter of
//    that name; both percent-decoded ('+' is a space in a query). {host}
//    is lower-cased, without its port.
//  - {header:NAME} is the first field of that name; {cookie:NAME} the
//    first cookie of that name in any Cookie field; {jwt:CLAIM} the claim
//    of the verified token, when there is one.
//  - A part is missing when its value is absent or empty, or (percent-
//    decoded) holds a byte below 0x20: a key is opaque, but a NUL or a
//    newline in one would be a trap for every log line and store key that
//    shows it.
//
// Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/ip_address.h"
#include "common/key_template.h"
#include "service/subjects/jwt_verifier.h"
#include "service/subjects/request_view.h"

namespace floodgate::service {

// What {method}, {path:N}, {query:NAME} and {host} read.
struct OriginalRequest {
  std::string_view method;
  std::string_view path;   // without the query, still percent-encoded
  std::string_view query;  // after '?', still percent-encoded
  std::string_view host;   // as sent, port included
};

// The request's own line and Host, or, when `trusted` (the peer is a
// trusted proxy), X-Original-Method, X-Original-URI and X-Original-Host
// in place of each that is present.
OriginalRequest OriginalOf(const RequestView& request, bool trusted);

struct KeyInputs {
  const RequestView& request;
  const IpAddress& client;
  const OriginalRequest& original;
  const JwtClaims* claims;  // null: no valid token
};

// Appends the key `t` builds from `in` to *key; nullptr, or the first
// part that is missing (then *key holds a part of the key only).
const KeyPart* BuildKey(const KeyTemplate& t, const KeyInputs& in, std::string* key);

}  // namespace floodgate::service
