// The parts of the config that say where a rule's subject comes from in a
// request (docs/keys-from-requests.md): the `lists:` and `jwt:` sections,
// a rule's `key`, `on_missing`, `deny_list` and `allow_list`, and
// `server.trusted_proxies`. The shapes, templates and networks written in
// the file are checked here; the list files and the JWKS file are read when
// the subjects are built
// (service/subjects/subjects.h), which check-config does too. Errors are
// worded as yaml_fields.h words them.
#pragma once

#include <string>
#include <vector>

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

Status ParseLists(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  std::vector<ListConfig>& lists);
Status ParseJwt(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                JwtConfig& jwt);
// server.trusted_proxies: a list of networks (read as networks later).
Status ParseTrustedProxies(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                           std::vector<std::string>& out);
// One of a rule's subject fields (key, on_missing, deny_list, allow_list);
// false in *known when `field` is none of them.
Status ParseRuleSubjectField(const Fields& fields, const std::string& field, const YAML::Node& key,
                             const YAML::Node& value, const std::string& path,
                             SubjectConfig& subject, bool* known);
// What needs the whole file: each rule's lists are in `lists:`, and a
// template with {jwt:...} has a `jwt:` section.
Status CheckSubjects(const Fields& fields, const Config& config);

}  // namespace floodgate::config
