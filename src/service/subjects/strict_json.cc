// Strict JSON objects: see strict_json.h.
//
// A SAX handler builds the document, as nlohmann's own DOM parser does,
// because only the handler sees each key as it comes (to find a name
// named twice), how deep it is (to stop before the depth bound rather than
// after), and where a syntax error is, without exceptions.
#include "service/subjects/strict_json.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/text.h"

namespace floodgate::service {
namespace {

using nlohmann::json;

class StrictBuilder : public nlohmann::json_sax<json> {
 public:
  StrictBuilder(json& root, size_t size) : root_(root), size_(size) {}

  const std::string& error() const { return error_; }

  bool null() override { return Put(nullptr) != nullptr; }
  bool boolean(bool value) override { return Put(value) != nullptr; }
  bool number_integer(number_integer_t value) override { return Put(value) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return Put(value) != nullptr; }
  bool number_float(number_float_t value, const string_t&) override {
    return Put(value) != nullptr;
  }
  bool string(string_t& value) override { return Put(std::move(value)) != nullptr; }
  // JSON text has no binary values; only the binary formats make them.
  bool binary(binary_t&) override { return Fail("not JSON"); }

  bool start_object(std::size_t) override { return Open(json::object()); }
  bool key(string_t& name) override {
    if (!names_.back().insert(name).second) {
      return Fail("names " + text::QuoteForMessage(name) + " twice");
    }
    slot_ = &(*open_.back())[name];
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_array() override { return Close(); }

  bool parse_error(std::size_t position, const std::string&, const json::exception&) override {
    // A handler's own refusal stops the parser too, which then reports it
    // here: the first reason is the one to keep.
    // The parser counts the end of the text as one more byte read.
    if (error_.empty()) {
      error_ = position > size_
                   ? "not JSON (it ends too early)"
                   : "not JSON (syntax error at byte " + std::to_string(position) + ")";
    }
    return false;
  }

 private:
  // Places `value` where the text puts it: the root, the next element of
  // the innermost array, or the member whose key came last.
  json* Put(json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }

  // The pointers on open_ stay valid: an array grows only while its own
  // element is not open, and an object's members never move.
  bool Open(json container) {
    if (open_.size() >= kMaxJsonDepth) {
      return Fail("nested deeper than " + std::to_string(kMaxJsonDepth));
    }
    const bool object = container.is_object();
    open_.push_back(Put(std::move(container)));
    if (object) names_.emplace_back();
    return true;
  }

  bool Close() {
    if (open_.back()->is_object()) names_.pop_back();
    open_.pop_back();
    return true;
  }

  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  json& root_;
  const size_t size_;
  std::vector<json*> open_;
  std::vector<std::set<std::string>> names_;  // the keys seen in each open object
  json* slot_ = nullptr;
  std::string error_;
};

}  // namespace

Result<nlohmann::json> ParseJsonObject(std::string_view text) {
  json root;
  StrictBuilder builder(root, text.size());
  if (!json::sax_parse(text.begin(), text.end(), &builder)) {
    return InvalidArgumentError(builder.error().empty() ? "not JSON" : builder.error());
  }
  if (!root.is_object()) return InvalidArgumentError("not a JSON object");
  return root;
}

}  // namespace floodgate::service
