// rls_loadgen: a closed-loop load generator for Envoy's RateLimitService
// (ShouldRateLimit over gRPC), as Envoy drives it: a fixed number of calls
// in flight, each replaced by a new one when it completes.
//
//   rls_loadgen --port P [--host 127.0.0.1] --concurrency C [--channels K]
//               (--duration S | --requests N) [--keys K] [--domain D]
//               [--descriptor-key K] [--descriptors N]
//
// Each call carries N descriptors (default 1), each one entry
// (<descriptor-key>, key:<n>) with n uniform in [0, K) (K default 100000)
// in domain D (default "bench"). C calls are kept in flight over K channels
// (separate HTTP/2 connections, default 2), from one thread using gRPC's
// asynchronous API. Latency runs from a call's start to its completion.
//
// Bounded: at most 120 s (--duration) or --requests calls, then at most 5 s
// more for the calls in flight; the first 10 s are allowed for connecting.
//
// Output (stdout), one line:
//   achieved_rps=... completed=... errors=... over_limit=... p50_us=...
//   p90_us=... p99_us=... p999_us=... max_us=...
// Exit status 0 on success; 1 on any failed call (its status on stderr) or a
// connection that could not be made; 2 on bad usage.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace pb = ::envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "rls_loadgen: %s\n", why);
  std::fprintf(stderr,
               "usage: rls_loadgen --port P [--host 127.0.0.1] --concurrency C [--channels K]\n"
               "                   (--duration S | --requests N) [--keys K] [--domain D]\n"
               "                   [--descriptor-key K] [--descriptors N]\n");
  std::exit(2);
}

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  int concurrency = 0;
  int channels = 2;
  double duration_s = 0;
  int64_t requests = 0;
  int64_t keys = 100'000;
  std::string domain = "bench";
  std::string descriptor_key = "user";
  int descriptors = 1;
};

int64_t ParseInt(const char* s, int64_t min, int64_t max, const char* what) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
    std::string why = std::string(what) + " must be an integer in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "]";
    Usage(why.c_str());
  }
  return v;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    if (a == "--host") {
      o.host = v;
    } else if (a == "--port") {
      o.port = static_cast<int>(ParseInt(v, 1, 65535, "--port"));
    } else if (a == "--concurrency") {
      o.concurrency = static_cast<int>(ParseInt(v, 1, 10'000, "--concurrency"));
    } else if (a == "--channels") {
      o.channels = static_cast<int>(ParseInt(v, 1, 64, "--channels"));
    } else if (a == "--duration") {
      o.duration_s = static_cast<double>(ParseInt(v, 1, 120, "--duration"));
    } else if (a == "--requests") {
      o.requests = ParseInt(v, 1, 100'000'000, "--requests");
    } else if (a == "--keys") {
      o.keys = ParseInt(v, 1, 1'000'000'000, "--keys");
    } else if (a == "--domain") {
      o.domain = v;
    } else if (a == "--descriptor-key") {
      o.descriptor_key = v;
    } else if (a == "--descriptors") {
      o.descriptors = static_cast<int>(ParseInt(v, 1, 64, "--descriptors"));
    } else {
      Usage(("unknown argument " + a).c_str());
    }
  }
  if (o.port == 0 || o.concurrency == 0) Usage("--port and --concurrency are required");
  if ((o.duration_s > 0) == (o.requests > 0)) Usage("give one of --duration and --requests");
  return o;
}

// Log-linear histogram of microseconds: exact below 1024 us, then 128
// buckets per power of two (< 0.8% error), as bench/loadgen's.
class Histogram {
 public:
  Histogram() : buckets_(kLinear + kSub * 40, 0) {}
  void Record(int64_t us) {
    us = std::max<int64_t>(us, 0);
    ++buckets_[Index(us)];
    ++count_;
    max_ = std::max(max_, us);
  }
  int64_t Quantile(double q) const {
    if (count_ == 0) return 0;
    const int64_t rank = std::clamp<int64_t>(
        static_cast<int64_t>(std::ceil(q * static_cast<double>(count_))), 1, count_);
    int64_t seen = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen >= rank) return std::min(Upper(i), max_);
    }
    return max_;
  }
  int64_t max() const { return max_; }

 private:
  static constexpr int64_t kLinear = 1024;
  static constexpr int64_t kSub = 128;
  static size_t Index(int64_t us) {
    if (us < kLinear) return static_cast<size_t>(us);
    int e = 63 - __builtin_clzll(static_cast<uint64_t>(us));
    if (e > 49) return static_cast<size_t>(kLinear + kSub * 40 - 1);
    return static_cast<size_t>(kLinear + (e - 10) * kSub + ((us >> (e - 7)) & (kSub - 1)));
  }
  static int64_t Upper(size_t i) {
    const int64_t k = static_cast<int64_t>(i);
    if (k < kLinear) return k;
    const int e = static_cast<int>((k - kLinear) / kSub) + 10;
    return ((kSub + (k - kLinear) % kSub + 1) << (e - 7)) - 1;
  }
  std::vector<int64_t> buckets_;
  int64_t count_ = 0, max_ = 0;
};

