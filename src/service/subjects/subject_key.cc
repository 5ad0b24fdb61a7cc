// A key template evaluated for one request (subject_key.h).
#include "service/subjects/subject_key.h"

#include <string>
#include <string_view>

#include "common/cidr.h"
#include "common/text.h"

namespace floodgate::service {
namespace {

// Appends `value` unless it is empty or holds a control byte.
bool AppendValue(std::string_view value, std::string* key) {
  if (value.empty()) return false;
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  key->append(value);
  return true;
}

bool AppendDecoded(std::string_view raw, bool plus_as_space, std::string* key) {
  std::string decoded;
  return text::PercentDecode(raw, plus_as_space, &decoded) && AppendValue(decoded, key);
}

// The Nth (from 1) non-empty segment of `path`.
std::string_view PathSegment(std::string_view path, int n) {
  size_t i = 0;
  int seen = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const size_t end = path.find('/', i);
    const std::string_view segment =
        path.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
    if (!segment.empty() && ++seen == n) return segment;
    if (end == std::string_view::npos) break;
    i = end;
  }
  return {};
}

// The first value of `name` among "a=1&b=2" parameters, still encoded;
// "" when there is none (an empty value is missing all the same).
std::string_view QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    std::string decoded_name;
    if (text::PercentDecode(pair.substr(0, eq), true, &decoded_name) && decoded_name == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The first cookie `name` of any Cookie field ("a=1; b=2", RFC 6265); a
// quoted value loses its quotes.
std::string_view Cookie(const RequestView& request, std::string_view name) {
  std::string_view found;
  bool done = false;
  request.ForEachHeader("cookie", [&](std::string_view line) {
    while (!done && !line.empty()) {
      const size_t semi = line.find(';');
      const std::string_view pair = Trim(line.substr(0, semi));
      const size_t eq = pair.find('=');
      if (eq != std::string_view::npos && Trim(pair.substr(0, eq)) == name) {
        found = Trim(pair.substr(eq + 1));
        if (found.size() >= 2 && found.front() == '"' && found.back() == '"') {
          found = found.substr(1, found.size() - 2);
        }
        done = true;
      }
      if (semi == std::string_view::npos) break;
      line.remove_prefix(semi + 1);
    }
  });
  return found;
}

// "Example.COM:8080" -> "example.com"; "[2001:db8::1]:443" -> "[2001:db8::1]".
bool AppendHost(std::string_view host, std::string* key) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    host = host.substr(0, close + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  const size_t start = key->size();
  if (!AppendValue(host, key)) return false;
  for (size_t i = start; i < key->size(); ++i) {
    char& c = (*key)[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return true;
}

bool AppendIp(const KeyPart& part, const IpAddress& client, std::string* key) {
  if (!part.masked) {
    key->append(client.ToString());
    return true;
  }
  const std::optional<Cidr> network =
      Cidr::Of(client, client.is_v4() ? part.v4_prefix : part.v6_prefix);
  if (!network) return false;
  key->append(network->ToString());
  return true;
}

}  // namespace

OriginalRequest OriginalOf(const RequestView& request, bool trusted) {
  std::string_view target = request.target();
  std::string_view method = request.method();
  std::string_view host = request.Header("host");
  if (trusted) {
    if (std::string_view m = request.Header("x-original-method"); !m.empty()) method = m;
    if (std::string_view u = request.Header("x-original-uri"); !u.empty()) target = u;
    if (std::string_view h = request.Header("x-original-host"); !h.empty()) host = h;
  }
  // An absolute-form target ("http://host/path?q") is read from its path
  // and query. The authority ends at the first '/' or '?' (RFC 3986
  // section 3.2): "http://host?next=/a" has an empty path, which is "/",
  // and its query is "next=/a", not a path of "/a".
  bool absolute = false;
  if (const size_t scheme = target.find("://");
      scheme != std::string_view::npos && scheme < target.find_first_of("/?")) {
    absolute = true;
    const size_t end = target.find_first_of("/?", scheme + 3);
    target = end == std::string_view::npos ? std::string_view() : target.substr(end);
  }
  const size_t q = target.find('?');
  OriginalRequest out;
  out.method = method;
  out.path = target.substr(0, q);
  if (absolute && out.path.empty()) out.path = "/";
  out.query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  out.host = host;
  return out;
}

const KeyPart* BuildKey(const KeyTemplate& t, const KeyInputs& in, std::string* key) {
  for (const KeyPart& part : t.parts) {
    bool ok = true;
    switch (part.kind) {
      case KeyPartKind::kLiteral:
        key->append(part.text);
        break;
      case KeyPartKind::kIp:
        ok = AppendIp(part, in.client, key);
        break;
      case KeyPartKind::kHeader:
        ok = AppendValue(in.request.Header(part.text), key);
        break;
      case KeyPartKind::kCookie:
        ok = AppendValue(Cookie(in.request, part.text), key);
        break;
      case KeyPartKind::kQuery:
        ok = AppendDecoded(QueryParam(in.original.query, part.text), true, key);
        break;
      case KeyPartKind::kPath:
        ok = AppendDecoded(PathSegment(in.original.path, part.index), false, key);
        break;
      case KeyPartKind::kMethod:
        ok = AppendValue(in.original.method, key);
        break;
      case KeyPartKind::kHost:
        ok = AppendHost(in.original.host, key);
        break;
      case KeyPartKind::kJwt: {
        if (in.claims == nullptr) {
          ok = false;
          break;
        }
        const auto it = in.claims->find(part.text);
        ok = it != in.claims->end() && AppendValue(it->second, key);
        break;
      }
    }
    if (!ok) return &part;
  }
  return nullptr;
}

}  // namespace floodgate::service
