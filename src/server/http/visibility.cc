// Visibility: see visibility.h. Everything a route or the streams read is
// made from what the loops keep (RuleSeries, without locks; the sketch, fed
// from their queues by the recorder) and from what this thread last
// fetched (the other servers' sketches, the store's nodes), so neither
// ever waits for the store on a loop.
#include "server/http/visibility.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "common/log.h"
#include "nlohmann/json.hpp"
#include "protocol/http/response.h"
#include "server/context/service_context.h"
#include "server/http/http_alert_routes.h"
#include "server/observability/redact_key.h"

namespace floodgate::server {
namespace {

constexpr std::string_view kBlobMagic = "FGTOP1";
constexpr service::TopBy kBys[] = {service::TopBy::kDenied, service::TopBy::kAdmitted};
constexpr service::TopWindow kWindows[] = {service::TopWindow::k1m, service::TopWindow::k15m,
                                           service::TopWindow::k1h};
// Alert ids remembered as streamed (more than the recent list holds).
constexpr size_t kMaxStreamedAlerts = 1024;

void AppendU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) *out += static_cast<char>((v >> (8 * i)) & 0xff);
}

bool ReadU32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i)
    *v |= static_cast<uint32_t>(static_cast<uint8_t>((*in)[i])) << (8 * i);
  in->remove_prefix(4);
  return true;
}

void AppendInt(std::string* out, int64_t v) { *out += std::to_string(v); }

// A series a rule's entry shows: its JSON name, its slot, and the counter
// of its total (null: none shown).
struct ShownSeries {
  const char* name;
  SeriesOutcome outcome;
  std::atomic<int64_t> RuleCounters::*total;
};
// A rate rule's decisions, and a concurrency rule's acquisitions.
constexpr ShownSeries kDecisionSeries[] = {
    {"admitted", SeriesOutcome::kAdmitted, &RuleCounters::allowed},
    {"denied", SeriesOutcome::kDenied, &RuleCounters::denied},
    {"shadow_denied", SeriesOutcome::kShadowDenied, nullptr},
};
constexpr ShownSeries kLeaseSeries[] = {
    {"acquired", SeriesOutcome::kAcquired, &RuleCounters::acquired},
    {"refused", SeriesOutcome::kRefused, &RuleCounters::refused},
};

std::span<const ShownSeries> SeriesOf(bool leases) {
  if (leases) return kLeaseSeries;
  return kDecisionSeries;
}

// One rule's count of `outcome` in unix second `s`, over its loops'
// counters (`per_loop` null: the rule has none yet).
int64_t CountAt(const RuleCounters* per_loop, int loops, int64_t s, SeriesOutcome outcome) {
  int64_t n = 0;
  for (int l = 0; l < loops && per_loop != nullptr; ++l) n += per_loop[l].series.At(s, outcome);
  return n;
}

int64_t Total(const RuleCounters* per_loop, int loops, std::atomic<int64_t> RuleCounters::*total) {
  int64_t n = 0;
  for (int l = 0; l < loops && per_loop != nullptr; ++l) {
    n += (per_loop[l].*total).load(std::memory_order_relaxed);
  }
  return n;
}

}  // namespace

Visibility::Visibility(const VisibilityConfig& config, bool redact_keys,
                       service::Services* services, int loops)
    : config_(config),
      redact_keys_(redact_keys),
      services_(services),
      store_kind_(services->core->GetStats().store_kind),
      denied_log_(config.denied_log_interval_ms, redact_keys) {
  if (config.top_subjects) {
    service::TopSubjectsOptions options;
    options.capacity = static_cast<size_t>(config.top_capacity);
    // One thread records (the recorder's drain), so one shard.
    options.shards = 1;
    top_ = std::make_unique<service::TopSubjects>(options);
    recorder_ = std::make_unique<TopRecorder>(top_.get(), loops);
  }
  if (top_ != nullptr)
    board_ = services_->rooms.sketch_board ? services_->rooms.sketch_board() : nullptr;
  // A name unique among the servers sharing the store, for this run.
  std::random_device random;
  char name[17];
  std::snprintf(name, sizeof(name), "%08x%08x", random(), random());
  server_name_ = name;
}

Visibility::~Visibility() { Stop(); }

void Visibility::Start(const ServiceContext* service) {
  service_ = service;
  streams_ = std::make_unique<EventStreams>(
      [this](int64_t tick, bool streaming) { return Tick(tick, streaming); }, services_->clock);
}

