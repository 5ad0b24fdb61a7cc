// GrpcFront: Envoy's RateLimitService (ShouldRateLimit) over gRPC, on
// threads of its own: one completion queue per thread (gRPC's asynchronous
// API), as many threads as the server runs event loops. A thread takes a
// call from its queue, decodes it (protocol/grpc), decides it (an RlsCall,
// through LimiterCore::CheckAsync into the thread's store::Batch, as the
// event loops decide) and answers it, with no hand-off to another thread
// when the answer is known at once (the embedded store). Decisions for a
// remote store are gathered over a round of the queue's events and flushed
// together, several calls' decisions of one rule in one script call; their
// answers arrive on the store's I/O thread, which hands the call back to its
// thread (a gRPC alarm on its queue) to be answered there. No thread waits
// for a store.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/status.h"
#include "protocol/grpc/rls_codec.h"
#include "server/grpc/rls_metrics.h"
#include "server/grpc/rls_service.h"
#include "server/net/tls_context.h"

namespace grpc {
class Server;
class ServerCredentials;
class Service;
}  // namespace grpc

namespace floodgate::server {

struct GrpcFrontOptions {
  std::string address = "127.0.0.1:8081";  // port 0: any free port
  rls::RequestLimits request_limits;
  int max_message_bytes = 1 << 20;
  // HTTP/2 keep-alive: a ping after this long without traffic (also on a
  // connection with no call), the peer dropped if it does not answer within
  // keepalive_timeout_ms. 0: no pings.
  int64_t keepalive_time_ms = 60'000;
  int64_t keepalive_timeout_ms = 20'000;
  // Stop() waits this long for calls in flight, then cancels them.
  int64_t drain_timeout_ms = 2'000;
  // Threads answering calls, each with its own completion queue (`serve`
  // gives the event loops' count).
  int threads = 1;
  // A remote store: script calls one thread keeps in flight before it holds
  // decisions back to send them together (see LimiterCore::NewBatch); 0: no
  // bound. As ServerOptions::max_store_calls_in_flight.
  int max_store_calls_in_flight = 1;
  // Join a port another floodgate holds (`serve --replace`), as
  // ServerOptions::replace.
  bool replace = false;
  // TLS (listen_tls.grpc): the listeners' certificate, reloaded with
  // theirs (grpc_tls_credentials.h); must outlive the front. Null: plaintext.
  const TlsContextHolder* tls = nullptr;
};

// Thread-safe.
class GrpcFront {
 public:
  // Binds (a busy port fails here, clearly) and starts serving. `service`
  // must outlive the front.
  static Result<std::unique_ptr<GrpcFront>> Start(const GrpcFrontOptions& options,
                                                  RlsService* service);
  ~GrpcFront();  // Stop()

  // The address actually bound (port 0 resolved).
  const std::string& address() const { return address_; }

  // Stops accepting, waits up to drain_timeout_ms for requests in flight
  // (a store answers within its timeout), then cancels the rest, and joins
  // the threads. Idempotent.
  void Stop();

  // Appends this front's metrics in the Prometheus text format.
  void RenderMetrics(std::string* out) const { metrics_->Render(out); }

 private:
  class Worker;
  GrpcFront() = default;

  RlsService* service_ = nullptr;
  std::unique_ptr<grpc::Service> async_service_;          // the generated AsyncService
  std::shared_ptr<grpc::ServerCredentials> credentials_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RlsMetrics> metrics_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::string address_;
  int64_t drain_timeout_ms_ = 2'000;
  std::once_flag stopped_;
};

}  // namespace floodgate::server
