// check_request: see check_request.h.
//
// The JSON body goes through nlohmann's SAX interface rather than a parsed
// document: the handler sees each token once, can stop at the first problem,
// reports nlohmann's byte position for syntax errors, and never throws (the
// request path has no exceptions).
#include "protocol/http/check_request.h"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "common/enum_table.h"
#include "protocol/http/json_error.h"
#include "protocol/http/query.h"
#include "protocol/http/response.h"

namespace floodgate::http {
namespace {

enum class Field { kNone, kRule, kKey, kCost, kTier, kWait, kDenyStatus, kPriority };

Field FieldNamed(std::string_view name) {
  if (name == "rule") return Field::kRule;
  if (name == "key") return Field::kKey;
  if (name == "cost") return Field::kCost;
  if (name == "tier") return Field::kTier;
  if (name == "wait_ms") return Field::kWait;
  if (name == "deny_status") return Field::kDenyStatus;
  if (name == "priority") return Field::kPriority;
  return Field::kNone;
}

constexpr EnumRow<Field, const char*> kFieldNames[] = {
    {Field::kRule, "rule"},        {Field::kKey, "key"},      {Field::kCost, "cost"},
    {Field::kTier, "tier"},        {Field::kWait, "wait_ms"}, {Field::kDenyStatus, "deny_status"},
    {Field::kPriority, "priority"}};

const char* FieldName(Field f) { return ValueIn(kFieldNames, f, ""); }

constexpr const char* kDenyStatusError = "\"deny_status\" must be 401, 403 or 429";

// A denial's status, if `v` is one the hooks understand (CheckRequest).
bool IsDenyStatus(uint64_t v) { return v == 401 || v == 403 || v == 429; }

// The status a query's deny_status text names, or 0 when it names none.
int DenyStatusOf(std::string_view text) {
  return text == "401" ? 401 : text == "403" ? 403 : text == "429" ? 429 : 0;
}

std::string TypeError(Field f) {
  if (f == Field::kCost) return "\"cost\" must be an integer between 0 and 10^15";
  if (f == Field::kWait) return "\"wait_ms\" must be an integer between 0 and 300000";
  if (f == Field::kDenyStatus) return kDenyStatusError;
  return std::string("\"") + FieldName(f) + "\" must be a string";
}

// Checks shared by both encodings, after every field is read.
// A key left out is for the route to judge: a rule with a key template
// builds it from the request (CheckRequest::key_given).
bool Validate(CheckRequest& req, bool has_rule, bool has_key, std::string_view what,
              std::string* error) {
  req.key_given = has_key;
  if (!has_rule) {
    *error = std::string("missing required ") + std::string(what) + " \"rule\"";
  } else if (req.rule.empty()) {
    *error = "\"rule\" must not be empty";
  } else if (!has_key) {
    return true;
  } else if (req.key.empty()) {
    *error = "\"key\" must not be empty";
  } else if (req.key.size() > kMaxCheckKeyBytes) {
    *error = "\"key\" is " + std::to_string(req.key.size()) + " bytes; at most " +
             std::to_string(kMaxCheckKeyBytes) + " are allowed";
  } else {
    return true;
  }
  return false;
}

// SAX handler for nlohmann::json::sax_parse: fills a CheckRequest from a
// top-level object of scalars and stops (returns false) at the first problem.
class CheckRequestSax {
 public:
  using json = nlohmann::json;

  explicit CheckRequestSax(CheckRequest* out) : out_(out) {}

  bool null() {
    if (!InObject()) return false;
    if (current_ == Field::kCost || current_ == Field::kTier || current_ == Field::kWait ||
        current_ == Field::kDenyStatus) {
      return true;  // null = absent
    }
    return Fail(TypeError(current_));
  }
  bool boolean(bool) { return InObject() && Fail(TypeError(current_)); }
  bool number_integer(json::number_integer_t v) {
    // nlohmann reports non-negative integers as unsigned: this one is < 0, or "-0".
    if (!InObject()) return false;
    if (v == 0 && current_ == Field::kCost) return SetCost(0);
    if (v == 0 && current_ == Field::kWait) return true;
    return Fail(TypeError(current_));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (!InObject()) return false;
    if (current_ == Field::kWait && v <= static_cast<uint64_t>(kMaxCheckWaitMs)) {
      out_->wait_ms = static_cast<int64_t>(v);
      return true;
    }
    if (current_ == Field::kDenyStatus && IsDenyStatus(v)) {
      out_->deny_status = static_cast<int>(v);
      return true;
    }
    if (current_ != Field::kCost || v > static_cast<uint64_t>(kMaxCheckCost)) {
      return Fail(TypeError(current_));
    }
    return SetCost(static_cast<int64_t>(v));
  }
  bool number_float(json::number_float_t, const json::string_t&) {
    return InObject() && Fail(TypeError(current_));
  }
  bool string(json::string_t& s) {
    if (!InObject()) return false;
    switch (current_) {
      case Field::kRule:
        out_->rule = std::move(s);
        return true;
      case Field::kKey:
        out_->key = std::move(s);
        return true;
      case Field::kTier:
        out_->tier = std::move(s);
        return true;
      case Field::kPriority:
        out_->priority = std::move(s);
        return true;
      default:
        return Fail(TypeError(current_));
    }
  }
  bool binary(json::binary_t&) { return Fail("the body must be a JSON object"); }
  bool start_object(size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    return Fail(TypeError(current_));
  }
  bool key(json::string_t& name) {
    current_ = FieldNamed(name);
    if (current_ == Field::kNone) {
      return Fail("unknown field " + QuoteForDetail(name) +
                  "; the fields are \"rule\", \"key\", \"cost\", \"tier\", \"priority\", "
                  "\"wait_ms\" and \"deny_status\"");
    }
    const unsigned bit = 1u << static_cast<int>(current_);
    if (seen_ & bit) return Fail("duplicate field " + QuoteForDetail(name));
    seen_ |= bit;
    return true;
  }
  bool end_object() {
    depth_ = 0;
    return true;
  }
  bool start_array(size_t) { return InObject() && Fail(TypeError(current_)); }
  bool end_array() { return false; }  // unreachable: start_array always stops
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    return Fail("the body is not valid JSON (at byte " + std::to_string(position) +
                "): " + DescribeJsonError(ex.what()));
  }

