// Fuzzes a whole RESP connection: commands (FG.CHECK, CL.THROTTLE, AUTH,
// HELLO, CLIENT, …) with hostile arguments, fed in chunks as a socket would
// deliver them. Must never crash; the output must stay bounded.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/session_fuzz.h"
#include "server/resp/resp_session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  floodgate::fuzz::SessionWorld world;
  floodgate::server::RespSessionFactory factory({world.loop.get()},
                                                floodgate::resp::ParserLimits{});
  auto session = factory.NewSession(0, {});
  const size_t chunk = size > 0 ? 1 + data[0] % 37 : 1;
  const std::string output =
      floodgate::fuzz::FeedInChunks(*session, data, size, chunk, world.clock, 7);
  if (output.size() > 64 * size + 4096) __builtin_trap();
  return 0;
}
