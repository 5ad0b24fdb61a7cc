// GrpcFront: Envoy's RateLimitService (ShouldRateLimit) over gRPC, served
// by gRPC's own threads with its callback API. A request is decoded
// (protocol/grpc), decided by envoy::RateLimitService (which calls the
// Limiter), and answered from whichever thread the decision completes on:
// the handler's own for the embedded store, the store's I/O thread for Redis.
// No thread waits for a store.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "floodgate/status.h"
#include "protocol/grpc/rls_codec.h"
#include "service/envoy_rls.h"

namespace grpc {
class Server;
}

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
};

// Thread-safe.
class GrpcFront {
 public:
  // Binds (a busy port fails here, clearly) and starts serving. `service`
  // must outlive the front.
  static Result<std::unique_ptr<GrpcFront>> Start(const GrpcFrontOptions& options,
                                                  envoy::RateLimitService* service);
  ~GrpcFront();  // Stop()

  // The address actually bound (port 0 resolved).
  const std::string& address() const { return address_; }

  // Stops accepting, waits up to drain_timeout_ms for requests in flight
  // (a store answers within its timeout), then cancels the rest. Idempotent.
  void Stop();

  // Appends this front's metrics in the Prometheus text format.
  void RenderMetrics(std::string* out) const;

  class Handler;  // the generated service's implementation

  // Counters, updated by the handler.
  void CountRequest(int grpc_code, int overall_code);
  void CountDescriptor(const envoy::RateLimitService::DescriptorOutcome& outcome);

 private:
  GrpcFront() = default;

  envoy::RateLimitService* service_ = nullptr;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int64_t drain_timeout_ms_ = 2'000;
  std::once_flag stopped_;

  // Requests by gRPC status code (0..16) and, for OK, by overall code.
  std::array<std::atomic<int64_t>, 17> requests_by_code_{};
  std::array<std::atomic<int64_t>, 3> ok_by_overall_{};
  // Descriptor outcomes by (domain, descriptor): ok, over_limit, shadow_over_limit.
  struct Outcomes {
    int64_t ok = 0, over_limit = 0, shadow_over_limit = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Outcomes> descriptors_;  // guarded by mu_
  int64_t descriptor_series_dropped_ = 0;                                // guarded by mu_
};

}  // namespace floodgate::server
