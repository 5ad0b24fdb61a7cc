// `floodgate audit`, run as an operator would (the built binary, through
// the shell), for the tests of what it reports and fixes.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace floodgate::testing {

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs `floodgate audit <args>` (FLOODGATE_CLI, set by tests/CMakeLists.txt).
inline CliRun RunAudit(const std::string& args) {
  const std::string base =
      (std::filesystem::temp_directory_path() / ("floodgate_audit_" + std::to_string(::getpid())))
          .string();
  const std::string cmd =
      std::string(FLOODGATE_CLI) + " audit " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& path) {
    std::stringstream ss;
    ss << std::ifstream(path).rdbuf();
    std::filesystem::remove(path);
    return ss.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base + ".out"), slurp(base + ".err")};
}

}  // namespace floodgate::testing
