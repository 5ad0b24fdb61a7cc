// libFuzzer target for the HTTP front's text decoders: check requests from a
// JSON body and from a query string, flat JSON bodies of named fields (sets,
// OTP), percent-decoding, and the JSON escaping of problem details.
//
// The input is used as a request body, as a query string and as error text,
// and the fuzzer checks:
//  - an accepted check request obeys every documented bound (non-empty rule,
//    key of 1..512 bytes, cost in [0, 10^15]) and agrees with nlohmann's own
//    document parser on every field; a "not valid JSON" error is one that
//    nlohmann's parser also reports;
//  - the same holds for check requests from the query string;
//  - an accepted flat body (DecodeJsonFields) agrees with nlohmann's
//    document parser on every field, and a rejected one has a short error;
//  - a problem+json response built around the input is valid JSON whose
//    detail is the input itself whenever the input is valid UTF-8;
//  - percent-decoding never grows the text and the path segments decode.
// Memory errors and undefined behaviour are caught by ASan and UBSan.
//
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I/usr/include \
//     fuzz/json_body_fuzz.cc src/protocol/http/*.cc -o /tmp/json_fuzz
//   cp -r fuzz/corpus/json /tmp/json_corpus && /tmp/json_fuzz -max_total_time=60 /tmp/json_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/http/check_request.h"
#include "protocol/http/json_fields.h"
#include "protocol/http/query.h"
#include "protocol/http/response.h"

namespace {

using floodgate::http::CheckRequest;

// Fails loudly, so libFuzzer saves the input; assert() may be compiled out.
#define FUZZ_CHECK(condition)                                                            \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

void CheckBounds(const CheckRequest& req) {
  FUZZ_CHECK(!req.rule.empty());
  // A key left out is the route's to judge (a rule with a key template).
  FUZZ_CHECK(req.key_given ? !req.key.empty() : req.key.empty());
  FUZZ_CHECK(req.key.size() <= floodgate::http::kMaxCheckKeyBytes);
  FUZZ_CHECK(req.cost >= 0 && req.cost <= floodgate::http::kMaxCheckCost);
}

void CheckError(const std::string& error) {
  FUZZ_CHECK(!error.empty());
  FUZZ_CHECK(error.size() < 400);  // client text inside is always cut short
}

void CheckJsonBody(std::string_view body) {
  CheckRequest req;
  std::string error;
  if (floodgate::http::DecodeCheckRequestJson(body, &req, &error)) {
    CheckBounds(req);
    // An accepted body is a flat object, so building the document is cheap.
    const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    FUZZ_CHECK(doc.is_object());
    FUZZ_CHECK(doc.at("rule") == req.rule);
    FUZZ_CHECK(doc.contains("key") == req.key_given);
    if (req.key_given) FUZZ_CHECK(doc.at("key") == req.key);
    if (doc.contains("tier") && !doc["tier"].is_null()) FUZZ_CHECK(doc["tier"] == req.tier);
    if (doc.contains("cost") && !doc["cost"].is_null()) FUZZ_CHECK(doc["cost"] == req.cost);
  } else {
    CheckError(error);
    // accept() runs nlohmann's parser without building a document.
    if (error.starts_with("the body is not valid JSON")) FUZZ_CHECK(!nlohmann::json::accept(body));
  }
}

void CheckJsonFields(std::string_view body) {
  std::string member;
  int64_t ttl_ms = 0;
  floodgate::http::JsonField fields[] = {
      {"member", floodgate::http::JsonField::Kind::kString, true, &member, nullptr},
      {"ttl_ms", floodgate::http::JsonField::Kind::kInteger, false, nullptr, &ttl_ms},
  };
  std::string error;
  if (floodgate::http::DecodeJsonFields(body, fields, "{}", &error)) {
    const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    FUZZ_CHECK(doc.is_object());
    FUZZ_CHECK(fields[0].present && doc.at("member") == member);
    if (fields[1].present) FUZZ_CHECK(doc.at("ttl_ms") == ttl_ms);
    for (const auto& [name, value] : doc.items()) FUZZ_CHECK(name == "member" || name == "ttl_ms");
  } else {
    CheckError(error);
    if (error.starts_with("the body is not valid JSON")) FUZZ_CHECK(!nlohmann::json::accept(body));
  }
}

void CheckQuery(std::string_view query) {
  CheckRequest req;
  std::string error;
  if (floodgate::http::DecodeCheckRequestQuery(query, &req, &error)) {
    CheckBounds(req);
    std::string lookup_error;
    FUZZ_CHECK(floodgate::http::QueryParam(query, "rule", &lookup_error) == req.rule);
    const std::optional<std::string> key = floodgate::http::QueryParam(query, "key", &lookup_error);
    FUZZ_CHECK(key.has_value() == req.key_given && key.value_or("") == req.key);
    FUZZ_CHECK(lookup_error.empty());
  } else {
    CheckError(error);
  }
  std::string decoded;
  if (floodgate::http::PercentDecode(query, true, &decoded))
    FUZZ_CHECK(decoded.size() <= query.size());
  const floodgate::http::Target target = floodgate::http::SplitTarget(query);
  FUZZ_CHECK(target.path.size() + target.query.size() <= query.size() || target.path == "/");
  (void)floodgate::http::DecodePathSegments(target.path);
}

void CheckProblem(std::string_view text) {
  std::string out;
  floodgate::http::AppendProblem(&out, 400, text, text, /*keep_alive=*/true);
  const size_t body_at = out.find("\r\n\r\n");
  FUZZ_CHECK(body_at != std::string::npos);
  // The head has exactly the lines it should: nothing in `text` splits it.
  size_t lines = 0;
  for (size_t i = 0; i < body_at; ++i) lines += out[i] == '\n';
  FUZZ_CHECK(lines == 2);  // status line, Content-Type; the last CRLF is part of the blank line
  const std::string_view body = std::string_view(out).substr(body_at + 4);
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(doc.is_object());
  FUZZ_CHECK(doc["status"] == 400);
  bool valid_utf8 = true;
  try {
    (void)nlohmann::json(std::string(text)).dump();
  } catch (const nlohmann::json::exception&) {
    valid_utf8 = false;
  }
  if (valid_utf8) {
    FUZZ_CHECK(doc["detail"] == text);
  } else {
    FUZZ_CHECK(floodgate::http::JsonEscape(text).find("\\ufffd") != std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so ASan reports any read past the input.
  std::unique_ptr<char[]> copy(new char[size]);
  std::memcpy(copy.get(), data, size);
  const std::string_view input(copy.get(), size);
  CheckJsonBody(input);
  CheckJsonFields(input);
  CheckQuery(input);
  CheckProblem(input);
  return 0;
}
