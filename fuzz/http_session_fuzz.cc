// Fuzzes a whole HTTP connection: requests to every route with hostile
// targets, headers and bodies, fed in chunks as a socket would deliver
// them. Must never crash; every response must be a well-formed HTTP/1.1
// status line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/session_fuzz.h"
#include "server/http_session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static floodgate::fuzz::SessionWorld world;
  floodgate::server::HttpSessionFactory factory({world.loop.get()}, floodgate::http::ParserLimits{});
  auto session = factory.NewSession(0);
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::string input, output;
  size_t pos = 0;
  const size_t chunk = size > 0 ? 1 + data[0] % 53 : 1;
  bool close = false;
  while (pos < all.size() && !close) {
    input.append(all.substr(pos, chunk));
    pos += chunk;
    const size_t used = session->OnInput(input, &output, &close);
    if (used > input.size()) __builtin_trap();
    input.erase(0, used);
    world.clock.AdvanceMs(3);
  }
  if (!output.empty() && output.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
  return 0;
}
