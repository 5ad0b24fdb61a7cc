// See json_error.h.
#include "protocol/http/json_error.h"

namespace floodgate::http {

std::string DescribeJsonError(std::string_view what) {
  const size_t bracket = what.find("] ");
  if (what.starts_with("[json.exception.") && bracket != std::string_view::npos) {
    what.remove_prefix(bracket + 2);
  }
  if (what.starts_with("parse error")) {
    const size_t colon = what.find(": ");
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  constexpr size_t kMaxBytes = 160;
  std::string out(what.substr(0, kMaxBytes));
  if (what.size() > kMaxBytes) out += "...";
  return out;
}

}  // namespace floodgate::http
