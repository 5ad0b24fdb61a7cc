// Fuzzes the top-subjects sketches other servers publish (read back from a
// shared Redis, so any bytes): SpaceSaving::Parse and Visibility::Parse
// must never crash, hang or leak, and what they accept must keep its
// invariants through Serialize, Merge and Top.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/http/visibility.h"
#include "service/top/space_saving.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  using floodgate::service::SpaceSaving;
  auto check = [](const SpaceSaving& s) {
    auto again = SpaceSaving::Parse(s.Serialize());
    if (!again.ok() || again->Top(again->size()) != s.Top(s.size())) __builtin_trap();
    SpaceSaving merged = s;
    merged.Merge(s);
    for (const auto& e : merged.Top(10)) {
      if (e.error > e.count || e.error > merged.floor()) __builtin_trap();
    }
  };
  if (auto sketch = SpaceSaving::Parse(bytes); sketch.ok()) check(*sketch);
  if (auto blob = floodgate::server::Visibility::Parse(bytes); blob.ok()) {
    for (const auto& s : *blob) check(s.sketch);
  }
  return 0;
}
