// The admin section: `admin` (admin_section.h).
#include "config/admin_section.h"

#include <string>
#include <utility>

namespace floodgate::config {

Status ParseAdmin(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  AdminConfig& admin) {
  if (!value.IsMap()) return fields.WrongType(key, value, "admin", "a map");
  return fields.ForEachEntry(
      value, "key",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
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
                  "' in admin; expected token_env, read_token_env or allow_plaintext",
              name);
        }
        Result<std::string> variable = fields.EnvironmentVariable(k, v, "admin." + name);
        if (!variable.ok()) return variable.status();
        *target = *std::move(variable);
        return Status::Ok();
      });
}

}  // namespace floodgate::config
