// The tls and listen_tls sections: see tls_section.h.
#include "config/tls_section.h"

#include <string>

namespace floodgate::config {

Status ParseTls(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                TlsConfig& tls) {
  return fields.ForEachInSection(
      key, value, "tls",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        const std::string field = "tls." + name;
        std::string* path = name == "cert_file"        ? &tls.cert_file
                            : name == "key_file"       ? &tls.key_file
                            : name == "client_ca_file" ? &tls.client_ca_file
                                                       : nullptr;
        if (path != nullptr) {
          Result<std::string> text = fields.String(k, v, field);
          if (!text.ok()) return text.status();
          if (text->empty()) return fields.FailAt(k, v, "'" + field + "' must name a file", name);
          *path = *std::move(text);
          return Status::Ok();
        }
        if (name == "require_client_cert") {
          Result<bool> b = fields.Bool(k, v, field);
          if (!b.ok()) return b.status();
          tls.require_client_cert = *b;
          return Status::Ok();
        }
        return fields.Fail(k.Mark(),
                           "unknown key '" + name +
                               "' in tls; expected cert_file, key_file, client_ca_file or "
                               "require_client_cert",
                           name);
      });
}

Status ParseListenTls(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                      ListenTlsConfig& listen_tls) {
  return fields.ForEachInSection(
      key, value, "listen_tls",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        bool* target = name == "resp"   ? &listen_tls.resp
                       : name == "http" ? &listen_tls.http
                       : name == "grpc" ? &listen_tls.grpc
                                        : nullptr;
        if (target == nullptr) {
          return fields.Fail(
              k.Mark(), "unknown key '" + name + "' in listen_tls; expected resp, http or grpc",
              name);
        }
        Result<bool> b = fields.Bool(k, v, "listen_tls." + name);
        if (!b.ok()) return b.status();
        *target = *b;
        return Status::Ok();
      });
}

Status CheckTls(const Fields& fields, const Config& config) {
  const TlsConfig& tls = config.tls;
  const bool any_tls_key = !tls.cert_file.empty() || !tls.key_file.empty() ||
                           !tls.client_ca_file.empty() || tls.require_client_cert;
  auto fail = [&](const std::string& what) {
    return InvalidArgumentError(std::string(fields.source()) + ": " + what);
  };
  if (config.listen_tls.any() && !any_tls_key) {
    const char* front = config.listen_tls.resp ? "resp" : config.listen_tls.http ? "http" : "grpc";
    return fail(std::string("listen_tls.") + front +
                " is on but there is no tls section (cert_file and key_file)");
  }
  // A name with nothing to verify it against would be an admin identity
  // anyone could claim.
  if (!config.admin.client_names.empty() &&
      (tls.client_ca_file.empty() || !(config.listen_tls.resp || config.listen_tls.http))) {
    return fail(
        "admin.client_names needs tls.client_ca_file (the CAs client certificates are verified "
        "against) and listen_tls on resp or http");
  }
  if (!any_tls_key) return Status::Ok();
  if (tls.cert_file.empty()) return fail("tls needs cert_file (the server's certificate, PEM)");
  if (tls.key_file.empty()) return fail("tls needs key_file (the certificate's key, PEM)");
  if (tls.require_client_cert && tls.client_ca_file.empty()) {
    return fail(
        "tls.require_client_cert needs tls.client_ca_file (the CAs client certificates chain to)");
  }
  return Status::Ok();
}

}  // namespace floodgate::config
