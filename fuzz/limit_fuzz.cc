// Fuzzes limit strings: ParseLimit never crashes, and whatever it accepts
// prints canonically and parses back to the same limit within bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/rule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto limit = floodgate::ParseLimit(text);
  if (!limit.ok()) return 0;
  if (limit->count < 1 || limit->count > floodgate::kMaxLimitCount) __builtin_trap();
  if (limit->PeriodMs() < 1 || limit->PeriodMs() > floodgate::kMaxPeriodMs) __builtin_trap();
  auto again = floodgate::ParseLimit(limit->ToString());
  if (!again.ok() || !(*again == *limit)) __builtin_trap();
  return 0;
}
