// RESP2 reply encoding: the replies whose text must be sanitised.
//
// Simple strings and errors end at the first CR or LF, so a message carrying
// one (an exception text, a user-supplied key echoed back) would cut the reply
// short and make the client read the rest as the next reply: from then on every
// answer on that connection would belong to the wrong request. Replacing those
// bytes keeps the stream in step; redis does the same in addReplyErrorLength.
#include "protocol/resp/writer.h"

namespace floodgate::resp {
namespace {

// Appends `text` with every CR and LF replaced by `replacement`.
void AppendLine(std::string* out, std::string_view text, char replacement) {
  const size_t start = out->size();
  out->append(text);
  for (size_t i = start; i < out->size(); ++i) {
    char& c = (*out)[i];
    if (c == '\r' || c == '\n') c = replacement;
  }
}

}  // namespace

void AppendSimpleString(std::string* out, std::string_view s) {
  out->push_back('+');
  AppendLine(out, s, ' ');
  out->append("\r\n", 2);
}

void AppendError(std::string* out, std::string_view message) {
  AppendErrorWithCode(out, "ERR", message);
}

void AppendErrorWithCode(std::string* out, std::string_view code, std::string_view message) {
  out->push_back('-');
  if (code.empty()) {
    out->append("ERR");
  } else {
    const size_t start = out->size();
    out->append(code);
    for (size_t i = start; i < out->size(); ++i) {
      char& c = (*out)[i];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') c = '_';
    }
  }
  if (!message.empty()) {
    out->push_back(' ');
    AppendLine(out, message, ' ');
  }
  out->append("\r\n", 2);
}

}  // namespace floodgate::resp
