// KeyTemplate: a rule's `key` written as parts of the request
// ("{ip/24}", "{header:x-api-key}", "user:{jwt:sub}"), read once when the
// config is, and evaluated per request by service/subjects/subject_key.h.
//
// Contract of ParseKeyTemplate:
//  - Literal text with parts in braces. A '{' always opens a part and a '}'
//    outside one is an error: there is no escape, and no key needs one.
//  - Parts: {ip}, {ip/N}, {ip/V4,V6}, {header:NAME}, {cookie:NAME},
//    {query:NAME}, {path:N}, {method}, {host}, {jwt:CLAIM}. Names are
//    1 to 64 bytes of A-Z a-z 0-9 and "-_.:"; a header name is kept
//    lower-cased (fields compare without case), the others as written.
//    {path:N}: N from 1 to kMaxPathSegment.
//  - {ip/N}: N from 1 to 32 is an IPv4 prefix, and IPv6 clients are keyed
//    by their /64 (one IPv6 host commonly owns a /64: keying IPv6 by /24
//    would lump an ISP's customers together, and by /128 would let one
//    host be 2^64 subjects). N above 32 is an IPv6 prefix, and must then
//    be a multiple of 4 (the sizes IPv6 networks are delegated in: /48,
//    /56, /64), with IPv4 clients keyed by their whole address: {ip/33} is
//    refused as most likely a typo for an IPv4 prefix, never read as an
//    IPv6 /33. {ip/V4,V6} names both (V4 1..32, V6 1..128), as HAProxy's
//    ipmask(V4,V6) does.
//  - At most kMaxTemplateParts parts and kMaxTemplateBytes bytes. A
//    template of literals alone is allowed (one subject for everyone).
//  - Errors are INVALID_ARGUMENT naming the part as written and what is
//    wrong, e.g. "{ip/33}: 33 is past 32 for IPv4, and an IPv6 prefix
//    here is a multiple of 4 (48, 56, 64); write {ip/V4,V6} to name both".
//
// Pure; in common/ because the config reads templates (to refuse a bad one
// at check-config) and service/subjects evaluates them, and neither layer
// may use the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/status.h"

namespace floodgate {

inline constexpr size_t kMaxTemplateParts = 8;
inline constexpr size_t kMaxTemplateBytes = 256;
inline constexpr int kMaxPathSegment = 32;
// What {ip/N} with N up to 32 keys an IPv6 client by.
inline constexpr int kDefaultIpv6Prefix = 64;

enum class KeyPartKind : uint8_t {
  kLiteral,
  kIp,      // v4_prefix/v6_prefix: 32/128 for {ip}
  kHeader,  // name lower-cased
  kCookie,
  kQuery,
  kPath,  // index from 1
  kMethod,
  kHost,
  kJwt,
};

struct KeyPart {
  KeyPartKind kind = KeyPartKind::kLiteral;
  std::string text;  // the literal, or the part's name
  int index = 0;     // {path:N}
  int v4_prefix = 32;
  int v6_prefix = 128;
  bool masked = false;  // {ip/...}: the key is the network, not the address
  // The part as written ("{ip/24}"): what messages and metrics name.
  std::string written;
};

struct KeyTemplate {
  std::string text;  // as written
  std::vector<KeyPart> parts;
  // Whether any part is {jwt:...}: such a rule needs the config's jwt.
  bool uses_jwt() const;
  // Whether any part is not a literal.
  bool from_request() const;
};

Result<KeyTemplate> ParseKeyTemplate(std::string_view text);

}  // namespace floodgate
