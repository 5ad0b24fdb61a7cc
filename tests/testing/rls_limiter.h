// The rooms (service::Services) serving the Envoy rules of one envoyproxy/ratelimit file,
// and the RlsService on it: what the gRPC front's and the RLS calls' tests
// stand on.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "api/open_services.h"
#include "config/envoy_ratelimit.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "server/grpc/rls_service.h"
#include "service/envoy/envoy_rules.h"
#include "service/services.h"

namespace floodgate::testing {

struct RlsLimiter {
  std::unique_ptr<service::Services> services;
  std::unique_ptr<server::RlsService> service;  // null when something did not compile
};

// `config` is floodgate's (its store), `domain_yaml` the ratelimit file. A
// file or config that does not compile is a test failure, and the service
// is then null.
inline RlsLimiter MakeRlsLimiter(const Config& config, const std::string& domain_yaml,
                                 const Clock& clock) {
  RlsLimiter out;
  Result<envoy::DomainConfig> domain = envoy::ParseDomain(domain_yaml, "rl.yaml");
  EXPECT_TRUE(domain.ok()) << domain.status().message();
  if (!domain.ok()) return out;
  Result<std::shared_ptr<const envoy::Rules>> rules = envoy::Rules::Compile(config, {*domain});
  EXPECT_TRUE(rules.ok()) << rules.status().message();
  if (!rules.ok()) return out;
  auto services = api::OpenServices(envoy::WithEnvoyRules(config, **rules, nullptr), clock);
  EXPECT_TRUE(services.ok()) << services.status().message();
  if (!services.ok()) return out;
  out.services = std::move(*services);
  out.service = std::make_unique<server::RlsService>(out.services->core.get(), clock);
  out.service->SetRules(*rules);
  return out;
}

}  // namespace floodgate::testing
