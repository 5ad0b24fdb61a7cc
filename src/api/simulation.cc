// Simulation: see simulation.h. The replay runs the public Limiter on a
// ManualClock set to each event's time, so it decides exactly as a server
// on the embedded store would have at those instants.
#include "api/simulation.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "nlohmann/json.hpp"

namespace floodgate::api {
namespace {

bool ParseInt(std::string_view text, int64_t* out) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size();
}

// Splits one CSV line into fields (RFC 4180 quotes, so keys may hold commas).
std::optional<std::vector<std::string>> SplitCsv(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (quoted) return std::nullopt;
  return fields;
}

// Parses one event line. Returns an error message, or "" on success.
std::string ParseEvent(std::string_view line, SimulatedEvent* e) {
  if (line.front() == '{') {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return "not a JSON object";
    auto ts = j.find("timestamp_ms");
    if (ts == j.end() || !ts->is_number_integer()) return "\"timestamp_ms\" must be an integer";
    auto key = j.find("key");
    if (key == j.end() || !key->is_string()) return "\"key\" must be a string";
    e->timestamp_ms = ts->get<int64_t>();
    e->key = key->get<std::string>();
    e->cost = 1;
    if (auto cost = j.find("cost"); cost != j.end()) {
      if (!cost->is_number_integer()) return "\"cost\" must be an integer";
      e->cost = cost->get<int64_t>();
    }
    return "";
  }
  auto fields = SplitCsv(line);
  if (!fields) return "unterminated quote";
  if (fields->size() < 2 || fields->size() > 3) {
    return "expected timestamp_ms,key[,cost] (" + std::to_string(fields->size()) + " fields)";
  }
  if (!ParseInt((*fields)[0], &e->timestamp_ms)) {
    return "timestamp_ms '" + (*fields)[0] + "' is not an integer";
  }
  e->key = std::move((*fields)[1]);
  e->cost = 1;
  if (fields->size() == 3 && !ParseInt((*fields)[2], &e->cost)) {
    return "cost '" + (*fields)[2] + "' is not an integer";
  }
  return "";
}

constexpr int64_t kMaxTimestampMs = 32'503'680'000'000;  // 3000-01-01

}  // namespace

Simulation::~Simulation() = default;

Result<std::unique_ptr<Simulation>> Simulation::Create(const Config& config, std::string rule,
                                                       std::string tier) {
  Config sim_config = config;
  sim_config.engine.sweep_interval_ms = 0;  // the virtual clock drives sweeps (Feed)
  // A replay runs on its own virtual clock, in memory: never against the
  // production Redis the config may name (and the log's times, not TIME).
  sim_config.store = "memory";
  sim_config.data_dir.clear();
  // Nor does it send quota alerts to the production webhooks, or need the
  // secrets of features it never uses.
  for (Rule& r : sim_config.rules) r.alerts = AlertConfig{};
  sim_config.otp.enabled = false;
  std::unique_ptr<Simulation> sim(new Simulation());
  sim->clock_ = std::make_unique<ManualClock>();
  auto limiter = Limiter::Create(sim_config, *sim->clock_);
  if (!limiter.ok()) return limiter.status();
  sim->limiter_ = std::move(*limiter);
  // Probe the rule and tier once, so a typo fails before any event.
  if (auto probe = sim->limiter_->Check(rule, "-", 0, tier); !probe.ok()) return probe.status();
  sim->rule_ = std::move(rule);
  sim->tier_ = std::move(tier);
  return sim;
}

Status Simulation::Feed(std::string_view line, bool* decided, SimulatedEvent* e) {
  *decided = false;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty() || line.front() == '#') return Status::Ok();
  SimulationSummary& s = summary_;
  if (s.events == 0 && line.rfind("timestamp", 0) == 0) return Status::Ok();  // a CSV header
  if (std::string err = ParseEvent(line, e); !err.empty()) return InvalidArgumentError(err);
  clock_->SetMs(e->timestamp_ms);
  auto d = limiter_->Check(rule_, e->key, e->cost, tier_);
  if (!d.ok()) return d.status();
  if (s.events == 0) s.first_ms = e->timestamp_ms;
  s.last_ms = e->timestamp_ms;
  ++s.events;
  e->allowed = d->allowed;
  e->remaining = d->remaining;
  e->retry_after_ms = d->retry_after_ms;
  if (d->allowed) {
    ++s.allowed;
    s.units_allowed += e->cost;
  } else {
    ++s.denied;
    s.units_denied += e->cost;
    ++s.denials_by_key[e->key];
  }
  if (s.keys.size() < kMaxSimulatedKeys) s.keys.insert(e->key);
  if ((s.events & 0xffff) == 0) limiter_->SweepExpired();  // bound memory on long replays
  *decided = true;
  return Status::Ok();
}

