// LoopDriver: a remote store's network I/O run by the caller's own event
// loop, on the loop's thread. Without one, requests go to the store's I/O
// threads and their answers come back from there: two thread wake-ups per
// round trip, which can cost more than the round trip itself.
//
//   auto driver = limiter->NewLoopDriver();      // null: nothing to drive
//   // On the loop's thread:
//   (*driver)->Attach();
//   epoll_ctl(ep, EPOLL_CTL_ADD, (*driver)->fd(), {EPOLLIN, ...});
//   while (running) {
//     epoll_wait(ep, ..., min(own_timeout, (*driver)->TimeoutMs()));
//     if (fd() was reported) (*driver)->PollEvents();   // answers: callbacks run here
//     ... requests (Limiter::CheckAsync; a server's batches flushed) ...
//     (*driver)->Step();                                 // writes them, expires deadlines
//   }
//   (*driver)->Detach();                                 // answers what is pending
#pragma once

namespace floodgate {

// Not thread-safe: every method but fd() runs on the thread it is attached
// to. The Limiter (or client) that made it must outlive it.
class LoopDriver {
 public:
  virtual ~LoopDriver() = default;

  // Binds the driver to the calling thread. From then until Detach, the
  // store's requests made on this thread go through this driver, and their
  // callbacks run on this thread, inside PollEvents, Step or Detach. Blocking
  // calls on the store must not be made here: they would wait for this
  // thread (Limiter::Check, Throttle and Reset fail with INTERNAL instead).
  // Blocks SIGPIPE on the thread (a TLS write to a closed socket must not
  // kill the process).
  virtual void Attach() = 0;

  // A descriptor that polls readable (EPOLLIN, level-triggered) when
  // PollEvents has work: replies, connections, submissions from other
  // threads. Valid until the driver is destroyed.
  virtual int fd() const = 0;

  // Handles what made fd() readable, without waiting: reads replies and
  // runs their callbacks.
  virtual void PollEvents() = 0;

  // Sends the requests made since the last Step (one write per connection
  // for all of them), answers those past their deadline, opens and probes
  // connections. Call it once per loop iteration, after the iteration's
  // requests. Callbacks may run here too (timeouts, refusals).
  virtual void Step() = 0;

  // How long the loop may wait for fd() before the next Step, in ms: 0 when
  // requests wait to be sent, -1 when nothing needs attention before the
  // next event (an idle driver never makes its loop poll).
  virtual int TimeoutMs() const = 0;

  // Answers every pending request (UNAVAILABLE: shutting down), closes the
  // connections and unbinds the thread. Further requests made on the thread
  // go to the store's own I/O threads. The destructor detaches if needed
  // (then call it on the attached thread, or after that thread has ended).
  virtual void Detach() = 0;
};

}  // namespace floodgate
