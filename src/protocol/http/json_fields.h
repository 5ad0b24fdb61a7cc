// json_fields: small JSON request bodies — one object of named scalar
// fields (strings and integers), as POST /v1/sets/{key} and /v1/otp/* take —
// decoded and checked, with a clear detail sentence for the 400 answer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace floodgate::http {

struct JsonField {
  enum class Kind { kString, kInteger };

  std::string_view name;
  Kind kind = Kind::kString;
  bool required = true;
  std::string* string_value = nullptr;  // kString: where the value goes
  int64_t* integer_value = nullptr;     // kInteger: where the value goes (any int64)
  bool present = false;                 // set by the decoder: a value (not null) was given
  bool seen = false;                    // set by the decoder: the name was given
};

// Decodes `body`, a JSON object whose members are all among `fields`, each
// at most once, each of its kind (null counts as absent). Unknown or
// repeated fields, a missing required field, a value of the wrong kind or
// out of int64 range, nested values, and anything that is not one JSON
// object are errors: false, with *error saying which (`example` shows a good
// body in the message for an empty one). Never throws; one pass over the
// body, no document tree.
bool DecodeJsonFields(std::string_view body, std::span<JsonField> fields, std::string_view example,
                      std::string* error);

}  // namespace floodgate::http