Status SimulateToJson(const Config& config, std::string_view rule, std::string_view tier,
                      std::string_view log, std::string* json) {
  auto sim = Simulation::Create(config, std::string(rule), std::string(tier));
  if (!sim.ok()) return sim.status();
  // Decided events' times and outcomes, bucketed once the span is known.
  std::vector<std::pair<int64_t, bool>> outcomes;
  SimulatedEvent e;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = log.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    bool decided = false;
    if (Status s = (*sim)->Feed(line, &decided, &e); !s.ok()) {
      return Status(s.code(), "line " + std::to_string(line_no) + ": " + s.message());
    }
    if (!decided) continue;
    // Unix ms up to the year 3000: what a log holds, and what keeps the
    // series' arithmetic far from overflow.
    if (e.timestamp_ms < 0 || e.timestamp_ms > kMaxTimestampMs) {
      return InvalidArgumentError("line " + std::to_string(line_no) +
                                  ": timestamp_ms must be unix milliseconds (0 to " +
                                  std::to_string(kMaxTimestampMs) + ")");
    }
    outcomes.emplace_back(e.timestamp_ms, e.allowed);
  }
  const SimulationSummary& s = (*sim)->summary();
  // Events need not be in time order: the series spans the earliest to the
  // latest, in buckets of a round length (1 s, 2 s, 5 s, 10 s, ...) chosen so
  // that it has at most kMaxSeriesPoints points.
  int64_t lo = outcomes.empty() ? 0 : outcomes.front().first, hi = lo;
  for (const auto& [t, ok] : outcomes) {
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  const int64_t span = hi - lo + 1;
  int64_t bucket_ms = 1000;
  for (const int64_t step :
       {2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400}) {
    if (span / bucket_ms < static_cast<int64_t>(kMaxSeriesPoints)) break;
    bucket_ms = step * 1000;
  }
  while (span / bucket_ms >= static_cast<int64_t>(kMaxSeriesPoints)) bucket_ms *= 2;
  nlohmann::json series = nlohmann::json::array();
  if (!outcomes.empty()) {
    const int64_t base = lo - (lo % bucket_ms + bucket_ms) % bucket_ms;
    std::vector<std::pair<int64_t, int64_t>> counts(
        static_cast<size_t>((hi - base) / bucket_ms + 1));
    for (const auto& [t, ok] : outcomes) {
      auto& bucket = counts[static_cast<size_t>((t - base) / bucket_ms)];
      (ok ? bucket.first : bucket.second) += 1;
    }
    for (size_t i = 0; i < counts.size(); ++i) {
      series.push_back({{"t_ms", base + static_cast<int64_t>(i) * bucket_ms},
                        {"admitted", counts[i].first},
                        {"denied", counts[i].second}});
    }
  }
  std::vector<std::pair<std::string, int64_t>> top(s.denials_by_key.begin(),
                                                   s.denials_by_key.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (top.size() > 10) top.resize(10);
  nlohmann::json top_denied = nlohmann::json::array();
  for (const auto& [key, n] : top) top_denied.push_back({{"key", key}, {"denied", n}});
  const nlohmann::json out = {{"rule", (*sim)->rule()},
                              {"tier", (*sim)->tier()},
                              {"events", s.events},
                              {"admitted", s.allowed},
                              {"denied", s.denied},
                              {"units_admitted", s.units_allowed},
                              {"units_denied", s.units_denied},
                              {"subjects", s.keys.size()},
                              {"first_ms", s.first_ms},
                              {"last_ms", s.last_ms},
                              {"bucket_ms", bucket_ms},
                              {"series", std::move(series)},
                              {"top_denied", std::move(top_denied)}};
  // Keys are the caller's bytes: replace what is not UTF-8 rather than throw.
  *json = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return Status::Ok();
}

}  // namespace floodgate::api
