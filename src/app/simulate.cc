// `floodgate simulate`: see simulate.h.
#include "app/simulate.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.h"
#include "nlohmann/json.hpp"

namespace floodgate::app {
namespace {

struct Event {
  int64_t timestamp_ms = 0;
  std::string key;
  int64_t cost = 1;
};

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

// Parses one input line. Returns an error message, or "" on success.
std::string ParseEvent(std::string_view line, Event* e) {
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

void AppendCsvField(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out.append(field);
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, p);
}

}  // namespace

int RunSimulate(const Config& config, const SimulateOptions& options, std::istream& in,
                const std::string& input_name, FILE* out, FILE* summary) {
  Config sim_config = config;
  sim_config.engine.sweep_interval_ms = 0;  // the virtual clock drives sweeps below
  // A replay runs on its own virtual clock, in memory: never against the
  // production Redis the config may name (and the log's times, not TIME).
  sim_config.store = "memory";
  // Nor does it send quota alerts to the production webhooks.
  for (Rule& rule : sim_config.rules) rule.alerts = AlertConfig{};
  ManualClock clock;
  auto limiter = Limiter::Create(sim_config, clock);
  if (!limiter.ok()) {
    std::fprintf(stderr, "error: %s\n", limiter.status().message().c_str());
    return 1;
  }
  // Probe the rule and tier once, so a typo fails before any output.
  if (auto probe = (*limiter)->Check(options.rule, "-", 0, options.tier); !probe.ok()) {
    std::fprintf(stderr, "error: %s\n", probe.status().message().c_str());
    return 1;
  }

  std::string buf;
  buf.reserve(1 << 20);
  buf += "timestamp_ms,key,cost,allowed,remaining,retry_after_ms\n";
  int64_t events = 0, allowed = 0, denied = 0, units_allowed = 0, units_denied = 0;
  int64_t first_ts = 0, last_ts = 0;
  absl::flat_hash_map<std::string, int64_t> denials_by_key;
  std::string line;
  int64_t line_no = 0;
  Event e;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view view = line;
    while (!view.empty() && (view.back() == '\r' || view.back() == ' ')) view.remove_suffix(1);
    if (view.empty() || view.front() == '#') continue;
    if (events == 0 && view.rfind("timestamp", 0) == 0) continue;  // a CSV header
    if (std::string err = ParseEvent(view, &e); !err.empty()) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      std::fprintf(stderr, "error: %s:%lld: %s\n", input_name.c_str(),
                   static_cast<long long>(line_no), err.c_str());
      return 1;
    }
    clock.SetMs(e.timestamp_ms);
    auto d = (*limiter)->Check(options.rule, e.key, e.cost, options.tier);
    if (!d.ok()) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      std::fprintf(stderr, "error: %s:%lld: %s\n", input_name.c_str(),
                   static_cast<long long>(line_no), d.status().message().c_str());
      return 1;
    }
    if (events == 0) first_ts = e.timestamp_ms;
    last_ts = e.timestamp_ms;
    ++events;
    const bool ok = d->allowed;
    if (ok) {
      ++allowed;
      units_allowed += e.cost;
    } else {
      ++denied;
      units_denied += e.cost;
      ++denials_by_key[e.key];
    }
    AppendInt(buf, e.timestamp_ms);
    buf += ',';
    AppendCsvField(buf, e.key);
    buf += ',';
    AppendInt(buf, e.cost);
    buf += ok ? ",1," : ",0,";
    AppendInt(buf, d->remaining);
    buf += ',';
    AppendInt(buf, d->retry_after_ms);
    buf += '\n';
    if (buf.size() > (1 << 20) - 1024) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      buf.clear();
    }
    if ((events & 0xffff) == 0) (*limiter)->SweepExpired();  // bound memory on long replays
  }
  std::fwrite(buf.data(), 1, buf.size(), out);
  std::fflush(out);

  std::vector<std::pair<std::string, int64_t>> top(denials_by_key.begin(), denials_by_key.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::fprintf(
      summary, "summary: rule=%s%s%s events=%lld allowed=%lld denied=%lld (%.2f%%)\n",
      options.rule.c_str(), options.tier.empty() ? "" : " tier=", options.tier.c_str(),
      static_cast<long long>(events), static_cast<long long>(allowed),
      static_cast<long long>(denied),
      events > 0 ? 100.0 * static_cast<double>(denied) / static_cast<double>(events) : 0.0);
  std::fprintf(summary, "summary: units allowed=%lld denied=%lld; span %lld ms; keys denied=%zu\n",
               static_cast<long long>(units_allowed), static_cast<long long>(units_denied),
               static_cast<long long>(last_ts - first_ts), denials_by_key.size());
  for (size_t i = 0; i < top.size() && i < 5; ++i) {
    std::fprintf(summary, "summary: top denied key %s: %lld\n", top[i].first.c_str(),
                 static_cast<long long>(top[i].second));
  }
  return 0;
}

}  // namespace floodgate::app
