// The key template's parser (key_template.h).
#include "common/key_template.h"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "common/text.h"

namespace floodgate {
namespace {

constexpr size_t kMaxPartNameBytes = 64;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == ':';
}

// A decimal number of 1 to 3 digits without a leading zero, or nullopt.
// Digits only: from_chars alone would read "-1" as a number, and {ip/-1}
// would pass check-config to be missing from every request.
std::optional<int> SmallNumber(std::string_view text) {
  if (text.empty() || text.size() > 3 || text[0] < '1' || text[0] > '9') return std::nullopt;
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

Status PartError(std::string_view written, const std::string& why) {
  return InvalidArgumentError(text::QuoteForMessage(written, 64, '\'') + ": " + why);
}

// "{ip/...}"'s prefixes, `spec` the text after the slash.
Status ParseIpPrefixes(std::string_view written, std::string_view spec, KeyPart& part) {
  part.masked = true;
  const size_t comma = spec.find(',');
  if (comma != std::string_view::npos) {
    const std::optional<int> v4 = SmallNumber(spec.substr(0, comma));
    const std::optional<int> v6 = SmallNumber(spec.substr(comma + 1));
    if (!v4 || *v4 > 32) {
      return PartError(written, "the IPv4 prefix must be a length from 1 to 32");
    }
    if (!v6 || *v6 > 128) {
      return PartError(written, "the IPv6 prefix must be a length from 1 to 128");
    }
    part.v4_prefix = *v4;
    part.v6_prefix = *v6;
    return Status::Ok();
  }
  const std::optional<int> n = SmallNumber(spec);
  if (!n) {
    return PartError(written,
                     "expected a prefix length: {ip/24}, {ip/64} or {ip/24,64} (IPv4, IPv6)");
  }
  if (*n <= 32) {
    part.v4_prefix = *n;
    part.v6_prefix = kDefaultIpv6Prefix;
    return Status::Ok();
  }
  if (*n > 128)
    return PartError(written, std::to_string(*n) + " is past 128, IPv6's longest prefix");
  if (*n % 4 != 0) {
    return PartError(written, std::to_string(*n) +
                                  " is past 32 for IPv4, and an IPv6 prefix here is a multiple "
                                  "of 4 (48, 56, 64); write {ip/V4,V6} to name both");
  }
  part.v4_prefix = 32;
  part.v6_prefix = *n;
  return Status::Ok();
}

// One part, `inner` the text between the braces.
Result<KeyPart> ParsePart(std::string_view inner) {
  KeyPart part;
  part.written = "{" + std::string(inner) + "}";
  const std::string_view written = part.written;
  if (inner == "ip") {
    part.kind = KeyPartKind::kIp;
    return part;
  }
  if (inner.starts_with("ip/")) {
    part.kind = KeyPartKind::kIp;
    if (Status s = ParseIpPrefixes(written, inner.substr(3), part); !s.ok()) return s;
    return part;
  }
  if (inner == "method") {
    part.kind = KeyPartKind::kMethod;
    return part;
  }
  if (inner == "host") {
    part.kind = KeyPartKind::kHost;
    return part;
  }
  const size_t colon = inner.find(':');
  const std::string_view kind = inner.substr(0, colon);
  const std::string_view name =
      colon == std::string_view::npos ? std::string_view() : inner.substr(colon + 1);
  static constexpr struct {
    std::string_view word;
    KeyPartKind kind;
  } kNamed[] = {{"header", KeyPartKind::kHeader},
                {"cookie", KeyPartKind::kCookie},
                {"query", KeyPartKind::kQuery},
                {"path", KeyPartKind::kPath},
                {"jwt", KeyPartKind::kJwt}};
  for (const auto& k : kNamed) {
    if (kind != k.word) continue;
    part.kind = k.kind;
    if (colon == std::string_view::npos || name.empty()) {
      return PartError(written, "'" + std::string(k.word) + "' needs a name: {" +
                                    std::string(k.word) +
                                    (k.kind == KeyPartKind::kPath ? ":1}" : ":NAME}"));
    }
    if (k.kind == KeyPartKind::kPath) {
      const std::optional<int> n = SmallNumber(name);
      if (!n || *n > kMaxPathSegment) {
        return PartError(written,
                         "a path segment is a number from 1 to " + std::to_string(kMaxPathSegment));
      }
      part.index = *n;
      return part;
    }
    if (name.size() > kMaxPartNameBytes) {
      return PartError(written,
                       "a name is at most " + std::to_string(kMaxPartNameBytes) + " bytes");
    }
    for (char c : name) {
      if (!IsNameChar(c)) {
        return PartError(written, "a name is made of A-Z, a-z, 0-9, '-', '_', '.' and ':'");
      }
    }
    part.text = std::string(name);
    if (k.kind == KeyPartKind::kHeader) {
      for (char& c : part.text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
    }
    return part;
  }
  return PartError(written,
                   "unknown part; expected {ip}, {ip/N}, {header:NAME}, {cookie:NAME}, "
                   "{query:NAME}, {path:N}, {method}, {host} or {jwt:CLAIM}");
}

}  // namespace

bool KeyTemplate::uses_jwt() const {
  for (const KeyPart& p : parts) {
    if (p.kind == KeyPartKind::kJwt) return true;
  }
  return false;
}

bool KeyTemplate::from_request() const {
  for (const KeyPart& p : parts) {
    if (p.kind != KeyPartKind::kLiteral) return true;
  }
  return false;
}

Result<KeyTemplate> ParseKeyTemplate(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("a key template is not empty");
  if (text.size() > kMaxTemplateBytes) {
    return InvalidArgumentError("a key template is at most " + std::to_string(kMaxTemplateBytes) +
                                " bytes");
  }
  KeyTemplate t;
  t.text = std::string(text);
  size_t parts = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find_first_of("{}", i);
    if (open == std::string_view::npos || open > i) {
      KeyPart literal;
      literal.text = std::string(text.substr(i, open == std::string_view::npos ? open : open - i));
      literal.written = literal.text;
      t.parts.push_back(std::move(literal));
      if (open == std::string_view::npos) break;
      i = open;
    }
    if (text[i] == '}') {
      return InvalidArgumentError(text::QuoteForMessage(text, 64, '\'') +
                                  ": a '}' closes no part (a '{' opens every part)");
    }
    const size_t close = text.find_first_of("{}", i + 1);
    if (close == std::string_view::npos || text[close] != '}') {
      return InvalidArgumentError(text::QuoteForMessage(text, 64, '\'') +
                                  ": a '{' is not closed by '}'");
    }
    if (++parts > kMaxTemplateParts) {
      return InvalidArgumentError(text::QuoteForMessage(text, 64, '\'') + ": more than " +
                                  std::to_string(kMaxTemplateParts) + " parts");
    }
    Result<KeyPart> part = ParsePart(text.substr(i + 1, close - i - 1));
    if (!part.ok()) return part.status();
    t.parts.push_back(*std::move(part));
    i = close + 1;
  }
  return t;
}

}  // namespace floodgate
