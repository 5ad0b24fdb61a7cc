// Store URL parsing. Strict on purpose: a URL names the backend that holds
// every counter, so anything ambiguous is refused with a message quoting the
// part at fault rather than guessed at. The user and password are never
// quoted: error messages end up in logs.
#include "common/store_url.h"

#include <charconv>
#include <string>

#include "common/enum_table.h"
#include "common/text.h"

namespace floodgate {
namespace {

Status UrlError(std::string what) { return InvalidArgumentError("store URL: " + what); }

std::string Quoted(std::string_view text) { return text::QuoteForMessage(text, 128, '\''); }

struct Scheme {
  std::string_view name;
  StoreMode mode;
  bool tls;
};

constexpr Scheme kSchemes[] = {
    {"redis", StoreMode::kStandalone, false},
    {"rediss", StoreMode::kStandalone, true},
    {"redis+cluster", StoreMode::kCluster, false},
    {"rediss+cluster", StoreMode::kCluster, true},
    {"redis+proxy", StoreMode::kProxy, false},
    {"rediss+proxy", StoreMode::kProxy, true},
    {"redis-sentinel", StoreMode::kSentinel, false},
    {"rediss-sentinel", StoreMode::kSentinel, true},
};

std::string_view SchemeName(StoreMode mode, bool tls) {
  for (const Scheme& s : kSchemes) {
    if (s.mode == mode && s.tls == tls) return s.name;
  }
  return "redis";
}

// Percent-decodes `in` into `out`; false on a bad escape (the caller says
// which field, without quoting it: it may be a password).
bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// A sentinel's master name: what `sentinel monitor` accepts and a URL path
// carries without escapes.
bool IsMasterNameChar(char c) { return IsHostChar(c) || c == ':' || c == '+'; }

bool IsV6Char(char c) { return text::HexDigitValue(c) >= 0 || c == ':' || c == '.'; }

bool ParseYesNo(std::string_view v, bool& out) {
  if (v == "yes" || v == "true" || v == "1" || v == "on") {
    out = true;
    return true;
  }
  if (v == "no" || v == "false" || v == "0" || v == "off") {
    out = false;
    return true;
  }
  return false;
}

}  // namespace

constexpr EnumRow<StoreMode, const char*> kStoreModeNames[] = {
    {StoreMode::kStandalone, "standalone"},
    {StoreMode::kCluster, "cluster"},
    {StoreMode::kProxy, "proxy"},
    {StoreMode::kSentinel, "sentinel"}};

const char* StoreModeName(StoreMode mode) { return ValueIn(kStoreModeNames, mode, "standalone"); }

std::string HostPort::ToString() const {
  std::string out;
  if (host.find(':') != std::string::npos) {
    out = "[" + host + "]";
  } else {
    out = host;
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

Result<HostPort> ParseHostPort(std::string_view text) {
  if (text.empty()) return UrlError("empty host");
  HostPort hp;
  std::string_view port_text;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return UrlError("unclosed '[' in " + Quoted(text));
    }
    const std::string_view host = text.substr(1, close - 1);
    if (host.empty()) return UrlError("empty host in " + Quoted(text));
    for (char c : host) {
      if (!IsV6Char(c)) return UrlError("bad IPv6 address in " + Quoted(text));
    }
    hp.host = std::string(host);
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return UrlError("missing port in " + Quoted(text));
    if (rest.front() != ':') return UrlError("unexpected text after ']' in " + Quoted(text));
    port_text = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return UrlError("missing port in " + Quoted(text));
    const std::string_view host = text.substr(0, colon);
    if (host.empty()) return UrlError("empty host in " + Quoted(text));
    if (host.find(':') != std::string_view::npos) {
      return UrlError("IPv6 addresses need brackets ('[::1]:6379'): " + Quoted(text));
    }
    for (char c : host) {
      if (!IsHostChar(c)) return UrlError("bad character in host " + Quoted(text));
    }
    hp.host = std::string(host);
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty()) return UrlError("missing port in " + Quoted(text));
  int64_t port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9') return UrlError("bad port in " + Quoted(text));
    port = port * 10 + (c - '0');
    if (port > 65535) break;
  }
  if (port < 1 || port > 65535) {
    return UrlError("port out of range (1-65535) in " + Quoted(text));
  }
  hp.port = static_cast<int>(port);
  return hp;
}

