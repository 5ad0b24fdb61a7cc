// `floodgate simulate`: replays a traffic log through the engine on a virtual
// clock, so a policy can be tried on yesterday's access log before it ships.
#pragma once

#include <cstdio>
#include <istream>
#include <string>

#include "floodgate/config.h"

namespace floodgate::app {

struct SimulateOptions {
  std::string rule;
  std::string tier;
};

// Reads events (CSV `timestamp_ms,key[,cost]` or JSON lines with the same
// fields; blank lines, '#' comments and a CSV header line are skipped) from
// `in`, writes one CSV line per event to `out` and a summary to `summary`.
// Returns the process exit code: 0, or 1 after printing an error that names
// the input line.
int RunSimulate(const Config& config, const SimulateOptions& options, std::istream& in,
                const std::string& input_name, FILE* out, FILE* summary);

}  // namespace floodgate::app
