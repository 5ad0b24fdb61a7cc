// query: see query.h.
#include "protocol/http/query.h"

#include "common/text.h"

#include "protocol/http/response.h"

namespace floodgate::http {
Target SplitTarget(std::string_view target) {
  target = target.substr(0, target.find('#'));
  if (!target.empty() && target.front() != '/') {
    const size_t scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos) return {target, {}};  // "*" or authority-form
    const size_t path_start = target.find_first_of("/?", scheme_end + 3);
    if (path_start == std::string_view::npos) return {"/", {}};
    target.remove_prefix(path_start);
    if (target.front() == '?') return {"/", target.substr(1)};
  }
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<std::vector<std::string>> DecodePathSegments(std::string_view path) {
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  std::vector<std::string> segments;
  while (true) {
    const size_t slash = path.find('/');
    std::string segment;
    if (!PercentDecode(path.substr(0, slash), /*plus_as_space=*/false, &segment)) {
      return std::nullopt;
    }
    segments.push_back(std::move(segment));
    if (slash == std::string_view::npos) return segments;
    path.remove_prefix(slash + 1);
  }
}

bool ParseQuery(std::string_view query, std::vector<std::pair<std::string, std::string>>* params,
                std::string* error) {
  params->clear();
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view raw_name = pair.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    std::string name, value;
    if (!PercentDecode(raw_name, /*plus_as_space=*/true, &name)) {
      *error = "invalid percent-escape in the query parameter name " + QuoteForDetail(raw_name);
      return false;
    }
    if (!PercentDecode(raw_value, /*plus_as_space=*/true, &value)) {
      *error = "invalid percent-escape in the value of query parameter " + QuoteForDetail(name);
      return false;
    }
    params->emplace_back(std::move(name), std::move(value));
  }
  return true;
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view name,
                                      std::string* error) {
  std::vector<std::pair<std::string, std::string>> params;
  if (!ParseQuery(query, &params, error)) return std::nullopt;
  for (auto& [n, v] : params) {
    if (n == name) return std::move(v);
  }
  return std::nullopt;
}

}  // namespace floodgate::http
