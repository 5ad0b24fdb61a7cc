// Fuzzes the gRPC request path below the transport: bytes parsed as a
// RateLimitRequest, checked against the request bounds, decided on the
// embedded store against a fixed configuration, and the answer encoded.
// Nothing may crash, and every answer has one status per descriptor.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "api/open_services.h"
#include "config/envoy_ratelimit.h"
#include "protocol/grpc/rls_codec.h"
#include "server/grpc/rls_service.h"
#include "service/envoy/envoy_rules.h"
#include "service/services.h"

namespace {

namespace fe = floodgate::envoy;

constexpr char kConfig[] = R"(domain: d
descriptors:
  - key: a
    rate_limit: { unit: second, requests_per_unit: 3 }
    descriptors:
      - key: b
        value: x*
        rate_limit: { unit: minute, requests_per_unit: 2, name: bx }
      - key: b
        rate_limit: { unit: minute, requests_per_unit: 0 }
  - key: c
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1, replaces: [{name: bx}] }
  - key: u
    rate_limit: { unlimited: true }
)";

struct World {
  World() : clock(1'700'000'000'000) {
    config.source = "floodgate.yaml";
    config.engine.sweep_interval_ms = 0;
    config.engine.max_entries = 1024;
    auto domain = fe::ParseDomain(kConfig, "rl.yaml");
    if (!domain.ok()) __builtin_trap();
    auto compiled = fe::Rules::Compile(config, {*domain});
    if (!compiled.ok()) __builtin_trap();
    rules = *compiled;
    auto l = floodgate::api::OpenServices(fe::WithEnvoyRules(config, *rules, nullptr), clock);
    if (!l.ok()) __builtin_trap();
    services = std::move(*l);
    service = std::make_unique<floodgate::server::RlsService>(services->core.get(), clock);
    service->SetRules(rules);
  }
  floodgate::ManualClock clock;
  floodgate::Config config;
  std::shared_ptr<const fe::Rules> rules;
  std::unique_ptr<floodgate::service::Services> services;
  std::unique_ptr<floodgate::server::RlsService> service;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  floodgate::rls::pb::RateLimitRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  floodgate::rls::Request decoded;
  if (!floodgate::rls::ToRequest(request, floodgate::rls::RequestLimits{}, &decoded).ok()) return 0;
  // A world per input: the store's entries are reached through tagged
  // pointers that leak checking cannot follow, so none may outlive an input.
  auto world = std::make_unique<World>();
  floodgate::server::RlsCall call(nullptr);
  // The embedded store answers inline.
  if (!call.Start(*world->service, decoded, nullptr)) __builtin_trap();
  if (call.status().ok()) {
    if (call.response().statuses.size() != decoded.descriptors.size()) __builtin_trap();
    floodgate::rls::pb::RateLimitResponse out;
    floodgate::rls::ToProto(call.response(), &out);
    (void)out.SerializeAsString();
  }
  return 0;
}
