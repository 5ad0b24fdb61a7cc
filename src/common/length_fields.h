// Length-prefixed fields, "<length>:<bytes>": any byte string kept in a
// text record without escaping (the control plane's records and the
// embedded store's control.db). A record is fields one after another.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace floodgate::fields {

inline void Append(std::string* out, std::string_view field) {
  *out += std::to_string(field.size());
  *out += ':';
  out->append(field);
}

// Reads the field at the front of *in into *field and drops it from *in;
// false (and *in unusable) when *in does not start with one.
inline bool Read(std::string_view* in, std::string* field) {
  const size_t colon = in->find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 10) return false;
  size_t n = 0;
  for (char c : in->substr(0, colon)) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  if (in->size() - colon - 1 < n) return false;
  field->assign(in->substr(colon + 1, n));
  in->remove_prefix(colon + 1 + n);
  return true;
}

}  // namespace floodgate::fields
