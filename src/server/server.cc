// Server: see server.h.
#include "server/server.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "protocol/http/response.h"
#include "server/http_session.h"
#include "server/resp_session.h"

namespace floodgate::server {

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int DefaultLoopCount(int cores) { return std::max(1, (cores + 1) / 2); }

Server::Server(const ServerOptions& options, service::LimiterCore* limiter)
    : options_(options), metrics_(options.threads) {
  context_.limiter = limiter;
  context_.metrics = &metrics_;
  context_.auth_token = options.auth_token;
  context_.started_at_ms = SystemClock().NowMs();
  context_.threads = options.threads;
  context_.render_connections = [this](std::string* out) { RenderConnections(out); };
  context_.max_store_calls_in_flight = options.max_store_calls_in_flight;
}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                              service::LimiterCore* limiter) {
  if (options.threads < 1 || options.threads > 256) {
    return InvalidArgumentError("threads must be between 1 and 256");
  }
  if (options.resp_address.empty() && options.http_address.empty()) {
    return InvalidArgumentError("no front to serve: both RESP and HTTP are disabled");
  }
  std::unique_ptr<Server> server(new Server(options, limiter));
  std::vector<LoopContext*> contexts;
  for (int i = 0; i < options.threads; ++i) {
    server->loop_contexts_.push_back(std::make_unique<LoopContext>(&server->context_, i));
    contexts.push_back(server->loop_contexts_.back().get());
  }
  server->resp_factory_ = std::make_unique<RespSessionFactory>(contexts, options.resp_limits);
  server->http_factory_ = std::make_unique<HttpSessionFactory>(contexts, options.http_limits);

  // One socket per loop per front, all on the same port (SO_REUSEPORT). A
  // port 0 is resolved by the first bind and reused by the others.
  std::vector<std::vector<ListenerSpec>> specs(options.threads);
  auto bind_all = [&](const std::string& address, const char* protocol, SessionFactory* factory,
                      ListenerCounters* counters, const ConnectionPolicy& policy,
                      const std::string& oversize, const std::string& timeout,
                      std::string* bound) -> Status {
    if (address.empty()) return Status::Ok();
    auto endpoint = ParseEndpoint(address);
    if (!endpoint.ok()) return endpoint.status();
    if (Status s = CheckPortFree(*endpoint); !s.ok()) return s;
    for (int i = 0; i < options.threads; ++i) {
      auto fd = Listen(&*endpoint);
      if (!fd.ok()) {
        for (auto& loop_specs : specs) {
          for (auto& s : loop_specs) close(s.fd);
        }
        return fd.status();
      }
      specs[i].push_back(ListenerSpec{*fd, factory, counters, oversize, timeout, protocol, policy});
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
                          &server->context_.resp_address);
      !s.ok()) {
    return s;
  }
  if (Status s = bind_all(options.http_address, "http", server->http_factory_.get(),
                          &server->http_counters_, options.http_policy, http_oversize, http_timeout,
                          &server->context_.http_address);
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
    auto driver = limiter->NewLoopDriver();
    if (!driver.ok()) {
      for (auto& loop_specs : specs) {
        for (auto& s : loop_specs) close(s.fd);
      }
      return driver.status();
    }
    drivers[i] = std::move(*driver);
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
    hooks.end_round = [context] { context->EndRound(); };
    hooks.stop = [context] { context->Stop(); };
    hooks.wait_for_store = [context] { return context->WaitForStoreOnly(); };
    hooks.driver = std::move(drivers[i]);
    server->loops_.push_back(std::make_unique<EventLoop>(
        i, std::move(specs[i]), limits, &server->open_connections_, std::move(hooks)));
  }
  for (auto& loop : server->loops_) {
    server->threads_.emplace_back([l = loop.get()] { l->Run(); });
  }
  return server;
}

Server::~Server() {
  Stop();
  Wait();
}

void Server::Stop() {
  for (auto& loop : loops_) loop->Stop();
}

void Server::Wait() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Server::RenderConnections(std::string* out) const {
  AppendMetricHeader(out, "floodgate_connections", "gauge", "Open client connections.");
  AppendMetricSample(out, "floodgate_connections", "protocol=\"resp\"",
                     resp_counters_.open.load(std::memory_order_relaxed));
  AppendMetricSample(out, "floodgate_connections", "protocol=\"http\"",
                     http_counters_.open.load(std::memory_order_relaxed));
  AppendMetricHeader(out, "floodgate_connections_total", "counter",
                     "Client connections accepted since start.");
  AppendMetricSample(out, "floodgate_connections_total", "protocol=\"resp\"",
                     resp_counters_.accepted.load(std::memory_order_relaxed));
  AppendMetricSample(out, "floodgate_connections_total", "protocol=\"http\"",
                     http_counters_.accepted.load(std::memory_order_relaxed));
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
  if (options_.extra_metrics) options_.extra_metrics(out);
}

}  // namespace floodgate::server
