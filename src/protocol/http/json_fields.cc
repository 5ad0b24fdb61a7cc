// json_fields: see json_fields.h. nlohmann's SAX interface, as in
// check_request.cc: every token is seen once, the first problem stops the
// parse, and nothing throws.
#include "protocol/http/json_fields.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "protocol/http/json_error.h"
#include "protocol/http/response.h"

namespace floodgate::http {
namespace {

std::string FieldList(std::span<const JsonField> fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += i + 1 == fields.size() ? " and " : ", ";
    out += "\"" + std::string(fields[i].name) + "\"";
  }
  return out;
}

class FieldsSax {
 public:
  using json = nlohmann::json;

  explicit FieldsSax(std::span<JsonField> fields) : fields_(fields) {}

  bool null() { return InObject(); }  // null = absent
  bool boolean(bool) { return InObject() && WrongKind(); }
  bool number_integer(json::number_integer_t v) {
    // nlohmann reports non-negative integers as unsigned: this one is < 0.
    return InObject() && (Is(JsonField::Kind::kInteger) ? SetInteger(v) : WrongKind());
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (!InObject()) return false;
    if (!Is(JsonField::Kind::kInteger)) return WrongKind();
    if (v > static_cast<json::number_unsigned_t>(INT64_MAX)) {
      return Fail("\"" + std::string(current_->name) + "\" is out of range");
    }
    return SetInteger(static_cast<int64_t>(v));
  }
  bool number_float(json::number_float_t, const json::string_t&) {
    return InObject() && WrongKind();
  }
  bool string(json::string_t& s) {
    if (!InObject()) return false;
    if (!Is(JsonField::Kind::kString)) return WrongKind();
    *current_->string_value = std::move(s);
    current_->present = true;
    return true;
  }
  bool binary(json::binary_t&) { return Fail("the body must be a JSON object"); }
  bool start_object(size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    return WrongKind();
  }
  bool key(json::string_t& name) {
    current_ = nullptr;
    for (JsonField& f : fields_) {
      if (f.name == name) current_ = &f;
    }
    if (current_ == nullptr) {
      return Fail("unknown field " + QuoteForDetail(name) + "; the fields are " +
                  FieldList(fields_));
    }
    if (current_->seen) return Fail("duplicate field " + QuoteForDetail(name));
    current_->seen = true;
    return true;
  }
  bool end_object() {
    depth_ = 0;
    return true;
  }
  bool start_array(size_t) { return InObject() && WrongKind(); }
  bool end_array() { return false; }  // unreachable: start_array always stops
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    return Fail("the body is not valid JSON (at byte " + std::to_string(position) +
                "): " + DescribeJsonError(ex.what()));
  }

  const std::string& error() const { return error_; }

 private:
  // A scalar at the top level is a document that is not an object.
  bool InObject() { return depth_ == 1 || Fail("the body must be a JSON object"); }
  bool Is(JsonField::Kind kind) const { return current_ != nullptr && current_->kind == kind; }
  bool SetInteger(int64_t v) {
    *current_->integer_value = v;
    current_->present = true;
    return true;
  }
  bool WrongKind() {
    if (current_ == nullptr) return Fail("the body must be a JSON object of scalar fields");
    return Fail("\"" + std::string(current_->name) + "\" must be " +
                (current_->kind == JsonField::Kind::kString ? "a string" : "an integer"));
  }
  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  std::span<JsonField> fields_;
  int depth_ = 0;
  JsonField* current_ = nullptr;
  std::string error_;
};

bool IsJsonWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

bool DecodeJsonFields(std::string_view body, std::span<JsonField> fields, std::string_view example,
                      std::string* error) {
  for (JsonField& f : fields) f.seen = f.present = false;
  bool blank = true;
  for (char c : body) blank = blank && IsJsonWhitespace(c);
  if (blank) {
    *error = "the request body is empty; expected a JSON object like " + std::string(example);
    return false;
  }
  FieldsSax sax(fields);
  if (!nlohmann::json::sax_parse(body, &sax)) {
    *error = sax.error().empty() ? "the body is not valid JSON" : sax.error();
    return false;
  }
  for (const JsonField& f : fields) {
    if (f.required && !f.present) {
      *error = "missing required field \"" + std::string(f.name) + "\"";
      return false;
    }
  }
  return true;
}

}  // namespace floodgate::http