void Visibility::Stop() {
  if (streams_ != nullptr) streams_->Stop();
  if (recorder_ != nullptr) recorder_->Stop();
  std::thread sim;
  {
    std::lock_guard<std::mutex> lock(sim_mu_);
    stopped_ = true;
    sim = std::move(sim_thread_);
  }
  // A simulation still running answers its connection's loop, which is
  // still there: the server stops this first.
  if (sim.joinable()) sim.join();
}

bool Visibility::RunSimulation(std::function<std::function<void()>()> job) {
  std::lock_guard<std::mutex> lock(sim_mu_);
  if (stopped_ || sim_running_) return false;
  if (sim_thread_.joinable()) sim_thread_.join();  // done: it cleared sim_running_
  sim_running_ = true;
  sim_thread_ = std::thread([this, job = std::move(job)] {
    std::function<void()> answer = job();
    {
      std::lock_guard<std::mutex> done(sim_mu_);
      sim_running_ = false;
    }
    answer();
  });
  return true;
}

std::string Visibility::Tick(int64_t tick, bool streaming) {
  const int64_t now_ms = services_->clock.NowMs();
  const int64_t every = std::max<int64_t>(1, config_.publish_interval_ms / 1000);
  // Someone is looking: a stream is open, or a route asked within a minute.
  auto asked = [&](const std::atomic<int64_t>& at) {
    return streaming || now_ms - at.load(std::memory_order_relaxed) < kAskedForMs;
  };
  // Every interval, the first a whole interval after the start (a server
  // just started has nothing to share yet).
  const bool exchange = (tick + 1) % every == 0;
  if (board_ != nullptr && exchange) Exchange(now_ms);
  // A remote store's nodes, for the store health the dashboard shows: each
  // second while someone looks, else with each exchange (one PING a node).
  if (asked(stats_asked_ms_) || exchange) {
    std::vector<store::NodeHealth> nodes = services_->rooms.backend->ProbeNodes();
    std::lock_guard<std::mutex> lock(mu_);
    nodes_ = std::move(nodes);
  }
  if (!streaming) return "";
  std::string out = "event: stats\ndata: {\"now_ms\":";
  AppendInt(&out, now_ms);
  out += ",\"rules\":";
  AppendRuleSeconds(now_ms / 1000 - 1, &out);
  out += ",\"store\":";
  AppendStoreJson(&out);
  out += ",\"connections\":";
  out += service_->connections_json ? service_->connections_json() : "{}";
  out += "}\n\n";
  out += NewAlertEvents();
  return out;
}