// One call slot: a call in flight, then the next.
struct Slot {
  std::unique_ptr<grpc::ClientContext> context;
  pb::RateLimitRequest request;
  pb::RateLimitResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::RateLimitResponse>> reader;
  Clock::time_point started;
  int channel = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  // As `floodgate serve` does: Debian's Abseil checks every lock of gRPC's
  // against a lock-order graph (a debug check; no NDEBUG). Envoy, whose
  // calls this stands for, does not pay it, and on a machine shared with
  // the server the client's waste would come out of the server's figures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::string target = o.host + ":" + std::to_string(o.port);
  std::vector<std::unique_ptr<pb::RateLimitService::Stub>> stubs;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < o.channels; ++i) {
    grpc::ChannelArguments args;
    // Separate connections: channels with equal arguments would share one.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("floodgate.rls_loadgen.channel", i);
    channels.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    if (!channels.back()->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(10))) {
      std::fprintf(stderr, "rls_loadgen: cannot connect to %s\n", target.c_str());
      return 1;
    }
    stubs.push_back(pb::RateLimitService::NewStub(channels.back()));
  }

  grpc::CompletionQueue cq;
  std::mt19937_64 rng(static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  std::vector<Slot> slots(static_cast<size_t>(o.concurrency));
  Histogram latency;
  int64_t started = 0, completed = 0, errors = 0, over_limit = 0;
  int logged = 0;

  const auto begin = Clock::now();
  const auto end =
      o.duration_s > 0
          ? begin + std::chrono::milliseconds(static_cast<int64_t>(o.duration_s * 1000))
          : begin + std::chrono::seconds(120);
  auto more = [&](Clock::time_point now) {
    return now < end && (o.requests == 0 || started < o.requests);
  };
  auto start = [&](size_t i) {
    Slot& s = slots[i];
    s.context = std::make_unique<grpc::ClientContext>();
    s.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    s.request.Clear();
    s.request.set_domain(o.domain);
    for (int d = 0; d < o.descriptors; ++d) {
      auto* e = s.request.add_descriptors()->add_entries();
      e->set_key(o.descriptor_key + (d == 0 ? "" : std::to_string(d)));
      e->set_value("key:" + std::to_string(rng() % static_cast<uint64_t>(o.keys)));
    }
    s.response.Clear();
    s.channel = static_cast<int>(i % stubs.size());
    s.started = Clock::now();
    s.reader = stubs[s.channel]->AsyncShouldRateLimit(s.context.get(), s.request, &cq);
    s.reader->Finish(&s.response, &s.status, reinterpret_cast<void*>(i));
    ++started;
  };

  int64_t in_flight = 0;
  for (size_t i = 0; i < slots.size() && more(Clock::now()); ++i) {
    start(i);
    ++in_flight;
  }
  const auto drain_deadline = end + std::chrono::seconds(5);
  while (in_flight > 0) {
    void* tag = nullptr;
    bool ok = false;
    // gRPC takes deadlines on the system clock.
    const auto status =
        cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + (drain_deadline - Clock::now()));
    if (status != grpc::CompletionQueue::GOT_EVENT) break;
    const size_t i = reinterpret_cast<size_t>(tag);
    Slot& s = slots[i];
    const auto now = Clock::now();
    --in_flight;
    ++completed;
    latency.Record(std::chrono::duration_cast<std::chrono::microseconds>(now - s.started).count());
    if (!ok || !s.status.ok()) {
      ++errors;
      if (logged++ < 10) {
        std::fprintf(stderr, "rls_loadgen: call failed: %d %s\n", s.status.error_code(),
                     s.status.error_message().c_str());
      }
    } else if (s.response.overall_code() == pb::RateLimitResponse::OVER_LIMIT) {
      ++over_limit;
    } else if (s.response.overall_code() != pb::RateLimitResponse::OK) {
      ++errors;
    }
    if (more(now)) {
      start(i);
      ++in_flight;
    }
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::min(Clock::now(), end) - begin).count();
  const double seconds = o.duration_s > 0 ? o.duration_s : elapsed_s;
  std::printf("achieved_rps=%.1f completed=%" PRId64 " errors=%" PRId64 " over_limit=%" PRId64
              " p50_us=%" PRId64 " p90_us=%" PRId64 " p99_us=%" PRId64 " p999_us=%" PRId64
              " max_us=%" PRId64 " unanswered=%" PRId64 "\n",
              static_cast<double>(completed) / seconds, completed, errors, over_limit,
              latency.Quantile(0.5), latency.Quantile(0.9), latency.Quantile(0.99),
              latency.Quantile(0.999), latency.max(), in_flight);
  std::fflush(stdout);
  cq.Shutdown();
  if (in_flight > 0) {
    // Calls still in flight after the grace period: cancel them before the
    // queue goes away.
    for (Slot& s : slots) {
      if (s.context) s.context->TryCancel();
    }
  }
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (errors > 0 || in_flight > 0) {
    std::fprintf(stderr, "rls_loadgen: FAIL: %" PRId64 " failed calls, %" PRId64 " unanswered\n",
                 errors, in_flight);
    return 1;
  }
  return 0;
}
