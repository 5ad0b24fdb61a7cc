// TLS in the config (docs/operations.md, "TLS"): the `tls` section (the
// certificate, key and client CAs: the files themselves are read by
// server/net/tls_context.h, at check-config and serve) and `listen_tls`
// (which fronts speak it). CheckTls ties them: a front with TLS needs the
// certificate and key.
#pragma once

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

Status ParseTls(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                TlsConfig& tls);
Status ParseListenTls(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                      ListenTlsConfig& listen_tls);
// After the whole file: listen_tls without a tls section, a tls section
// without cert_file or key_file, require_client_cert without
// client_ca_file. The error names the keys and the file.
Status CheckTls(const Fields& fields, const Config& config);

}  // namespace floodgate::config
