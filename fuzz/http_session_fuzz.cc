// Fuzzes a whole HTTP connection: requests to every route with hostile
// targets, headers and bodies, fed in chunks as a socket would deliver
// them. Must never crash; every response must be a well-formed HTTP/1.1
// status line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/session_fuzz.h"
#include "server/http/http_session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  floodgate::fuzz::SessionWorld world;
  floodgate::server::HttpSessionFactory factory({world.loop.get()},
                                                floodgate::http::ParserLimits{});
  auto session = factory.NewSession(0, {});
  const size_t chunk = size > 0 ? 1 + data[0] % 53 : 1;
  const std::string output =
      floodgate::fuzz::FeedInChunks(*session, data, size, chunk, world.clock, 3);
  if (!output.empty() && output.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
  return 0;
}