std::string StoreUrl::Redacted() const {
  std::string out(SchemeName(mode, tls));
  out += "://";
  if (!user.empty() || !password.empty()) {
    out += user;
    if (!password.empty()) out += ":***";
    out += '@';
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) out += ',';
    out += nodes[i].ToString();
  }
  std::string query;
  auto add = [&](std::string_view key, const std::string& value) {
    if (value.empty()) return;
    query += query.empty() ? '?' : '&';
    query += key;
    query += '=';
    query += value;
  };
  if (mode == StoreMode::kSentinel) {
    out += "/" + master_name;
    if (db >= 0) add("db", std::to_string(db));
    add("sentinel_user", sentinel_user);
    if (!sentinel_password.empty()) add("sentinel_password", "***");
  } else if (db >= 0) {
    out += "/" + std::to_string(db);
  }
  add("tls_ca_file", tls_options.ca_file);
  add("tls_cert_file", tls_options.cert_file);
  add("tls_key_file", tls_options.key_file);
  add("tls_server_name", tls_options.server_name);
  if (tls && !tls_options.verify) add("tls_verify", "no");
  return out + query;
}

Result<StoreUrl> ParseStoreUrl(std::string_view url) {
  StoreUrl out;
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return UrlError("expected scheme://..., e.g. redis://127.0.0.1:6379, got " + Quoted(url));
  }
  const std::string_view scheme = url.substr(0, sep);
  bool known = false;
  for (const Scheme& s : kSchemes) {
    if (text::EqualsIgnoreCase(scheme, s.name)) {
      out.mode = s.mode;
      out.tls = s.tls;
      known = true;
      break;
    }
  }
  if (!known) {
    return UrlError("unknown scheme " + Quoted(scheme) +
                    " (expected redis, rediss, redis+cluster, rediss+cluster, redis+proxy, "
                    "rediss+proxy, redis-sentinel or rediss-sentinel)");
  }
  std::string_view rest = url.substr(sep + 3);

  // The authority ends at the first '/', '?' or '#'; its userinfo is what
  // precedes the last '@' in it.
  const size_t auth_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, auth_end);
  std::string_view tail = auth_end == std::string_view::npos ? "" : rest.substr(auth_end);

  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = userinfo.find(':');
    const std::string_view user = userinfo.substr(0, colon);
    if (colon == std::string_view::npos) {
      return UrlError("a user without a password before '@' (write user:password@ or :password@)");
    }
    const std::string_view password = userinfo.substr(colon + 1);
    if (!text::PercentDecode(user, false, &out.user))
      return UrlError("bad percent-escape in the user name");
    if (!text::PercentDecode(password, false, &out.password)) {
      return UrlError("bad percent-escape in the password");
    }
    if (out.password.empty()) return UrlError("empty password before '@'");
  }

  if (authority.empty()) return UrlError("empty host in " + Quoted(url.substr(0, sep + 3)));
  size_t start = 0;
  while (true) {
    const size_t comma = authority.find(',', start);
    const std::string_view part = authority.substr(start, comma - start);
    if (part.empty()) return UrlError("empty host in the list " + Quoted(authority));
    Result<HostPort> hp = ParseHostPort(part);
    if (!hp.ok()) return hp.status();
    out.nodes.push_back(*std::move(hp));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  const bool sentinel = out.mode == StoreMode::kSentinel;
  if (out.mode != StoreMode::kCluster && !sentinel && out.nodes.size() > 1) {
    return UrlError(std::string(SchemeName(out.mode, out.tls)) +
                    ":// takes one host:port; several seeds need redis+cluster://, got " +
                    Quoted(authority));
  }

  std::string_view path;
  std::string_view query;
  const size_t q = tail.find('?');
  path = tail.substr(0, q);
  if (q != std::string_view::npos) query = tail.substr(q + 1);
  if (path.find('#') != std::string_view::npos || query.find('#') != std::string_view::npos) {
    return UrlError("unexpected '#' fragment in " + Quoted(tail));
  }
  if (sentinel) {
    // The path is the master's name, as sentinel.conf's `sentinel monitor`.
    const std::string_view name = path.empty() ? path : path.substr(1);
    if (name.empty()) {
      return UrlError(std::string(SchemeName(out.mode, out.tls)) +
                      ":// needs the master's name after the sentinels, e.g. "
                      "redis-sentinel://127.0.0.1:26379/mymaster");
    }
    for (char c : name) {
      if (!IsMasterNameChar(c)) return UrlError("bad character in the master name " + Quoted(name));
    }
    out.master_name = std::string(name);
  } else if (path.size() > 1) {
    if (out.mode != StoreMode::kStandalone) {
      return UrlError("a database number (" + Quoted(path) + ") is not supported with " +
                      std::string(SchemeName(out.mode, out.tls)) +
                      ":// (Redis Cluster and proxies only have database 0)");
    }
    const std::string_view digits = path.substr(1);
    int db = -1;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), db);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || db < 0 ||
        digits.front() == '+') {
      return UrlError("bad database number " + Quoted(path) + " (expected /0, /1, ...)");
    }
    out.db = db;
  }

  bool seen_ca = false, seen_cert = false, seen_key = false, seen_name = false, seen_verify = false;
  bool seen_db = false, seen_tls = false, seen_suser = false, seen_spass = false;
  std::string tls_option;  // the first tls_* option given, for the error without TLS
  start = 0;
  while (!query.empty() && start <= query.size()) {
    const size_t amp = query.find('&', start);
    const std::string_view item = query.substr(start, amp - start);
    start = amp == std::string_view::npos ? query.size() + 1 : amp + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    if (eq == std::string_view::npos) return UrlError("option " + Quoted(key) + " needs a value");
    std::string value;
    if (!text::PercentDecode(item.substr(eq + 1), false, &value)) {
      return UrlError("bad percent-escape in option " + Quoted(item));
    }
    bool* seen = nullptr;
    std::string* field = nullptr;
    if (key == "db" || key == "tls" || key == "sentinel_user" || key == "sentinel_password") {
      // Sentinel URLs' own: their path is the master's name.
      if (!sentinel) {
        return UrlError("option " + Quoted(key) + " is for redis-sentinel:// URLs" +
                        (key == "db" ? std::string(" (write the database as /N)") : ""));
      }
      bool& once = key == "db"              ? seen_db
                   : key == "tls"           ? seen_tls
                   : key == "sentinel_user" ? seen_suser
                                            : seen_spass;
      if (once) return UrlError("option " + Quoted(key) + " given twice");
      once = true;
      if (key == "db") {
        int db = -1;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), db);
        if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || db < 0 ||
            value.front() == '+') {
          return UrlError("bad database number " + Quoted(value) + " (expected db=0, db=1, ...)");
        }
        out.db = db;
      } else if (key == "tls") {
        bool tls = false;
        if (!ParseYesNo(value, tls)) return UrlError("tls must be yes or no, got " + Quoted(value));
        out.tls = out.tls || tls;
      } else if (value.empty()) {
        return UrlError("option " + Quoted(key) + " needs a value");
      } else if (key == "sentinel_user") {
        out.sentinel_user = std::move(value);
      } else {
        out.sentinel_password = std::move(value);
      }
      continue;
    }
    if (key == "tls_ca_file") {
      seen = &seen_ca;
      field = &out.tls_options.ca_file;
    } else if (key == "tls_cert_file") {
      seen = &seen_cert;
      field = &out.tls_options.cert_file;
    } else if (key == "tls_key_file") {
      seen = &seen_key;
      field = &out.tls_options.key_file;
    } else if (key == "tls_server_name") {
      seen = &seen_name;
      field = &out.tls_options.server_name;
    } else if (key == "tls_verify") {
      seen = &seen_verify;
    } else {
      return UrlError(
          "unknown option " + Quoted(key) +
          " (known: tls_ca_file, tls_cert_file, tls_key_file, tls_server_name, "
          "tls_verify" +
          (sentinel ? std::string(", db, tls, sentinel_user, sentinel_password") : std::string()) +
          ")");
    }
    if (tls_option.empty()) tls_option = std::string(key);
    if (*seen) return UrlError("option " + Quoted(key) + " given twice");
    *seen = true;
    if (field != nullptr) {
      if (value.empty()) return UrlError("option " + Quoted(key) + " needs a value");
      *field = std::move(value);
    } else if (!ParseYesNo(value, out.tls_options.verify)) {
      return UrlError("tls_verify must be yes or no, got " + Quoted(value));
    }
  }
  // After every option: a sentinel URL may turn TLS on with tls=yes.
  if (!tls_option.empty() && !out.tls) {
    return UrlError("option " + Quoted(tls_option) + " needs a TLS scheme (rediss://...)");
  }
  if (!out.sentinel_user.empty() && out.sentinel_password.empty()) {
    return UrlError("sentinel_user needs sentinel_password");
  }
  if (out.tls_options.cert_file.empty() != out.tls_options.key_file.empty()) {
    return UrlError("tls_cert_file and tls_key_file go together");
  }
  return out;
}

}  // namespace floodgate
