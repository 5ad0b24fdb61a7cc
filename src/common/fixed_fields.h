// Fixed-width binary fields in host byte order: what the embedded store's
// state snapshot is made of (engine/snapshot.h; its header records the byte
// order, so a file from another kind of machine is refused, not misread).
// The sliding log, the expiring sets and the snapshot file itself all read
// and write their fields here.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace floodgate::fixed {

template <typename T>
void Put(std::string* out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// Reads a T from the front of *in and drops it; false when *in is too short.
template <typename T>
bool Get(std::string_view* in, T* v) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

// The next `n` bytes of *in, dropped from it; false when *in is too short.
inline bool Bytes(std::string_view* in, size_t n, std::string_view* v) {
  if (in->size() < n) return false;
  *v = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

}  // namespace floodgate::fixed
