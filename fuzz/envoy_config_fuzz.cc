// Fuzzes envoyproxy/ratelimit's YAML files: ParseDomain must never crash,
// hang or leak; a file it accepts must compile (or be refused with a
// position) and serve a request.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/open_services.h"
#include "config/envoy_ratelimit.h"
#include "server/grpc/rls_service.h"
#include "service/envoy/envoy_rules.h"
#include "service/services.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fe = floodgate::envoy;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto domain = fe::ParseDomain(text, "fuzz.yaml");
  if (!domain.ok()) {
    if (domain.status().message().rfind("fuzz.yaml", 0) != 0) __builtin_trap();
    return 0;
  }
  floodgate::Config config;
  config.source = "floodgate.yaml";
  config.engine.sweep_interval_ms = 0;
  config.engine.max_entries = 64;
  auto rules = fe::Rules::Compile(config, {*domain});
  if (!rules.ok()) {
    if (rules.status().message().rfind("fuzz.yaml", 0) != 0) __builtin_trap();
    return 0;
  }
  floodgate::ManualClock clock(1'700'000'000'000);
  auto services = floodgate::api::OpenServices(fe::WithEnvoyRules(config, **rules, nullptr), clock);
  if (!services.ok()) __builtin_trap();  // compiled rules must be valid rules
  floodgate::server::RlsService service((*services)->core.get(), clock);
  service.SetRules(*rules);
  floodgate::server::RlsCall call(nullptr);
  // One request per top-level descriptor, with its own key and value.
  for (const fe::DescriptorConfig& d : domain->descriptors) {
    floodgate::rls::Request request;
    request.domain = domain->domain;
    request.descriptors.push_back(
        {{{d.key, d.value.empty() ? std::string_view("v") : d.value}}, std::nullopt});
    // The embedded store answers inline.
    if (!call.Start(service, request, nullptr)) __builtin_trap();
    if (call.response().statuses.size() > 1) __builtin_trap();
  }
  return 0;
}
