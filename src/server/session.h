// Session: one connection's protocol state, as the event loop sees it.
// The loop owns the bytes; a session only turns input into output.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace floodgate::server {

// Not thread-safe: a session lives on one event loop thread.
class Session {
 public:
  virtual ~Session() = default;

  // Handles every complete request at the front of `input`, appending the
  // replies to `*output`. Returns how many input bytes were consumed.
  // Sets *close to ask the loop to close the connection once `*output` has
  // been written (QUIT, a protocol error, HTTP "Connection: close").
  virtual size_t OnInput(std::string_view input, std::string* output, bool* close) = 0;
};

// Makes a session for each accepted connection of one listener.
class SessionFactory {
 public:
  virtual ~SessionFactory() = default;
  virtual std::unique_ptr<Session> NewSession(int loop_index) = 0;
  // Written to a connection refused because the server is at its connection
  // limit, before closing it (may be empty).
  virtual std::string RefusalMessage() const = 0;
};

}  // namespace floodgate::server
