// The TLS certificate's metric families (TlsReloader): reloads by result
// and the serving certificate's end of validity, to alert on before it
// comes.
#pragma once

#include <string>

#include "server/net/tls_reloader.h"

namespace floodgate::server {

void AppendTlsMetrics(const TlsReloader& reloader, std::string* out);

}  // namespace floodgate::server
