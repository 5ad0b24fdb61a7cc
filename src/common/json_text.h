// JSON string content: escaping any byte string into the text between a
// JSON string's quotes. Shared by the HTTP front (decisions, problem
// details) and the alert events the service builds.
#pragma once

#include <string>
#include <string_view>

namespace floodgate::json {

// Appends `text` escaped for use between the double quotes of a JSON
// string: quote, backslash and control characters escaped, valid UTF-8
// kept, and each maximal invalid UTF-8 sequence replaced by one U+FFFD (so
// one bad byte eats no good ones). Keys and members are byte strings; JSON
// text must be UTF-8.
void AppendEscaped(std::string* out, std::string_view text);

}  // namespace floodgate::json
