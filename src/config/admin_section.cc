// The admin section: `admin` (admin_section.h).
#include "config/admin_section.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace floodgate::config {
namespace {

// The longest name a certificate's CN may hold (RFC 5280's ub-common-name);
// SANs may be longer but an admin name is a host or service name.
constexpr size_t kMaxClientNameBytes = 253;

// admin.client_names: a list of non-empty names, each once.
Status ParseClientNames(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                        std::vector<std::string>& out) {
  if (!value.IsSequence()) {
    return fields.WrongType(key, value, "admin.client_names", "a list of client certificate names");
  }
  out.clear();
  for (const YAML::Node& item : value) {
    Result<std::string> name = fields.String(key, item, "admin.client_names");
    if (!name.ok()) return name.status();
    if (name->empty() || name->size() > kMaxClientNameBytes) {
      return fields.Fail(
          item.Mark(),
          "admin.client_names: a name is 1 to " + std::to_string(kMaxClientNameBytes) + " bytes",
          *name);
    }
    if (std::find(out.begin(), out.end(), *name) != out.end()) {
      return fields.Fail(item.Mark(), "admin.client_names: '" + *name + "' is listed twice", *name);
    }
    out.push_back(*std::move(name));
  }
  return Status::Ok();
}

}  // namespace

Status ParseAdmin(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  AdminConfig& admin) {
  if (!value.IsMap()) return fields.WrongType(key, value, "admin", "a map");
  return fields.ForEachEntry(
      value, "key",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        if (name == "client_names") return ParseClientNames(fields, k, v, admin.client_names);
        if (name == "allow_plaintext") {
          Result<bool> b = fields.Bool(k, v, "admin.allow_plaintext");
          if (!b.ok()) return b.status();
          admin.allow_plaintext = *b;
          return Status::Ok();
        }
        std::string* target = name == "token_env"        ? &admin.token_env
                              : name == "read_token_env" ? &admin.read_token_env
                                                         : nullptr;
        if (target == nullptr) {
          return fields.Fail(
              k.Mark(),
              "unknown key '" + name +
                  "' in admin; expected token_env, read_token_env, allow_plaintext or "
                  "client_names",
              name);
        }
        Result<std::string> variable = fields.EnvironmentVariable(k, v, "admin." + name);
        if (!variable.ok()) return variable.status();
        *target = *std::move(variable);
        return Status::Ok();
      });
}

}  // namespace floodgate::config