void Visibility::Exchange(int64_t now_ms) {
  if (board_ == nullptr) return;
  const int64_t ttl_ms = 3 * config_.publish_interval_ms;
  // Published when this server decided anything since its last copy, or to
  // keep that copy from expiring while its windows may still hold counts
  // (an hour): an idle server that never decided leaves Redis alone.
  recorder_->Drain();
  const int64_t records = recorder_->recorded();
  const bool changed = records != published_records_;
  if (changed) changed_at_ms_ = now_ms;
  const bool refresh = records > 0 && now_ms - published_at_ms_ >= ttl_ms / 2 &&
                       now_ms - changed_at_ms_ < 3'600'000 + ttl_ms;
  Status published = Status::Ok();
  if (changed || refresh) {
    published = board_->Publish(server_name_, Serialize(now_ms), ttl_ms);
    if (published.ok()) {
      published_at_ms_ = now_ms;
      published_records_ = records;
    }
  }
  auto read = board_->Read();
  std::vector<Sketch> remote;
  size_t servers = 0;
  std::string error = published.ok() ? "" : published.message();
  if (!read.ok()) {
    error = read.status().message();
  } else {
    for (const auto& [server, blob] : *read) {
      if (server == server_name_) continue;
      auto sketches = Parse(blob);
      if (!sketches.ok()) {
        Log(LogLevel::kWarn, "top-subjects sketch not read",
            {{"server", server}, {"error", sketches.status().message()}});
        continue;
      }
      ++servers;
      for (Sketch& s : *sketches) remote.push_back(std::move(s));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  // A failed read keeps the last sketches (they expire with their age in
  // the board, not here): a blip does not empty the dashboard.
  if (read.ok()) {
    remote_ = std::move(remote);
    remote_servers_ = servers;
  }
  store_error_ = std::move(error);
}

std::string Visibility::Serialize(int64_t now_ms) const {
  std::string out(kBlobMagic);
  if (top_ == nullptr) return out;
  recorder_->Drain();
  for (const std::string& rule : top_->Rules()) {
    for (const service::TopBy by : kBys) {
      for (const service::TopWindow window : kWindows) {
        const std::string sketch =
            top_->Snapshot(rule, by, window, now_ms).Compacted(kPublishedEntries).Serialize();
        AppendU32(&out, static_cast<uint32_t>(rule.size()));
        out += rule;
        out += static_cast<char>(by);
        out += static_cast<char>(window);
        AppendU32(&out, static_cast<uint32_t>(sketch.size()));
        out += sketch;
      }
    }
  }
  return out;
}

Result<std::vector<Visibility::Sketch>> Visibility::Parse(std::string_view blob) {
  if (!blob.starts_with(kBlobMagic)) {
    return InvalidArgumentError("not a floodgate top-subjects blob (or another version)");
  }
  blob.remove_prefix(kBlobMagic.size());
  std::vector<Sketch> out;
  while (!blob.empty()) {
    uint32_t rule_size = 0, sketch_size = 0;
    if (!ReadU32(&blob, &rule_size) || rule_size > kMaxKeyBytes || blob.size() < rule_size + 2u) {
      return InvalidArgumentError("truncated top-subjects blob (rule name)");
    }
    Sketch s;
    s.rule.assign(blob.substr(0, rule_size));
    blob.remove_prefix(rule_size);
    const int by = static_cast<uint8_t>(blob[0]);
    const int window = static_cast<uint8_t>(blob[1]);
    blob.remove_prefix(2);
    if (by > static_cast<int>(service::TopBy::kAdmitted) ||
        window > static_cast<int>(service::TopWindow::k1h)) {
      return InvalidArgumentError("top-subjects blob names an unknown ranking or window");
    }
    s.by = static_cast<service::TopBy>(by);
    s.window = static_cast<service::TopWindow>(window);
    if (!ReadU32(&blob, &sketch_size) || blob.size() < sketch_size) {
      return InvalidArgumentError("truncated top-subjects blob (sketch)");
    }
    auto sketch = service::SpaceSaving::Parse(blob.substr(0, sketch_size));
    if (!sketch.ok()) return sketch.status();
    blob.remove_prefix(sketch_size);
    s.sketch = *std::move(sketch);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<service::TopEntry> Visibility::Top(std::string_view rule, service::TopBy by,
                                               service::TopWindow window, size_t limit,
                                               int64_t now_ms) const {
  if (top_ == nullptr) return {};
  recorder_->Drain();  // every decision made before the question
  service::SpaceSaving merged = top_->Snapshot(rule, by, window, now_ms);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Sketch& s : remote_) {
      if (s.rule == rule && s.by == by && s.window == window) merged.Merge(s.sketch);
    }
  }
  return merged.Top(limit);
}

size_t Visibility::Servers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return 1 + remote_servers_;
}

void Visibility::ForEachShownRule(const Config& config,
                                  const std::function<void(const ShownRule&)>& fn) const {
  absl::flat_hash_map<std::string, int64_t> in_flight;
  for (const auto& [rule, stats] : services_->leases->Stats()) in_flight[rule] = stats.held;
  auto configured = [&](std::string_view rule) -> const Rule* {
    for (const Rule& r : config.rules) {
      if (r.name == rule) return &r;
    }
    return nullptr;
  };
  auto show = [&](std::string_view rule, const Rule* r, const RuleCounters* per_loop, int loops) {
    // A rule no longer configured is shown as what it counted.
    bool leases = r != nullptr && r->is_concurrency();
    if (r == nullptr) {
      leases = Total(per_loop, loops, &RuleCounters::acquired) +
                   Total(per_loop, loops, &RuleCounters::refused) >
               0;
    }
    const auto held = in_flight.find(absl::string_view(rule.data(), rule.size()));
    fn(ShownRule{rule, per_loop, loops, leases, held == in_flight.end() ? 0 : held->second});
  };
  // What was counted (configured rules, CL.THROTTLE, rules since removed),
  // then every configured rule without traffic yet (no counters).
  std::vector<std::string> counted;
  service_->metrics->ForEachRule(
      [&](const std::string& rule, const RuleCounters* per_loop, int loops) {
        counted.push_back(rule);
        show(rule, configured(rule), per_loop, loops);
      });
  for (const Rule& r : config.rules) {
    if (std::find(counted.begin(), counted.end(), r.name) == counted.end()) {
      show(r.name, &r, nullptr, 0);
    }
  }
}

void Visibility::AppendRuleEntry(const ShownRule& rule, bool with_totals,
                                 const std::function<void(SeriesOutcome, std::string*)>& value,
                                 std::string* out) {
  *out += "{\"rule\":\"";
  http::AppendJsonEscaped(out, rule.name);
  *out += '"';
  const std::span<const ShownSeries> shown = SeriesOf(rule.leases);
  for (const ShownSeries& series : shown) {
    *out += ",\"";
    *out += series.name;
    *out += "\":";
    value(series.outcome, out);
  }
  for (const ShownSeries& series : shown) {
    if (!with_totals || series.total == nullptr) continue;
    *out += ",\"";
    *out += series.name;
    *out += "_total\":";
    AppendInt(out, Total(rule.per_loop, rule.loops, series.total));
  }
  if (rule.leases) {
    *out += ",\"in_flight\":";
    AppendInt(out, rule.in_flight);
  }
  *out += '}';
}

void Visibility::AppendRuleSeconds(int64_t now_s, std::string* out) const {
  *out += '[';
  bool first = true;
  ForEachShownRule(services_->rules->config(), [&](const ShownRule& rule) {
    if (!first) *out += ',';
    first = false;
    AppendRuleEntry(
        rule, false,
        [&](SeriesOutcome outcome, std::string* value) {
          AppendInt(value, CountAt(rule.per_loop, rule.loops, now_s, outcome));
        },
        out);
  });
  *out += ']';
}

void Visibility::AppendStoreJson(std::string* out) const {
  const Status health = services_->rooms.backend->Health();
  std::lock_guard<std::mutex> lock(mu_);
  *out += "{\"kind\":\"";
  *out += store_kind_;
  *out += "\",\"healthy\":";
  *out += health.ok() ? "true" : "false";
  if (!health.ok()) {
    *out += ",\"error\":\"";
    http::AppendJsonEscaped(out, health.message());
    *out += '"';
  }
  // A store with nodes (Redis) once they have been probed.
  if (!nodes_.empty()) {
    *out += ",\"nodes\":[";
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const store::NodeHealth& n = nodes_[i];
      if (i > 0) *out += ',';
      *out += "{\"address\":\"";
      http::AppendJsonEscaped(out, n.address);
      *out += "\",\"up\":";
      *out += n.up ? "true" : "false";
      *out += ",\"circuit\":\"";
      *out += n.circuit_open ? "open" : "closed";
      *out += "\"";
      if (n.up) {
        char latency[32];
        std::snprintf(latency, sizeof(latency), "%.3f", n.latency_ms);
        *out += ",\"latency_ms\":";
        *out += latency;
      } else {
        *out += ",\"error\":\"";
        http::AppendJsonEscaped(out, n.error);
        *out += '"';
      }
      *out += '}';
    }
    *out += ']';
    if (!store_error_.empty()) {
      *out += ",\"sketch_exchange_error\":\"";
      http::AppendJsonEscaped(out, store_error_);
      *out += '"';
    }
  }
  *out += '}';
}