  bool Has(Field f) const { return (seen_ & (1u << static_cast<int>(f))) != 0; }
  const std::string& error() const { return error_; }

 private:
  // A scalar at the top level is a document that is not an object.
  bool InObject() { return depth_ == 1 || Fail("the body must be a JSON object"); }
  bool SetCost(int64_t cost) {
    out_->cost = cost;
    return true;
  }
  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  CheckRequest* out_;
  int depth_ = 0;
  Field current_ = Field::kNone;
  unsigned seen_ = 0;
  std::string error_;
};

bool IsJsonWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

bool DecodeCheckRequestJson(std::string_view body, CheckRequest* out, std::string* error) {
  *out = CheckRequest{};
  bool blank = true;
  for (char c : body) blank = blank && IsJsonWhitespace(c);
  if (blank) {
    *error =
        "the request body is empty; expected a JSON object like "
        "{\"rule\":\"api\",\"key\":\"user:42\"}";
    return false;
  }
  CheckRequestSax sax(out);
  if (!nlohmann::json::sax_parse(body, &sax)) {
    *error = sax.error().empty() ? "the body is not valid JSON" : sax.error();
    return false;
  }
  return Validate(*out, sax.Has(Field::kRule), sax.Has(Field::kKey), "field", error);
}

bool DecodeCheckRequestQuery(std::string_view query, CheckRequest* out, std::string* error) {
  *out = CheckRequest{};
  std::vector<std::pair<std::string, std::string>> params;
  if (!ParseQuery(query, &params, error)) return false;
  unsigned seen = 0;
  for (auto& [name, value] : params) {
    const Field field = FieldNamed(name);
    if (field == Field::kNone) {
      *error = "unknown query parameter " + QuoteForDetail(name) +
               "; the parameters are rule, key, cost, tier, priority, wait_ms and deny_status";
      return false;
    }
    const unsigned bit = 1u << static_cast<int>(field);
    if (seen & bit) {
      *error = "query parameter " + QuoteForDetail(name) + " is given more than once";
      return false;
    }
    seen |= bit;
    switch (field) {
      case Field::kRule:
        out->rule = std::move(value);
        break;
      case Field::kKey:
        out->key = std::move(value);
        break;
      case Field::kTier:
        out->tier = std::move(value);
        break;
      case Field::kPriority:
        out->priority = std::move(value);
        break;
      case Field::kCost:
      case Field::kWait: {
        // Digits only, stopping before the value can pass its bound (so no
        // overflow).
        const int64_t max = field == Field::kCost ? kMaxCheckCost : kMaxCheckWaitMs;
        int64_t n = 0;
        bool ok = !value.empty();
        for (char c : value) {
          ok = ok && c >= '0' && c <= '9' && n <= max;
          if (!ok) break;
          n = n * 10 + (c - '0');
        }
        if (!ok || n > max) {
          *error = TypeError(field);
          return false;
        }
        (field == Field::kCost ? out->cost : out->wait_ms) = n;
        break;
      }
      case Field::kDenyStatus:
        out->deny_status = DenyStatusOf(value);
        if (out->deny_status == 0) {
          *error = kDenyStatusError;
          return false;
        }
        break;
      case Field::kNone:
        break;
    }
  }
  return Validate(*out, seen & (1u << static_cast<int>(Field::kRule)),
                  seen & (1u << static_cast<int>(Field::kKey)), "query parameter", error);
}

bool DecodeDenyStatusQuery(std::string_view query, CheckRequest* out, std::string* error) {
  if (query.empty()) return true;
  std::vector<std::pair<std::string, std::string>> params;
  if (!ParseQuery(query, &params, error)) return false;
  for (const auto& [name, value] : params) {
    if (name != "deny_status") {
      *error =
          "a POST check takes its arguments in the JSON body; its query may hold only "
          "deny_status, not " +
          QuoteForDetail(name);
      return false;
    }
    if (params.size() > 1) {
      *error = "query parameter \"deny_status\" is given more than once";
      return false;
    }
    const int status = DenyStatusOf(value);
    if (status == 0) {
      *error = kDenyStatusError;
      return false;
    }
    if (out->deny_status != 429 && out->deny_status != status) {
      *error = "deny_status is given in both the query and the body, with different values";
      return false;
    }
    out->deny_status = status;
  }
  return true;
}

}  // namespace floodgate::http
