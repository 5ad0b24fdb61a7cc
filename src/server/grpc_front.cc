// GrpcFront: see grpc_front.h.
#include "server/grpc_front.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/metrics.h"

namespace floodgate::server {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

// Distinct (domain, descriptor) series kept in /metrics; detailed_metric
// can name one per value, so past this they are counted as dropped.
constexpr size_t kMaxDescriptorSeries = 10'000;

grpc::StatusCode ToGrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kInternal:
      break;
  }
  return grpc::StatusCode::INTERNAL;
}

const char* GrpcCodeName(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

void Bump(std::atomic<int64_t>& a) { a.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

class GrpcFront::Handler final : public pb::RateLimitService::CallbackService {
 public:
  Handler(GrpcFront* front, envoy::RateLimitService* service, const rls::RequestLimits& limits)
      : front_(front), service_(service), limits_(limits) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const pb::RateLimitRequest* request,
                                            pb::RateLimitResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    envoy::Request decoded;
    if (Status s = rls::ToRequest(*request, limits_, &decoded); !s.ok()) {
      front_->CountRequest(grpc::StatusCode::INVALID_ARGUMENT, 0);
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message()));
      return reactor;
    }
    // The request and response messages live until Finish; the decision may
    // complete on another thread, which then answers.
    service_->ShouldRateLimit(
        decoded, [this, reactor, response](const Status& s, envoy::Response&& r) {
          if (!s.ok()) {
            const grpc::StatusCode code = ToGrpcCode(s.code());
            front_->CountRequest(code, 0);
            reactor->Finish(grpc::Status(code, s.message()));
            return;
          }
          rls::ToProto(r, response);
          front_->CountRequest(grpc::StatusCode::OK, static_cast<int>(r.overall_code));
          reactor->Finish(grpc::Status::OK);
        });
    return reactor;
  }

 private:
  GrpcFront* const front_;
  envoy::RateLimitService* const service_;
  const rls::RequestLimits limits_;
};

Result<std::unique_ptr<GrpcFront>> GrpcFront::Start(const GrpcFrontOptions& options,
                                                    envoy::RateLimitService* service) {
  const size_t colon = options.address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("gRPC address '" + options.address + "' is not host:port");
  }
  std::unique_ptr<GrpcFront> front(new GrpcFront());
  front->service_ = service;
  front->handler_ = std::make_unique<Handler>(front.get(), service, options.request_limits);
  service->set_observer([f = front.get()](const envoy::RateLimitService::DescriptorOutcome& o) {
    f->CountDescriptor(o);
  });
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  // gRPC sets SO_REUSEPORT by default: a second server would then share the
  // port silently instead of failing to start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // Dead peers must not hold connections forever: a client that vanished
  // (a crashed Envoy, a dropped network path) does not answer pings.
  if (options.keepalive_time_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(options.keepalive_time_ms));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               static_cast<int>(options.keepalive_timeout_ms));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  }
  front->drain_timeout_ms_ = options.drain_timeout_ms;
  builder.RegisterService(front->handler_.get());
  front->server_ = builder.BuildAndStart();
  if (front->server_ == nullptr || port == 0) {
    service->set_observer(nullptr);
    return UnavailableError("cannot listen for gRPC on " + options.address +
                            " (address in use or not local?)");
  }
  front->address_ = options.address.substr(0, colon) + ":" + std::to_string(port);
  return front;
}

GrpcFront::~GrpcFront() { Stop(); }

void GrpcFront::Stop() {
  std::call_once(stopped_, [this] {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(drain_timeout_ms_));
    server_->Wait();
    service_->set_observer(nullptr);
  });
}

void GrpcFront::CountRequest(int grpc_code, int overall_code) {
  if (grpc_code >= 0 && grpc_code <= 16) Bump(requests_by_code_[grpc_code]);
  if (grpc_code == 0 && overall_code >= 0 && overall_code <= 2) Bump(ok_by_overall_[overall_code]);
}

void GrpcFront::CountDescriptor(const envoy::RateLimitService::DescriptorOutcome& o) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(std::string(o.domain), std::string(o.metric_name));
  auto it = descriptors_.find(key);
  if (it == descriptors_.end()) {
    if (descriptors_.size() >= kMaxDescriptorSeries) {
      ++descriptor_series_dropped_;
      return;
    }
    it = descriptors_.emplace(std::move(key), Outcomes{}).first;
  }
  if (o.code == envoy::Code::kOverLimit) {
    ++it->second.over_limit;
  } else if (o.shadow_over) {
    ++it->second.shadow_over_limit;
  } else {
    ++it->second.ok;
  }
}

void GrpcFront::RenderMetrics(std::string* out) const {
  AppendMetricHeader(out, "floodgate_grpc_requests_total", "counter",
                     "ShouldRateLimit calls by gRPC status code and, for OK, overall_code.");
  static constexpr const char* kOverall[] = {"UNKNOWN", "OK", "OVER_LIMIT"};
  for (int overall = 1; overall <= 2; ++overall) {
    AppendMetricSample(out, "floodgate_grpc_requests_total",
                       "code=\"OK\",overall_code=\"" + std::string(kOverall[overall]) + "\"",
                       ok_by_overall_[overall].load(std::memory_order_relaxed));
  }
  for (int code = 1; code <= 16; ++code) {
    const int64_t n = requests_by_code_[code].load(std::memory_order_relaxed);
    // The common error codes always show, the others once they occur.
    if (n == 0 && code != 3 && code != 8 && code != 13 && code != 14) continue;
    AppendMetricSample(out, "floodgate_grpc_requests_total",
                       "code=\"" + std::string(GrpcCodeName(code)) + "\",overall_code=\"\"", n);
  }
  AppendMetricHeader(out, "floodgate_envoy_descriptor_decisions_total", "counter",
                     "Envoy descriptors that matched a limit, by domain, descriptor (as "
                     "envoyproxy/ratelimit names its stats) and outcome.");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, o] : descriptors_) {
    const std::string labels =
        "domain=\"" + EscapeLabel(key.first) + "\",descriptor=\"" + EscapeLabel(key.second) + "\"";
    constexpr std::string_view kName = "floodgate_envoy_descriptor_decisions_total";
    AppendMetricSample(out, kName, labels + ",outcome=\"ok\"", o.ok);
    AppendMetricSample(out, kName, labels + ",outcome=\"over_limit\"", o.over_limit);
    AppendMetricSample(out, kName, labels + ",outcome=\"shadow_over_limit\"", o.shadow_over_limit);
  }
  AppendMetricHeader(out, "floodgate_envoy_descriptor_series_dropped_total", "counter",
                     "Descriptor outcomes not shown above: more than 10000 series.");
  AppendMetricSample(out, "floodgate_envoy_descriptor_series_dropped_total", "",
                     descriptor_series_dropped_);
}

}  // namespace floodgate::server
