// `floodgate serve`: the service. Flags override the config file.
#pragma once

#include <string>

namespace floodgate::app {

struct ServeFlags {
  std::string config_path;  // empty: examples' defaults (see serve.cc)
  std::string store, http, resp, grpc;
  int threads = 0;  // 0: the config's, else the number of cores
};

// Runs until SIGTERM or SIGINT; SIGHUP reloads the config file. Returns the
// process exit code.
int RunServe(const ServeFlags& flags);

}  // namespace floodgate::app
