// Server: see server.h.
#include "server/server.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/log.h"
#include "protocol/http/response.h"
#include "server/http/http_session.h"
#include "server/http/http_visibility_routes.h"
#include "server/http/visibility.h"
#include "server/resp/resp_session.h"

namespace floodgate::server {

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int DefaultLoopCount(int cores) { return std::max(1, (cores + 1) / 2); }

void WarnWithoutMigration() {
  bool known = false;
  if (TcpMigrateReq(&known)) return;
  Log(LogLevel::kWarn,
      known ? "net.ipv4.tcp_migrate_req is 0: when the floodgate being replaced stops "
              "accepting, the connections waiting in its accept queue are reset"
            : "this kernel has no net.ipv4.tcp_migrate_req (Linux 5.14+): when the floodgate "
              "being replaced stops accepting, the connections waiting in its accept queue are "
              "reset",
      {{"hint",
        "sysctl -w net.ipv4.tcp_migrate_req=1 (and keep it in /etc/sysctl.d/); see "
        "docs/operations.md, Graceful restart"}});
}

Server::Server(const ServerOptions& options, service::Services* services)
    : options_(options), metrics_(options.threads) {
  context_.services = services;
  context_.limiter = services->core.get();
  context_.metrics = &metrics_;
  context_.auth_token = options.auth_token;
  context_.admin_token = options.admin_token;
  context_.read_token = options.read_token;
  context_.admin_client_names = options.admin_client_names;
  context_.admin_allow_plaintext = options.admin_allow_plaintext;
  context_.started_at_ns = context_.clock().MonotonicNs();
  context_.threads = options.threads;
  context_.version = options.version;
  context_.render_connections = [this](std::string* out) { RenderConnections(out); };
  context_.max_store_calls_in_flight = options.max_store_calls_in_flight;
  context_.connections_json = [this] { return ConnectionsJson(); };
  visibility_ = std::make_unique<Visibility>(options.visibility, options.redact_keys, services,
                                             options.threads);
  context_.visibility = visibility_.get();
  context_.top = visibility_->recorder();
  context_.denied_log = visibility_->denied_log();
  context_.redact_keys = options.redact_keys;
  context_.simulate = options.simulate;
}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                              service::Services* services) {
  if (options.threads < 1 || options.threads > 256) {
    return InvalidArgumentError("threads must be between 1 and 256");
  }
  if (options.resp_address.empty() && options.http_address.empty()) {
    return InvalidArgumentError("no front to serve: both RESP and HTTP are disabled");
  }
  std::unique_ptr<Server> server(new Server(options, services));
  std::vector<LoopContext*> contexts;
  for (int i = 0; i < options.threads; ++i) {
    server->loop_contexts_.push_back(std::make_unique<LoopContext>(&server->context_, i));
    contexts.push_back(server->loop_contexts_.back().get());
  }
  server->resp_factory_ = std::make_unique<RespSessionFactory>(contexts, options.resp_limits);
  // POST /v1/admin/simulate takes a traffic log: as large a body as a
  // connection's pending input may hold.
  http::ParserLimits http_limits = options.http_limits;
  http_limits.large_body_path = kSimulatePath;
  http_limits.large_body_bytes =
      options.limits.max_pending_input > http_limits.max_header_bytes
          ? options.limits.max_pending_input - http_limits.max_header_bytes
          : 0;
  server->context_.simulate_max_body_bytes = http_limits.large_body_bytes;
  server->http_factory_ = std::make_unique<HttpSessionFactory>(contexts, http_limits);

  // One socket per loop per front, all on the same port (SO_REUSEPORT). A
  // port 0 is resolved by the first bind and reused by the others.
  std::vector<std::vector<ListenerSpec>> specs(options.threads);
  auto bind_all = [&](const std::string& address, const char* protocol, SessionFactory* factory,
                      ListenerCounters* counters, const ConnectionPolicy& policy,
                      const std::string& oversize, const std::string& timeout,
                      TlsContextHolder* tls, std::string* bound) -> Status {
    if (address.empty()) return Status::Ok();
    auto endpoint = ParseEndpoint(address);
    if (!endpoint.ok()) return endpoint.status();
    if (!options.replace) {
      if (Status s = CheckPortFree(*endpoint); !s.ok()) return s;
    }
    for (int i = 0; i < options.threads; ++i) {
      auto fd = Listen(&*endpoint);
      if (!fd.ok()) {
        for (auto& loop_specs : specs) {
          for (auto& s : loop_specs) close(s.fd);
        }
        return fd.status();
      }
      specs[i].push_back(
          ListenerSpec{*fd, factory, counters, oversize, timeout, protocol, policy, tls});
    }
    *bound = endpoint->ToString();
    return Status::Ok();
  };
  std::string http_oversize, http_timeout;
  http::AppendProblem(&http_oversize, 413, http::StatusReason(413), "request too large", false);
  http::AppendProblem(&http_timeout, 408, http::StatusReason(408),
                      "the request was not complete within server.http_request_timeout", false);
  if (Status s = bind_all(options.resp_address, "resp", server->resp_factory_.get(),
                          &server->resp_counters_, options.resp_policy,
                          "-ERR Protocol error: request too large\r\n",
                          "-ERR Protocol error: command not complete within "
                          "server.resp_command_timeout\r\n",
                          options.resp_tls, &server->context_.resp_address);
      !s.ok()) {
    return s;
  }
  if (Status s = bind_all(options.http_address, "http", server->http_factory_.get(),
                          &server->http_counters_, options.http_policy, http_oversize, http_timeout,
                          options.http_tls, &server->context_.http_address);
      !s.ok()) {
    return s;
  }
  if (options.max_connections_per_ip > 0) {
    server->per_ip_ = std::make_unique<ConnectionsPerIp>(options.max_connections_per_ip);
  }
  // Each loop runs its own connections to a remote store: a request and its
  // answer never cross threads (docs/design.md).
  std::vector<std::unique_ptr<LoopDriver>> drivers(options.threads);
  for (int i = 0; i < options.threads; ++i) {
    auto driver = services->rooms.backend->NewLoopDriver();
    if (!driver.ok()) {
      for (auto& loop_specs : specs) {
        for (auto& s : loop_specs) close(s.fd);
      }
      return driver.status();
    }
    drivers[i] = std::move(*driver);
  }
  if (options.replace) WarnWithoutMigration();
  if (options.before_serving) {
    if (Status s = options.before_serving(); !s.ok()) {
      for (auto& loop_specs : specs) {
        for (auto& l : loop_specs) close(l.fd);
      }
      return s;
    }
  }
  for (int i = 0; i < options.threads; ++i) {
    LoopContext* context = server->loop_contexts_[i].get();
    LoopLimits limits = options.limits;
    // A loop that drives a remote store's I/O mostly waits for the store's
    // answers, which wake it through its epoll: polling would only take CPU
    // from Redis and the clients on a small machine (docs/benchmarks.md).
    if (drivers[i] != nullptr) limits.idle_polls = 0;
    // Polling pays only with a core to spare: with a loop on every core, a
    // loop spinning for the next request takes the CPU its client (or
    // another loop) needs to produce it.
    if (options.threads >= options.cores) limits.idle_polls = 0;
    limits.per_ip = server->per_ip_.get();
    LoopHooks hooks;
    hooks.begin_round = [context] { context->BeginRound(); };
    hooks.end_round = [context] { context->EndRound(); };
    hooks.stop = [context] { context->Stop(); };
    hooks.wait_for_store = [context] { return context->WaitForStoreOnly(); };
    hooks.driver = std::move(drivers[i]);
    server->loops_.push_back(
        std::make_unique<EventLoop>(i, std::move(specs[i]), limits, &server->open_connections_,
                                    server->context_.clock(), std::move(hooks)));
  }
  // Before the loops run: their sessions read the visibility's streams.
  server->visibility_->Start(&server->context_);
  for (auto& loop : server->loops_) {
    server->threads_.emplace_back([l = loop.get()] { l->Run(); });
  }
  return server;
}

