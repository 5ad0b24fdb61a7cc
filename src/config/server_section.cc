// The server sections: `listen` and `server` (server_section.h).
#include "config/server_section.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "config/subjects_section.h"

namespace floodgate::config {
namespace {

constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMaxConnections = 10'000'000;
constexpr int64_t kMaxServerTimeoutMs = 7LL * 86'400'000;  // a week: beyond it, use 0 (off)
constexpr int64_t kMaxOutputLimit = int64_t{1} << 40;

// "host:port" or "[v6]:port", port 0..65535 (0: any free port).
bool IsHostPort(std::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  int port_number = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    port_number = port_number * 10 + (c - '0');
  }
  if (port_number > 65535) return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    for (char c : host.substr(1, host.size() - 2)) {
      const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                      c == ':' || c == '.';
      if (!ok) return false;
    }
    return true;
  }
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Status ParseListenEntry(const Fields& fields, const std::string& name, const YAML::Node& key,
                        const YAML::Node& value, ListenConfig& listen) {
  std::string* target = name == "http"   ? &listen.http
                        : name == "resp" ? &listen.resp
                        : name == "grpc" ? &listen.grpc
                                         : nullptr;
  if (target == nullptr) {
    return fields.Fail(key.Mark(),
                       "unknown key '" + name + "' in listen; expected http, resp or grpc", name);
  }
  // As with --http off: `off` (or false, as YAML users also write it)
  // turns the front off.
  if (value.IsScalar()) {
    for (const char* off : {"off", "Off", "OFF", "false", "False", "FALSE"}) {
      if (value.Scalar() == off) {
        *target = "off";
        return Status::Ok();
      }
    }
  }
  Result<std::string> address = fields.String(key, value, "listen." + name);
  if (!address.ok()) return address.status();
  if (!IsHostPort(*address)) {
    return fields.FailAt(key, value,
                         "'listen." + name + "' must be host:port, e.g. 127.0.0.1:8080, or off",
                         *address);
  }
  *target = *std::move(address);
  return Status::Ok();
}

// Messages never quote auth_token's value: it is a secret.
Status ParseServerEntry(const Fields& fields, const std::string& name, const YAML::Node& key,
                        const YAML::Node& value, ServerConfig& server) {
  // Timeouts: a duration, or 0 / off.
  struct TimeoutField {
    const char* name;
    int64_t max_ms;
    int64_t* target;
  };
  const TimeoutField timeouts[] = {
      {"http_request_timeout", kMaxServerTimeoutMs, &server.http_request_timeout_ms},
      {"http_idle_timeout", kMaxServerTimeoutMs, &server.http_idle_timeout_ms},
      {"resp_command_timeout", kMaxServerTimeoutMs, &server.resp_command_timeout_ms},
      {"resp_idle_timeout", kMaxServerTimeoutMs, &server.resp_idle_timeout_ms},
      {"output_soft_timeout", kMaxServerTimeoutMs, &server.output_soft_timeout_ms},
      {"grpc_keepalive_time", kMaxServerTimeoutMs, &server.grpc_keepalive_time_ms},
      {"grpc_keepalive_timeout", kMaxServerTimeoutMs, &server.grpc_keepalive_timeout_ms},
  };
  for (const TimeoutField& f : timeouts) {
    if (name != f.name) continue;
    Result<int64_t> ms = fields.DurationOrOff(key, value, "server." + name, f.max_ms);
    if (!ms.ok()) return ms.status();
    *f.target = *ms;
    return Status::Ok();
  }
  // Byte counts: output limits (0 / off: none).
  struct SizeField {
    const char* name;
    int64_t* target;
  };
  const SizeField sizes[] = {
      {"output_soft_limit", &server.output_soft_limit},
      {"output_hard_limit", &server.output_hard_limit},
  };
  for (const SizeField& f : sizes) {
    if (name != f.name) continue;
    Result<int64_t> bytes = fields.Size(key, value, "server." + name, 0, kMaxOutputLimit);
    if (!bytes.ok()) return bytes.status();
    *f.target = *bytes;
    return Status::Ok();
  }
  if (name == "threads") {
    Result<int64_t> n = fields.Int(key, value, "server.threads", 0, kMaxThreads);
    if (!n.ok()) return n.status();
    server.threads = static_cast<int>(*n);
  } else if (name == "max_connections") {
    Result<int64_t> n = fields.Int(key, value, "server.max_connections", 1, kMaxConnections);
    if (!n.ok()) return n.status();
    server.max_connections = *n;
  } else if (name == "max_connections_per_ip") {
    Result<int64_t> n = fields.Int(key, value, "server.max_connections_per_ip", 0, kMaxConnections);
    if (!n.ok()) return n.status();
    server.max_connections_per_ip = *n;
  } else if (name == "drain_timeout") {
    // A drain of 0 would drop every reply in flight at SIGTERM: at least 1 ms.
    Result<int64_t> ms =
        fields.Duration(key, value, "server.drain_timeout", 1, kMaxServerTimeoutMs);
    if (!ms.ok()) return ms.status();
    server.drain_timeout_ms = *ms;
  } else if (name == "auth_token") {
    if (!value.IsScalar()) return fields.WrongType(key, value, "server.auth_token", "a string");
    server.auth_token = value.Scalar();
  } else if (name == "auth_token_env") {
    Result<std::string> variable = fields.EnvironmentVariable(key, value, "server.auth_token_env");
    if (!variable.ok()) return variable.status();
    server.auth_token_env = *std::move(variable);
  } else if (name == "trusted_proxies") {
    return ParseTrustedProxies(fields, key, value, server.trusted_proxies);
  } else {
    return fields.Fail(
        key.Mark(),
        "unknown key '" + name +
            "' in server; expected threads, max_connections, max_connections_per_ip, "
            "http_request_timeout, http_idle_timeout, resp_command_timeout, "
            "resp_idle_timeout, output_soft_limit, output_soft_timeout, "
            "output_hard_limit, drain_timeout, grpc_keepalive_time, "
            "grpc_keepalive_timeout, auth_token, auth_token_env or trusted_proxies",
        name);
  }
  return Status::Ok();
}

// Checks that need the whole server section: the limits' order.
Status CheckServer(const Fields& fields, const YAML::Node& key, const ServerConfig& server) {
  if (server.output_hard_limit != 0 && server.output_soft_limit != 0 &&
      server.output_hard_limit <= server.output_soft_limit) {
    return fields.Fail(key.Mark(),
                       "'server.output_hard_limit' must be larger than 'server.output_soft_limit' "
                       "(or 0: none)",
                       "server");
  }
  if (server.output_soft_limit == 0 && server.output_soft_timeout_ms != 0) {
    // Without a soft limit the timeout would never start: say so rather
    // than accept a setting that does nothing.
    return fields.Fail(key.Mark(),
                       "'server.output_soft_timeout' needs 'server.output_soft_limit' (or set the "
                       "timeout to 0 too)",
                       "server");
  }
  return Status::Ok();
}

}  // namespace

Status ParseListen(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   ListenConfig& listen) {
  return fields.ForEachInSection(
      key, value, "listen", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseListenEntry(fields, name, k, v, listen);
      });
}

Status ParseServer(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   ServerConfig& server) {
  Status s = fields.ForEachInSection(
      key, value, "server", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseServerEntry(fields, name, k, v, server);
      });
  if (!s.ok()) return s;
  return CheckServer(fields, key, server);
}

}  // namespace floodgate::config
