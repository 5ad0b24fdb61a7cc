// `floodgate simulate`: see simulate.h.
#include "app/simulate.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "api/simulation.h"

namespace floodgate::app {
namespace {

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
  auto sim = api::Simulation::Create(config, options.rule, options.tier);
  if (!sim.ok()) {
    std::fprintf(stderr, "error: %s\n", sim.status().message().c_str());
    return 1;
  }
  std::string buf;
  buf.reserve(1 << 20);
  buf += "timestamp_ms,key,cost,allowed,remaining,retry_after_ms\n";
  std::string line;
  int64_t line_no = 0;
  api::SimulatedEvent e;
  while (std::getline(in, line)) {
    ++line_no;
    bool decided = false;
    if (Status s = (*sim)->Feed(line, &decided, &e); !s.ok()) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      std::fprintf(stderr, "error: %s:%lld: %s\n", input_name.c_str(),
                   static_cast<long long>(line_no), s.message().c_str());
      return 1;
    }
    if (!decided) continue;
    AppendInt(buf, e.timestamp_ms);
    buf += ',';
    AppendCsvField(buf, e.key);
    buf += ',';
    AppendInt(buf, e.cost);
    buf += e.allowed ? ",1," : ",0,";
    AppendInt(buf, e.remaining);
    buf += ',';
    AppendInt(buf, e.retry_after_ms);
    buf += '\n';
    if (buf.size() > (1 << 20) - 1024) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 1, buf.size(), out);
  std::fflush(out);

  const api::SimulationSummary& s = (*sim)->summary();
  std::vector<std::pair<std::string, int64_t>> top(s.denials_by_key.begin(),
                                                   s.denials_by_key.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::fprintf(
      summary, "summary: rule=%s%s%s events=%lld allowed=%lld denied=%lld (%.2f%%)\n",
      options.rule.c_str(), options.tier.empty() ? "" : " tier=", options.tier.c_str(),
      static_cast<long long>(s.events), static_cast<long long>(s.allowed),
      static_cast<long long>(s.denied),
      s.events > 0 ? 100.0 * static_cast<double>(s.denied) / static_cast<double>(s.events) : 0.0);
  std::fprintf(summary, "summary: units allowed=%lld denied=%lld; span %lld ms; keys denied=%zu\n",
               static_cast<long long>(s.units_allowed), static_cast<long long>(s.units_denied),
               static_cast<long long>(s.last_ms - s.first_ms), s.denials_by_key.size());
  for (size_t i = 0; i < top.size() && i < 5; ++i) {
    std::fprintf(summary, "summary: top denied key %s: %lld\n", top[i].first.c_str(),
                 static_cast<long long>(top[i].second));
  }
  return 0;
}

}  // namespace floodgate::app