Server::~Server() {
  // No event is streamed to a connection from here on; the loops then
  // close the streams with the other idle connections.
  visibility_->Stop();
  Stop();
  Wait();
}

std::string Server::ConnectionsJson() const {
  std::string out = "{";
  const std::pair<const char*, const ListenerCounters*> fronts[] = {{"http", &http_counters_},
                                                                    {"resp", &resp_counters_}};
  for (size_t i = 0; i < 2; ++i) {
    if (i > 0) out += ',';
    out += '"';
    out += fronts[i].first;
    out += "\":{\"open\":";
    out += std::to_string(fronts[i].second->open.load(std::memory_order_relaxed));
    out += ",\"accepted\":";
    out += std::to_string(fronts[i].second->accepted.load(std::memory_order_relaxed));
    out += '}';
  }
  out += '}';
  return out;
}

void Server::Stop() {
  context_.draining.store(true, std::memory_order_relaxed);
  for (auto& loop : loops_) loop->Stop();
}

void Server::Wait() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Server::RenderConnections(std::string* out) const {
  AppendMetricFamily(out, "floodgate_connections", "gauge", "Open client connections.", "protocol",
                     {{"resp", resp_counters_.open.load(std::memory_order_relaxed)},
                      {"http", http_counters_.open.load(std::memory_order_relaxed)}});
  AppendMetricFamily(out, "floodgate_connections_total", "counter",
                     "Client connections accepted since start.", "protocol",
                     {{"resp", resp_counters_.accepted.load(std::memory_order_relaxed)},
                      {"http", http_counters_.accepted.load(std::memory_order_relaxed)}});
  const std::pair<const char*, const ListenerCounters*> fronts[] = {{"resp", &resp_counters_},
                                                                    {"http", &http_counters_}};
  AppendMetricHeader(out, "floodgate_connections_refused_total", "counter",
                     "Connections refused: at max_connections with none idle to evict, or at "
                     "max_connections_per_ip.");
  for (const auto& [protocol, counters] : fronts) {
    const std::string p = std::string("protocol=\"") + protocol + "\"";
    AppendMetricSample(out, "floodgate_connections_refused_total",
                       p + ",reason=\"max_connections\"",
                       counters->refused.load(std::memory_order_relaxed));
    AppendMetricSample(out, "floodgate_connections_refused_total",
                       p + ",reason=\"max_connections_per_ip\"",
                       counters->refused_per_ip.load(std::memory_order_relaxed));
  }
  AppendMetricHeader(out, "floodgate_connections_closed_total", "counter",
                     "Connections the server closed, by reason (timeouts, output limits, "
                     "eviction of idle connections, oversized requests, shutdown).");
  for (const auto& [protocol, counters] : fronts) {
    for (int r = 0; r < kNumCloseReasons; ++r) {
      AppendMetricSample(out, "floodgate_connections_closed_total",
                         std::string("protocol=\"") + protocol + "\",reason=\"" +
                             std::string(CloseReasonName(static_cast<CloseReason>(r))) + "\"",
                         counters->closed[r].load(std::memory_order_relaxed));
    }
  }
  AppendMetricHeader(out, "floodgate_accept_errors_total", "counter",
                     "accept() failures (out of file descriptors, kernel memory): accepting "
                     "pauses, backing off, instead of spinning.");
  for (const auto& [protocol, counters] : fronts) {
    AppendMetricSample(out, "floodgate_accept_errors_total",
                       std::string("protocol=\"") + protocol + "\"",
                       counters->accept_errors.load(std::memory_order_relaxed));
  }
  AppendMetricFamily(
      out, "floodgate_tls_handshake_failures_total", "counter",
      "TLS handshakes that failed on a listen_tls front: plaintext or garbage "
      "sent to it, a client that refused the certificate, a client certificate "
      "missing or not verified (mTLS), an unsupported version.",
      "protocol",
      {{"resp", resp_counters_.tls_handshake_failures.load(std::memory_order_relaxed)},
       {"http", http_counters_.tls_handshake_failures.load(std::memory_order_relaxed)}});
  if (options_.extra_metrics) options_.extra_metrics(out);
}

}  // namespace floodgate::server
