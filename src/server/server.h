// Server: the RESP and HTTP fronts on N event-loop threads over one Limiter.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/config.h"
#include "protocol/http/request_parser.h"
#include "protocol/resp/parser.h"
#include "server/context/service_context.h"
#include "server/net/event_loop.h"
#include "server/net/listener.h"
#include "server/observability/metrics.h"
#include "service/services.h"

namespace floodgate::server {

struct ServerOptions {
  std::string resp_address = "127.0.0.1:6479";  // empty: no RESP front
  std::string http_address = "127.0.0.1:8080";  // empty: no HTTP front
  int threads = 1;
  // CPUs available (UsableCores()): loops poll before sleeping only when
  // they leave at least one of them free (LoopLimits::idle_polls).
  int cores = 1;
  std::string auth_token;                       // empty: no authentication
  std::string admin_token, read_token;          // server/context/admin_access.h
  std::vector<std::string> admin_client_names;  // admin.client_names (mTLS)
  bool admin_allow_plaintext = false;           // admin.allow_plaintext
  LoopLimits limits;
  // The bounds of each front's connections (timeouts, output limits).
  ConnectionPolicy resp_policy;
  ConnectionPolicy http_policy;
  // TLS per front (listen_tls): the context holder the caller keeps and
  // reloads; null: plaintext.
  TlsContextHolder* resp_tls = nullptr;
  TlsContextHolder* http_tls = nullptr;
  int64_t max_connections_per_ip = 0;  // 0: no bound
  resp::ParserLimits resp_limits;
  http::ParserLimits http_limits;
  // A remote store: script calls one loop keeps in flight before it holds
  // decisions back to send them together (see LimiterCore::NewBatch); 0: no
  // bound, every round's decisions go at once.
  int max_store_calls_in_flight = 1;
  // Appends more metrics to GET /metrics (the gRPC front's), if set.
  std::function<void(std::string*)> extra_metrics;
  // Who is being limited (docs/visibility.md).
  VisibilityConfig visibility;
  bool redact_keys = false;
  SimulateFn simulate;  // POST /v1/admin/simulate (null: 501)
  // Join ports another process holds (the floodgate this one replaces,
  // `serve --replace`): each front's sockets go into the SO_REUSEPORT group
  // already there instead of failing as a busy port.
  bool replace = false;
  // Called by Start once every socket is bound and before any loop accepts
  // (e.g. to take over the state of the process being replaced); if it
  // fails, Start closes the sockets and returns its error. Null: nothing.
  std::function<Status()> before_serving;
  // What HELLO, INFO and GET /v1/admin/stats report (serve: the build's).
  std::string version = "unknown";
};

// CPUs this process may run on (its affinity mask: a container's cpuset
// counts, the machine's other cores do not); at least 1.
int UsableCores();

// The event loops `serve` runs when server.threads is 0: half the usable
// cores, rounded up. floodgate is usually a sidecar or shares its host with
// the clients it answers (and a loop answers a million decisions a second),
// so it leaves them the other half: with a loop per core, loops waiting for
// the next request take the CPU a co-located client needs to send it
// (docs/benchmarks.md, "Default loop count").
int DefaultLoopCount(int cores);

// Logs a warning when net.ipv4.tcp_migrate_req is not 1 (TcpMigrateReq):
// a restart with --replace then resets the connections queued on the old
// process's listeners. Called by Start with ServerOptions::replace.
void WarnWithoutMigration();

// Thread-safe: Stop() may be called from any thread (e.g. a signal handler thread).
class Server {
 public:
  // Binds every socket first (so a busy port fails here, with a clear
  // error), calls options.before_serving, then starts the loops. `services`
  // must outlive the server.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                               service::Services* services);
  ~Server();  // stops and joins

  // The addresses actually bound (port 0 resolved), "" for a disabled front.
  const std::string& resp_address() const { return context_.resp_address; }
  const std::string& http_address() const { return context_.http_address; }

  // Stops accepting and drains (LoopLimits::drain_timeout_ms, EventLoop::
  // Stop); from here on /readyz answers 503 and HTTP responses close their
  // connection. Wait() returns when every loop has finished.
  void Stop();
  void Wait();

 private:
  Server(const ServerOptions& options, service::Services* services);
  void RenderConnections(std::string* out) const;
  std::string ConnectionsJson() const;

  ServerOptions options_;
  Metrics metrics_;
  ServiceContext context_;
  std::unique_ptr<Visibility> visibility_;
  std::vector<std::unique_ptr<LoopContext>> loop_contexts_;
  std::unique_ptr<SessionFactory> resp_factory_, http_factory_;
  ListenerCounters resp_counters_, http_counters_;
  std::atomic<int64_t> open_connections_{0};
  std::unique_ptr<ConnectionsPerIp> per_ip_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
};

}  // namespace floodgate::server
