// Session: one connection's protocol state, as the event loop sees it.
// The loop owns the bytes; a session only turns input into output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"

#include "server/net/peer_address.h"

namespace floodgate::server {

class EventLoop;

// Work finished elsewhere (a Redis reply), to be applied on the session's
// loop: it appends the reply to the string it is given.
using Completion = absl::AnyInvocable<void(std::string* reply)>;

// A connection as other threads may name it. Copyable; stays safe to use
// after the connection is gone (then Complete does nothing).
struct ConnectionRef {
  EventLoop* loop = nullptr;
  int fd = -1;
  uint64_t generation = 0;  // tells a connection from a later one on the same fd

  // Thread-safe: runs `completion` for request `tag` of this connection on
  // its loop (Session::OnCompletion), unless the connection has closed or
  // no loop serves it. On the loop's own thread (an answer read by its
  // store driver) it is queued without a lock or a wake-up and delivered
  // before the round's replies are written, never from inside a session's
  // OnInput; from another thread it is posted (EventLoop::Post). An answer
  // given while its own request is still in progress does not come here:
  // it fills its place at once (RequestInProgress, answer.h).
  void Complete(uint64_t tag, Completion completion) const;
  // The client's address; unknown (family 0) when no loop serves it. On
  // the connection's loop only.
  PeerAddress Peer() const;
  // Whether the connection speaks TLS (its listener's listen_tls); false
  // when no loop serves it. On the connection's loop only.
  bool Secure() const;
  // The names of the client certificate the TLS handshake verified (CN and
  // SANs, VerifiedClientNames); none for plaintext, no certificate, or no
  // loop. On the connection's loop only.
  const std::vector<std::string>& ClientNames() const;
};

// Not thread-safe: a session lives on one event loop thread.
class Session {
 public:
  virtual ~Session() = default;

  // Handles complete requests at the front of `input`, appending the
  // replies to `*output`: at most one batch (a few dozen requests, the
  // session's choice), so that the loop can share a round between
  // connections and stop a client that does not read its replies. Returns
  // how many input bytes were consumed; the loop calls again while complete
  // requests are left, and 0 means the input holds no complete request.
  // Sets *close to ask the loop to close the connection once `*output` has
  // been written (QUIT, a protocol error, HTTP "Connection: close") and no
  // request is in flight.
  virtual size_t OnInput(std::string_view input, std::string* output, bool* close) = 0;

  // A request this session left in flight (see ConnectionRef) has finished:
  // the session applies `completion` and appends to `*output` whatever
  // replies are now ready, in request order.
  virtual void OnCompletion(uint64_t tag, Completion completion, std::string* output) {}

  // Requests started and not yet completed. The loop stops reading from a
  // connection with too many, and closes one only when none is left.
  virtual size_t InFlight() const { return 0; }

  // Whether a connection whose peer has stopped sending (EOF) should be
  // closed at once, its requests in flight dropped, rather than once they
  // are answered: true while some are held waiting for room, which could
  // take long and must not be admitted for a client that has gone.
  virtual bool DropOnEof() const { return false; }

  // Whether the connection takes no further request (an HTTP event
  // stream): the drain closes it at once instead of waiting for one.
  virtual bool Streaming() const { return false; }

  // Whether the drain closes the connection after a reply with nothing
  // behind it (RESP: the protocol has no way to say so first; the client
  // sees the close before its next command). False for a session that says
  // so in its next reply (HTTP "Connection: close"): a reply it made before
  // the drain promised the connection stays open.
  virtual bool DrainClosesAfterReply() const { return true; }
};

// Makes a session for each accepted connection of one listener.
class SessionFactory {
 public:
  virtual ~SessionFactory() = default;
  // `self` names the connection, for requests completed later.
  virtual std::unique_ptr<Session> NewSession(int loop_index, ConnectionRef self) = 0;
  // Written to a connection refused because the server is at its connection
  // limit, before closing it (may be empty).
  virtual std::string RefusalMessage() const = 0;
};

}  // namespace floodgate::server
