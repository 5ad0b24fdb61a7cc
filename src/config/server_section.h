// The server sections of the config: the addresses the fronts listen on
// (`listen`: http, resp, grpc, or off) and the server's threads, connection
// bounds, timeouts, output limits and auth token (`server`). Each reads its
// section's value into its part of the Config and returns the first error,
// worded as yaml_fields.h words them.
#pragma once

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

Status ParseListen(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   ListenConfig& listen);
// Also checks what needs the whole section (the output limits' order).
// Messages never quote the auth token: it is a secret.
Status ParseServer(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   ServerConfig& server);

}  // namespace floodgate::config
