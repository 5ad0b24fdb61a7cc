// The subjects' sections (subjects_section.h).
#include "config/subjects_section.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/cidr.h"
#include "common/key_template.h"

namespace floodgate::config {
namespace {

constexpr size_t kMaxListNameBytes = 64;
constexpr size_t kMaxInlineNetworks = 10'000;  // more belong in a file
constexpr size_t kMaxTrustedProxies = 1'000;
constexpr int64_t kMaxJwtLeewayMs = 300'000;  // service/subjects/jwt_verifier.h

bool IsListNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// A list of networks (common/cidr.h), at most `max` of them, kept as
// written: the subjects read them into their sets.
Status NetworkList(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   const std::string& field, size_t max, std::vector<std::string>& out) {
  if (!value.IsSequence()) return fields.WrongType(key, value, field, "a list of networks");
  out.clear();
  for (const YAML::Node& item : value) {
    Result<std::string> text = fields.String(key, item, field);
    if (!text.ok()) return text.status();
    if (text->empty()) return fields.Fail(item.Mark(), "'" + field + "': an empty entry", "");
    if (Result<Cidr> network = ParseCidr(*text); !network.ok()) {
      return fields.Fail(item.Mark(), "'" + field + "': " + network.status().message(), *text);
    }
    if (out.size() == max) {
      return fields.Fail(
          item.Mark(), "'" + field + "' has more than " + std::to_string(max) + " entries", *text);
    }
    out.push_back(*std::move(text));
  }
  return Status::Ok();
}

Status ParseList(const Fields& fields, const std::string& name, const YAML::Node& name_key,
                 const YAML::Node& body, ListConfig& list) {
  const std::string path = "lists." + name;
  if (name.size() > kMaxListNameBytes || !std::all_of(name.begin(), name.end(), IsListNameChar)) {
    return fields.Fail(name_key.Mark(),
                       "list names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '-' or '.'", name);
  }
  list.name = name;
  if (!body.IsMap()) {
    return fields.WrongType(name_key, body, path, "a map with 'file' or 'cidrs'");
  }
  bool has_cidrs = false;
  Status s = fields.ForEachEntry(
      body, "key", [&](const std::string& field, const YAML::Node& k, const YAML::Node& v) {
        if (field == "file") {
          Result<std::string> file = fields.String(k, v, path + ".file");
          if (!file.ok()) return file.status();
          if (file->empty()) return fields.FailAt(k, v, "'" + path + ".file' is empty", "file");
          list.file = *std::move(file);
          return Status::Ok();
        }
        if (field == "cidrs") {
          has_cidrs = true;
          return NetworkList(fields, k, v, path + ".cidrs", kMaxInlineNetworks, list.cidrs);
        }
        return fields.Fail(k.Mark(),
                           "unknown key '" + field + "' in list '" + name +
                               "'; expected file (one network a line) or cidrs (a list)",
                           field);
      });
  if (!s.ok()) return s;
  if (list.file.empty() == !has_cidrs) {
    return fields.Fail(name_key.Mark(),
                       "list '" + name + "' needs one of 'file' or 'cidrs', not " +
                           (has_cidrs ? "both" : "neither"),
                       name);
  }
  return Status::Ok();
}

}  // namespace

Status ParseLists(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  std::vector<ListConfig>& lists) {
  if (value.IsNull()) return Status::Ok();
  if (!value.IsMap()) return fields.WrongType(key, value, "lists", "a map of list name to list");
  return fields.ForEachEntry(
      value, "list", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        ListConfig list;
        if (Status s = ParseList(fields, name, k, v, list); !s.ok()) return s;
        lists.push_back(std::move(list));
        return Status::Ok();
      });
}

Status ParseJwt(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                JwtConfig& jwt) {
  jwt.in_file = true;
  Status s = fields.ForEachInSection(
      key, value, "jwt", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        const std::string path = "jwt." + name;
        if (name == "leeway") {
          // Token times are whole seconds: "0s" is none, like "0" and "off".
          const bool zero = v.IsScalar() && v.Scalar() == "0s";
          Result<int64_t> ms = zero ? Result<int64_t>(int64_t{0})
                                    : fields.DurationOrOff(k, v, path, kMaxJwtLeewayMs);
          if (!ms.ok()) return ms.status();
          if (*ms % 1000 != 0) {
            return fields.FailAt(k, v, "'jwt.leeway' is whole seconds (token times are)",
                                 v.Scalar());
          }
          jwt.leeway_ms = *ms;
          return Status::Ok();
        }
        if (name == "hs256_secret_env") {
          Result<std::string> env = fields.EnvironmentVariable(k, v, path);
          if (!env.ok()) return env.status();
          jwt.hs256_secret_env = *std::move(env);
          return Status::Ok();
        }
        if (name == "header") {
          Result<std::string> text = fields.String(k, v, path);
          if (!text.ok()) return text.status();
          if (text->empty() || text->size() > 64 ||
              !std::all_of(text->begin(), text->end(), IsListNameChar)) {
            return fields.FailAt(k, v, "'jwt.header' must be a header field name", *text);
          }
          jwt.header.clear();
          for (char c : *text) jwt.header += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
          return Status::Ok();
        }
        std::string* target = name == "jwks_file"  ? &jwt.jwks_file
                              : name == "issuer"   ? &jwt.issuer
                              : name == "audience" ? &jwt.audience
                                                   : nullptr;
        if (target == nullptr) {
          return fields.Fail(
              k.Mark(),
              "unknown key '" + name +
                  "' in jwt; expected jwks_file, issuer, audience, leeway, header or "
                  "hs256_secret_env",
              name);
        }
        Result<std::string> text = fields.String(k, v, path);
        if (!text.ok()) return text.status();
        *target = *std::move(text);
        return Status::Ok();
      });
  if (!s.ok()) return s;
  if (jwt.jwks_file.empty() && jwt.hs256_secret_env.empty()) {
    return fields.Fail(key.Mark(),
                       "'jwt' needs 'jwks_file' (RS256, ES256) or 'hs256_secret_env' (HS256): "
                       "tokens are always verified",
                       "jwt");
  }
  return Status::Ok();
}

