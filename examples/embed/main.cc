// Embedding floodgate: a login throttle in a C++ program, no server needed.
// Exits non-zero if the limiter does not behave as documented, so the build
// can run it as a test.
#include <cstdio>

#include "floodgate/config.h"
#include "floodgate/limiter.h"

int main() {
  auto config = floodgate::ParseConfig(R"(
rules:
  login:
    algorithm: sliding_log
    limits: [3/minute, 10/hour]
)",
                                       "inline");
  if (!config.ok()) {
    std::fprintf(stderr, "config: %s\n", config.status().ToString().c_str());
    return 1;
  }
  floodgate::ManualClock clock(1'700'000'000'000);  // a SystemClock in production
  auto limiter = floodgate::Limiter::Create(*config, clock);
  if (!limiter.ok()) {
    std::fprintf(stderr, "limiter: %s\n", limiter.status().ToString().c_str());
    return 1;
  }

  int admitted = 0;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    auto d = (*limiter)->Check("login", "alice@example.com");
    if (!d.ok()) {
      std::fprintf(stderr, "check: %s\n", d.status().ToString().c_str());
      return 1;
    }
    std::printf("attempt %d: %s, remaining %lld, retry after %lld ms\n", attempt,
                d->allowed ? "allowed" : "denied", static_cast<long long>(d->remaining),
                static_cast<long long>(d->retry_after_ms));
    admitted += d->allowed ? 1 : 0;
    clock.AdvanceMs(1'000);
  }
  clock.AdvanceMs(60'000);
  auto later = (*limiter)->Check("login", "alice@example.com");
  const bool ok = admitted == 3 && later.ok() && later->allowed;
  std::printf("a minute later: %s\n", later.ok() && later->allowed ? "allowed" : "denied");
  return ok ? 0 : 1;
}
