// `floodgate serve`: the service. Flags override the config file.
#pragma once

#include <string>

namespace floodgate::app {

struct ServeFlags {
  std::string config_path;  // empty: examples/floodgate.yaml, found or built in (serve.cc)
  std::string store, http, resp, grpc;
  int threads = 0;  // 0: the config's, else the number of cores
  // A damaged or foreign state snapshot in data_dir: start with no saved
  // state (and replace the file at the next snapshot) instead of refusing.
  bool start_empty = false;
  // Join the ports of a running floodgate this one replaces (docs/operations.md,
  // "Graceful restart"); without it a port another process holds is an error.
  bool replace = false;
};

// Runs until SIGTERM or SIGINT; SIGHUP reloads the config file. Returns the
// process exit code.
int RunServe(const ServeFlags& flags);

}  // namespace floodgate::app
