// The part of a JSON parser error worth showing a client in a 400 answer.
#pragma once

#include <string>
#include <string_view>

namespace floodgate::http {

// nlohmann's messages look like "[json.exception.parse_error.101] parse error
// at line 1, column 5: syntax error while parsing value - invalid literal;
// last read: 'tru,'". Returns the part after the position (callers report
// the byte offset separately), cut to 160 bytes: "last read" can quote a
// long token.
std::string DescribeJsonError(std::string_view what);

}  // namespace floodgate::http