Status ParseTrustedProxies(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                           std::vector<std::string>& out) {
  return NetworkList(fields, key, value, "server.trusted_proxies", kMaxTrustedProxies, out);
}

Status ParseRuleSubjectField(const Fields& fields, const std::string& field, const YAML::Node& key,
                             const YAML::Node& value, const std::string& path,
                             SubjectConfig& subject, bool* known) {
  *known = true;
  if (field == "key") {
    Result<std::string> text = fields.String(key, value, path);
    if (!text.ok()) return text.status();
    Result<KeyTemplate> parsed = ParseKeyTemplate(*text);
    if (!parsed.ok()) return fields.FailAt(key, value, parsed.status().message(), *text);
    subject.key = *std::move(text);
    return Status::Ok();
  }
  if (field == "on_missing") {
    Result<std::string> text = fields.String(key, value, path);
    if (!text.ok()) return text.status();
    if (*text == "deny") {
      subject.on_missing = OnMissing::kDeny;
    } else if (*text == "allow") {
      subject.on_missing = OnMissing::kAllow;
    } else if (*text == "skip") {
      subject.on_missing = OnMissing::kSkip;
    } else {
      return fields.FailAt(
          key, value, "'" + path + "' must be deny, allow or skip (unset: a 400 answer)", *text);
    }
    return Status::Ok();
  }
  if (field == "deny_list" || field == "allow_list") {
    Result<std::string> text = fields.String(key, value, path);
    if (!text.ok()) return text.status();
    if (text->empty()) return fields.FailAt(key, value, "'" + path + "' names no list", field);
    (field == "deny_list" ? subject.deny_list : subject.allow_list) = *std::move(text);
    return Status::Ok();
  }
  *known = false;
  return Status::Ok();
}

Status CheckSubjects(const Fields& fields, const Config& config) {
  const std::string source(fields.source());
  auto fail = [&](const std::string& what) {
    return InvalidArgumentError((source.empty() ? std::string("config") : source) + ": " + what);
  };
  auto listed = [&](const std::string& name) {
    return std::any_of(config.lists.begin(), config.lists.end(),
                       [&](const ListConfig& l) { return l.name == name; });
  };
  for (const Rule& rule : config.rules) {
    const SubjectConfig& subject = rule.subject;
    for (const std::string* list : {&subject.deny_list, &subject.allow_list}) {
      if (!list->empty() && !listed(*list)) {
        return fail("rule '" + rule.name +
                    "': " + (list == &subject.deny_list ? "deny_list" : "allow_list") + " '" +
                    *list + "' is not a list of 'lists:'");
      }
    }
    if (subject.key.empty()) {
      if (subject.on_missing != OnMissing::kError) {
        return fail("rule '" + rule.name + "': 'on_missing' needs a 'key' template");
      }
      continue;
    }
    if (rule.is_concurrency()) {
      return fail("rule '" + rule.name +
                  "': a 'key' template is for checks (HTTP /v1/check), not concurrency leases");
    }
    Result<KeyTemplate> parsed = ParseKeyTemplate(subject.key);
    if (parsed.ok() && parsed->uses_jwt() && !config.jwt.in_file) {
      return fail("rule '" + rule.name + "': key '" + subject.key +
                  "' reads a token ({jwt:...}) but the config has no 'jwt:' section to verify "
                  "it with");
    }
    const bool data_token =
        !config.server.auth_token.empty() || !config.server.auth_token_env.empty();
    if (parsed.ok() && parsed->uses_jwt() && data_token && config.jwt.header == "authorization") {
      return fail("rule '" + rule.name + "': key '" + subject.key +
                  "' reads the client's token from Authorization, which server.auth_token "
                  "takes for floodgate's own; set jwt.header (e.g. x-client-authorization) "
                  "and have the proxy copy the client's Authorization there");
    }
  }
  return Status::Ok();
}

}  // namespace floodgate::config