std::string Visibility::ShownAlert(const AlertRecord& record) const {
  std::string json;
  AppendAlertRecordJson(record, &json);
  if (!redact_keys_) return json;
  auto parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return "{}";
  if (auto key = parsed.find("key"); key != parsed.end() && key->is_string()) {
    *key = RedactKey(key->get<std::string>());
  }
  return parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Visibility::NewAlertEvents() {
  std::vector<AlertRecord> recent = services_->alerts->Recent(100);
  std::string out;
  // Oldest first, each once.
  for (auto it = recent.rbegin(); it != recent.rend(); ++it) {
    const std::string& id = it->event.event_id;
    if (streamed_alerts_.contains(id)) continue;
    streamed_alerts_.insert(id);
    streamed_order_.push_back(id);
    out += "event: alert\ndata: ";
    out += ShownAlert(*it);
    out += "\n\n";
  }
  if (streamed_order_.size() > kMaxStreamedAlerts) {
    const size_t drop = streamed_order_.size() - kMaxStreamedAlerts;
    for (size_t i = 0; i < drop; ++i) streamed_alerts_.erase(streamed_order_[i]);
    streamed_order_.erase(streamed_order_.begin(), streamed_order_.begin() + drop);
  }
  return out;
}

void Visibility::AppendStatsJson(int64_t now_ms, std::string* out) const {
  stats_asked_ms_.store(now_ms, std::memory_order_relaxed);
  const int64_t now_s = now_ms / 1000;
  *out += "{\"now_ms\":";
  AppendInt(out, now_ms);
  *out += ",\"version\":\"";
  http::AppendJsonEscaped(out, service_->version);
  *out += "\",\"uptime_s\":";
  AppendInt(out, (service_->clock().MonotonicNs() - service_->started_at_ns) / 1'000'000'000);
  *out += ",\"window_s\":";
  AppendInt(out, kSeriesSeconds);
  *out += ",\"rules\":[";
  const Config config = services_->rules->config();
  bool first = true;
  ForEachShownRule(config, [&](const ShownRule& rule) {
    if (!first) *out += ',';
    first = false;
    AppendRuleEntry(
        rule, true,
        [&](SeriesOutcome outcome, std::string* value) {
          *value += '[';
          for (int64_t s = now_s - kSeriesSeconds + 1; s <= now_s; ++s) {
            if (s != now_s - kSeriesSeconds + 1) *value += ',';
            AppendInt(value, CountAt(rule.per_loop, rule.loops, s, outcome));
          }
          *value += ']';
        },
        out);
  });
  *out += "],\"alerts\":[";
  const std::vector<AlertRecord> recent = services_->alerts->Recent(50);
  for (size_t i = 0; i < recent.size(); ++i) {
    if (i > 0) *out += ',';
    *out += ShownAlert(recent[i]);
  }
  // Priority classes (Rule::priorities): decisions of each since the
  // server started; empty when no rule has them.
  *out += "],\"priorities\":[";
  first = true;
  for (const service::RuleBook::ClassStat& c : services_->rules->ClassStats()) {
    if (!first) *out += ',';
    first = false;
    *out += "{\"rule\":\"";
    http::AppendJsonEscaped(out, c.rule);
    *out += "\",\"class\":\"";
    http::AppendJsonEscaped(out, c.name);
    *out += "\",\"keep_percent\":";
    AppendInt(out, c.keep_percent);
    *out += ",\"admitted\":";
    AppendInt(out, c.admitted);
    *out += ",\"denied\":";
    AppendInt(out, c.denied);
    *out += '}';
  }
  *out += "],\"store\":";
  AppendStoreJson(out);
  *out += ",\"connections\":";
  *out += service_->connections_json ? service_->connections_json() : "{}";
  *out += ",\"top\":{\"enabled\":";
  *out += top_ != nullptr ? "true" : "false";
  *out += ",\"servers\":";
  AppendInt(out, static_cast<int64_t>(Servers()));
  if (top_ != nullptr) {
    // Decisions the sketch never saw: a loop's queue was full, or the rule
    // was past the rules tracked (TopSubjectsOptions::max_rules).
    *out += ",\"dropped\":";
    AppendInt(out, recorder_->dropped());
    // Decisions made under load that the sketch's sample left out (each
    // stood for by one it counted: docs/visibility.md, "Under load").
    *out += ",\"sampled_out\":";
    AppendInt(out, recorder_->skipped());
    *out += ",\"untracked\":";
    AppendInt(out, top_->ignored());
  }
  *out += "},\"redact_keys\":";
  *out += redact_keys_ ? "true" : "false";
  // What POST /v1/admin/simulate takes: the rules it replays (a concurrency
  // rule decides by leases, not a rate, and CL.THROTTLE is no rule) and its
  // largest log. Null when this server cannot simulate.
  *out += ",\"simulate\":";
  if (!service_->simulate) {
    *out += "null}";
    return;
  }
  *out += "{\"max_body_bytes\":";
  AppendInt(out, static_cast<int64_t>(service_->simulate_max_body_bytes));
  *out += ",\"rules\":[";
  first = true;
  for (const Rule& r : config.rules) {
    if (r.is_concurrency()) continue;
    if (!first) *out += ',';
    first = false;
    *out += '"';
    http::AppendJsonEscaped(out, r.name);
    *out += '"';
  }
  *out += "]}}";
}

}  // namespace floodgate::server
