// Words for config errors: see yaml_words.h.
#include "config/yaml_words.h"

#include "common/text.h"

namespace floodgate::config {

std::string Near(std::string_view text) { return text::QuoteForMessage(text, 64, '\''); }

const char* TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "empty";
    case YAML::NodeType::Scalar:
      return "a string";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "undefined";
}

}  // namespace floodgate::config
