// SliceView: what one server holds of a subject's quota slices
// (service/slices/sliced_store.h), for FG.STATE and the admin API. The
// shared count itself is the store's (a peek): it counts every unit granted
// in slices, spent or not; this says how many of them this server still
// holds unspent, and how many it was granted in the current window.
#pragma once

#include <cstdint>
#include <string_view>

namespace floodgate::store {

struct SliceHolding {
  int64_t held = 0;   // units this server holds unspent
  int64_t taken = 0;  // units granted to it in the current window, net of those given back
};

// Thread-safe.
class SliceView {
 public:
  virtual ~SliceView() = default;
  // This server's slices of state `id` (a variant's) for `subject`: its
  // threads' together; zeros when it holds none.
  virtual SliceHolding HeldFor(uint32_t id, std::string_view subject) const = 0;
};

}  // namespace floodgate::store
