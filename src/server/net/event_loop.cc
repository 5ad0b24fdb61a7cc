// EventLoop: level-triggered epoll. Each round reads each ready connection
// once (one chunk), lets its session handle a few batches of complete
// requests (pipelining), writes as much as the socket takes, and asks for
// EPOLLOUT only while output is pending.
//
// Bounds, checked where the bytes move (docs/operations.md):
// - a connection gets a bounded share of each round: at most one read and
//   kBatchesPerRound batches of requests; what is left waits in again_ for
//   the next round, so one pipelining client cannot stall the others;
// - while a connection's unsent output is over its soft limit, or it has
//   too many requests in flight, its input is neither read nor parsed
//   (like Redis's client-output-buffer-limit); over the hard limit, or over
//   the soft limit for too long, it is closed;
// - partial requests, idle connections and accept errors run on the
//   clock's monotonic reading, read once per round; timers are swept a few times per
//   shortest timeout (at most once a second), and not at all with no
//   connection open, so an idle server sleeps.
//
// A round with a remote store's driver: read the clients; if the store's
// descriptor was ready, read its answers (their completions queue up on
// this thread); end the round (the batch of decisions goes to the driver);
// step the driver (the batch is written to Redis now); deliver the
// completions; write the replies. No other thread takes part.
#include "server/net/event_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace floodgate::server {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Batches of requests (a session's choice of size, see Session::OnInput)
// one connection may have handled per round before the others' turn.
constexpr int kBatchesPerRound = 4;
// Connections one listener accepts per round: a connect flood cannot keep
// a loop from its established clients.
constexpr int kAcceptsPerRound = 64;
// Connections eviction looks at, least recently active first, for one
// with nothing pending.
constexpr int kEvictScan = 256;
// A connection is not evicted in its first moments of quiet: a client that
// has just connected (or just had its answer) gets this long to send its
// request, or new clients under pressure would evict each other.
constexpr int64_t kMinIdleToEvictMs = 250;
// A buffer emptied with more capacity than this gives it back, so a burst
// does not leave an idle connection holding megabytes.
constexpr size_t kKeepCapacity = 256 * 1024;
constexpr int64_t kMaxAcceptBackoffMs = 1000;
// While draining, quiet connections are looked at this often.
constexpr int64_t kDrainSweepMs = 50;
// A TLS connection quiet this long gives back its record buffers.
constexpr int64_t kTlsQuietBuffersMs = 1000;
constexpr uint64_t kListenerTag = uint64_t{1} << 32;  // epoll data: listener index | tag
constexpr uint64_t kDriverTag = uint64_t{1} << 33;    // epoll data: the store driver's fd

// The loop running on this thread, for ConnectionRef::Complete.
thread_local EventLoop* t_running_loop = nullptr;

// The sooner of two epoll timeouts (-1: none).
int SoonerTimeout(int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return a < b ? a : b;
}

// Milliseconds from now_ms until deadline_ms as an epoll timeout (0 when
// due), at most max_ms (>= 0: a clock that does not follow real time must
// be read again that soon); -1 when there is no deadline (deadline_ms <= 0).
int TimeoutUntil(int64_t deadline_ms, int64_t now_ms, int max_ms) {
  if (deadline_ms <= 0) return -1;
  const int64_t wait = std::clamp<int64_t>(deadline_ms - now_ms, 0, 60'000);
  return static_cast<int>(max_ms >= 0 ? std::min<int64_t>(wait, max_ms) : wait);
}

int MaxSleepMs(const Clock& clock) {
  const int64_t ns = clock.MaxSleepNs();
  return ns < 0 ? -1 : static_cast<int>(std::min<int64_t>((ns + 999'999) / 1'000'000, 60'000));
}

// How often a loop sweeps its connections' timers (and quiet TLS
// connections' buffers): a quarter of the shortest, between 10 ms and 1 s;
// 0 when there is none.
int64_t SweepInterval(const std::vector<ListenerSpec>& listeners) {
  int64_t shortest = 0;
  for (const ListenerSpec& l : listeners) {
    for (int64_t t : {l.policy.request_timeout_ms, l.policy.idle_timeout_ms,
                      l.policy.output_soft_timeout_ms, l.tls != nullptr ? kTlsQuietBuffersMs : 0}) {
      if (t > 0 && (shortest == 0 || t < shortest)) shortest = t;
    }
  }
  if (shortest == 0) return 0;
  return std::clamp<int64_t>(shortest / 4, 10, 1000);
}

}  // namespace

struct EventLoop::Connection {
  explicit Connection(int64_t now_ms) : timers(now_ms) {}
  ~Connection() { SSL_free(ssl); }

  int fd = -1;
  // A TLS listener's connection: its OpenSSL state on `fd` (null:
  // plaintext), and whether the handshake is done. Until it is, the
  // connection counts as mid-request (its request timeout runs) and has
  // nothing to write but what OpenSSL writes itself.
  SSL* ssl = nullptr;
  bool tls_ready = false;
  bool tls_wants_write = false;  // OpenSSL needs the socket writable to go on
  bool tls_buffers = true;       // OpenSSL may hold record buffers (SweepTimers)
  // The verified client certificate's names (mTLS), read once when the
  // handshake completes: admin.client_names is matched against them.
  std::vector<std::string> client_names;
  const ListenerSpec* listener = nullptr;
  std::unique_ptr<Session> session;
  std::string input;
  size_t input_start = 0;  // bytes of `input` already consumed
  std::string output;
  size_t output_start = 0;    // bytes of `output` already written
  bool closing = false;       // handle no more input; close once output is flushed
  bool eof = false;           // the peer sent all it will: handle what is left, then close
  bool stuck = false;         // the input holds only an incomplete request
  bool flush_queued = false;  // in pending_flush_ for the end of this round
  bool again_queued = false;  // in again_ for the next round
  uint32_t interest = 0;      // current epoll events
  uint64_t generation = 0;    // see ConnectionRef
  uint64_t handled_round = 0;
  uint64_t accepted_round = 0;
  // The drain: the last time bytes arrived (or the accept), and whether a
  // reply has been made since the drain began, on a connection that the
  // drain closes after one (Session::DrainClosesAfterReply).
  int64_t last_input_ms = 0;
  bool drain_answered = false;
  ConnectionTimers timers;
  PeerAddress peer;
  Connection* lru_prev = nullptr;
  Connection* lru_next = nullptr;

  size_t pending_input() const { return input.size() - input_start; }
  size_t unsent() const { return output.size() - output_start; }
};

EventLoop::Connection* EventLoop::Live(const ConnectionRef& ref) const {
  if (ref.fd < 0 || static_cast<size_t>(ref.fd) >= connections_.size()) return nullptr;
  const auto& slot = connections_[ref.fd];
  return slot && slot->generation == ref.generation ? slot.get() : nullptr;
}

PeerAddress ConnectionRef::Peer() const {
  const EventLoop::Connection* c = loop != nullptr ? loop->Live(*this) : nullptr;
  return c != nullptr ? c->peer : PeerAddress{};
}

bool ConnectionRef::Secure() const {
  const EventLoop::Connection* c = loop != nullptr ? loop->Live(*this) : nullptr;
  return c != nullptr && c->ssl != nullptr;
}

const std::vector<std::string>& ConnectionRef::ClientNames() const {
  static const std::vector<std::string> kNone;
  const EventLoop::Connection* c = loop != nullptr ? loop->Live(*this) : nullptr;
  return c != nullptr ? c->client_names : kNone;
}

void ConnectionRef::Complete(uint64_t tag, Completion completion) const {
  EventLoop* l = loop;
  // A session no loop serves (the session fuzzers drive sessions alone):
  // nothing to deliver to.
  if (l == nullptr) return;
  if (l == t_running_loop) {
    l->local_.push_back(EventLoop::LocalCompletion{fd, generation, tag, std::move(completion)});
    return;
  }
  const ConnectionRef ref = *this;
  l->Post([l, ref, tag, completion = std::move(completion)]() mutable {
    l->Deliver(ref, tag, std::move(completion));
  });
}

EventLoop::EventLoop(int index, std::vector<ListenerSpec> listeners, LoopLimits limits,
                     std::atomic<int64_t>* open_connections, const Clock& clock, LoopHooks hooks)
    : index_(index),
      clock_(clock),
      max_sleep_ms_(MaxSleepMs(clock)),
      listeners_(std::move(listeners)),
      limits_(limits),
      open_connections_(open_connections),
      hooks_(std::move(hooks)) {
  sweep_every_ms_ = SweepInterval(listeners_);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = static_cast<uint64_t>(wake_fd_);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  for (size_t i = 0; i < listeners_.size(); ++i) {
    epoll_event lev{};
    lev.events = EPOLLIN;
    lev.data.u64 = kListenerTag | i;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listeners_[i].fd, &lev);
  }
  if (hooks_.driver != nullptr) {
    // The driver's descriptor (an epoll of its own) polls readable while it
    // has events: one epoll_wait here sleeps on clients and Redis alike.
    epoll_event dev{};
    dev.events = EPOLLIN;
    dev.data.u64 = kDriverTag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, hooks_.driver->fd(), &dev);
  }
}

EventLoop::~EventLoop() {
  for (auto& c : connections_) {
    if (c) Close(c->fd);
  }
  if (hooks_.driver != nullptr) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, hooks_.driver->fd(), nullptr);
    hooks_.driver.reset();  // detached by Run already, unless Run never ran
  }
  for (auto& l : listeners_) {
    if (l.fd >= 0) close(l.fd);
  }
  close(wake_fd_);
  close(epoll_fd_);
}

void EventLoop::Stop() {
  stopping_.store(true, std::memory_order_release);
  Post([] {});  // wakes the loop, which then notices stopping_
}

void EventLoop::Post(absl::AnyInvocable<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  // One eventfd write per drain, not per task: completions arrive in bursts
  // (a pipeline's replies from Redis), and each write is a system call.
  if (!wake_pending_.exchange(true, std::memory_order_acq_rel)) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
}

void EventLoop::RunPosted() {
  if (!wake_pending_.load(std::memory_order_acquire)) return;
  uint64_t count;
  [[maybe_unused]] ssize_t r = read(wake_fd_, &count, sizeof(count));
  // Cleared before draining: a Post racing with the drain writes again, so
  // its task is never left behind unannounced.
  wake_pending_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    running_.swap(posted_);
  }
  for (auto& fn : running_) fn();
  running_.clear();
}

void EventLoop::DeliverLocal() {
  // Delivering only writes replies; swapped all the same, so a completion
  // queued meanwhile is delivered too and never invalidates the iteration.
  while (!local_.empty()) {
    delivering_.swap(local_);
    for (LocalCompletion& lc : delivering_) {
      Deliver(ConnectionRef{this, lc.fd, lc.generation}, lc.tag, std::move(lc.completion));
    }
    delivering_.clear();
  }
}

void EventLoop::Deliver(const ConnectionRef& ref, uint64_t tag, Completion completion) {
  Connection* const live = Live(ref);
  if (live == nullptr) return;  // closed meanwhile
  Connection& c = *live;
  const bool was_full = c.session->InFlight() >= limits_.max_in_flight;
  c.session->OnCompletion(tag, std::move(completion), &c.output);
  if (draining_ && c.session->DrainClosesAfterReply()) c.drain_answered = true;
  if (c.timers.AfterOutput(c.listener->policy, now_ms_, c.unsent()) != CloseReason::kNone) {
    CloseFor(c, CloseReason::kOutputHardLimit);
    return;
  }
  // Requests held back by the in-flight bound may go on now.
  if (was_full && c.pending_input() > 0) QueueAgain(c);
  QueueFlush(c);
}

void EventLoop::QueueFlush(Connection& c) {
  if (!c.flush_queued) {
    c.flush_queued = true;
    pending_flush_.push_back(c.fd);
  }
}

void EventLoop::QueueAgain(Connection& c) {
  if (!c.again_queued) {
    c.again_queued = true;
    again_.push_back(c.fd);
  }
}

void EventLoop::Run() {
  t_running_loop = this;
  LoopDriver* const driver = hooks_.driver.get();
  if (driver != nullptr) driver->Attach();
  epoll_event events[256];
  const int max_idle_polls = limits_.idle_polls;
  int idle_polls = max_idle_polls;
  // The driver's last step answered requests (timeouts, refusals): the
  // round those answers free up (held decisions) runs at once.
  bool again = false;
  // The last round left decisions waiting for the store and found too few
  // requests to be worth waking for (LoopHooks::wait_for_store).
  bool store_only = false;
  now_ms_ = clock_.MonotonicNs() / 1'000'000;
  for (;;) {
    if (stopping_.load(std::memory_order_acquire) && !draining_) BeginDrain();
    if (draining_ && now_ms_ >= next_drain_sweep_ms_) DrainSweep();
    if (draining_ && (num_connections_ == 0 || now_ms_ >= drain_deadline_ms_)) break;
    // After a busy round, poll without sleeping a few times before blocking:
    // a loop that sleeps between every round of requests makes each client
    // write pay for waking it (on loopback the sender's CPU does that work).
    int timeout = idle_polls < max_idle_polls || !again_.empty() ? 0 : -1;
    if (num_connections_ > 0 && sweep_every_ms_ > 0) {
      timeout = SoonerTimeout(timeout, TimeoutUntil(next_sweep_ms_, now_ms_, max_sleep_ms_));
    }
    timeout = SoonerTimeout(timeout, TimeoutUntil(accept_resume_ms_, now_ms_, max_sleep_ms_));
    if (draining_) {
      timeout = SoonerTimeout(
          timeout,
          TimeoutUntil(std::min(drain_deadline_ms_, next_drain_sweep_ms_), now_ms_, max_sleep_ms_));
    }
    if (driver != nullptr) timeout = again ? 0 : SoonerTimeout(timeout, driver->TimeoutMs());
    if (store_only && !again && again_.empty()) {
      // Only the store's answer (or Stop, Post) can make the next round
      // worth its wake-up; what clients send meanwhile is read with it.
      pollfd wait_for[2] = {{driver->fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(wait_for, 2, timeout) < 0 && errno != EINTR) break;
      timeout = 0;
    }
    const int n = epoll_wait(epoll_fd_, events, 256, timeout);
    if (n < 0 && errno != EINTR) break;
    now_ms_ = clock_.MonotonicNs() / 1'000'000;
    ++round_;
    if (n > 0) {
      idle_polls = 0;
    } else {
      ++idle_polls;
      // Nothing happened: only the timers may be due (with a driver, a
      // timeout is the store's, and its deadlines are due).
      if (again_.empty() && driver == nullptr) {
        if (sweep_every_ms_ > 0 && now_ms_ >= next_sweep_ms_) SweepTimers();
        if (accept_resume_ms_ > 0 && now_ms_ >= accept_resume_ms_) ResumeAccepting();
        continue;
      }
    }
    if (hooks_.begin_round) hooks_.begin_round();
    RunPosted();
    // Connections left with work by the last round go first: they have
    // waited a round already.
    handling_.swap(again_);
    for (const int fd : handling_) {
      if (static_cast<size_t>(fd) >= connections_.size() || !connections_[fd]) continue;
      Connection& c = *connections_[fd];
      c.again_queued = false;
      Handle(c);
    }
    handling_.clear();
    bool store_ready = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t data = events[i].data.u64;
      if (data & kListenerTag) {
        Accept(data & 0xffffffff);
        continue;
      }
      if (data == kDriverTag) {
        store_ready = true;
        continue;
      }
      const int fd = static_cast<int>(data);
      if (fd == wake_fd_) continue;  // Stop() or Post(): handled above
      if (static_cast<size_t>(fd) >= connections_.size() || !connections_[fd]) continue;
      Connection& c = *connections_[fd];
      // Accepted this round on a descriptor that an earlier event of the
      // round named: that event was the closed connection's, not this one's.
      if (c.accepted_round == round_) continue;
      if (events[i].events & (EPOLLHUP | EPOLLERR)) {
        // The peer is gone both ways (or reset): replies have nowhere to
        // go, and a hung-up socket would report itself every round.
        Close(fd);
        continue;
      }
      if (events[i].events & EPOLLIN) {
        Handle(c);
        if (static_cast<size_t>(fd) >= connections_.size() || !connections_[fd]) continue;
      }
      if (events[i].events & EPOLLOUT) Flush(c);
    }
    // The store's answers first: one may free the batch's bound on calls in
    // flight, so that end_round sends the decisions it held.
    if (store_ready) driver->PollEvents();
    if (hooks_.end_round) hooks_.end_round();
    if (driver != nullptr) {
      const size_t answered = local_.size();
      driver->Step();  // this round's requests are written now
      again = local_.size() > answered;
    }
    DeliverLocal();
    store_only = driver != nullptr && hooks_.wait_for_store && hooks_.wait_for_store();
    // Replies are written once per round, after every ready connection has
    // been read, as redis-server does: clients then receive their replies
    // in bursts, which costs them (and the kernel) fewer wake-ups than
    // replies trickling out one connection at a time.
    for (const int fd : pending_flush_) {
      if (static_cast<size_t>(fd) < connections_.size() && connections_[fd]) {
        connections_[fd]->flush_queued = false;
        Flush(*connections_[fd]);
      }
    }
    pending_flush_.clear();
    if (sweep_every_ms_ > 0 && now_ms_ >= next_sweep_ms_) SweepTimers();
    if (accept_resume_ms_ > 0 && now_ms_ >= accept_resume_ms_) ResumeAccepting();
  }
  // The drain ran out: whoever is still connected is closed now.
  while (lru_head_ != nullptr) CloseFor(*lru_head_, CloseReason::kShutdown);
  // Everything still held goes to the driver, which answers it all
  // (UNAVAILABLE) on this thread: no callback is left to run after the
  // loop is gone.
  if (hooks_.stop) hooks_.stop();
  if (driver != nullptr) driver->Detach();
  local_.clear();
  t_running_loop = nullptr;
}

void EventLoop::Accept(size_t listener_index) {
  const ListenerSpec& listener = listeners_[listener_index];
  for (int accepted = 0; accepted < kAcceptsPerRound; ++accepted) {
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    const int fd = accept4(listener.fd, reinterpret_cast<sockaddr*>(&addr), &addr_len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // That one connection failed (reset before it was taken): next.
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      const int error = errno;
      listener.counters->accept_errors.fetch_add(1, std::memory_order_relaxed);
      // Out of descriptors: an idle connection gives its own up.
      if ((error == EMFILE || error == ENFILE) && EvictIdle("fd_limit")) continue;
      // The listener stays readable while the error lasts: stop asking for
      // a while instead of spinning on it.
      PauseAccepting(error);
      return;
    }
    accept_backoff_ms_ = 0;
    const PeerAddress peer = PeerAddress::From(addr);
    if (!AdmitPeer(listener, peer, fd)) continue;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (static_cast<size_t>(fd) >= connections_.size()) connections_.resize(fd + 64);
    auto c = std::make_unique<Connection>(now_ms_);
    c->fd = fd;
    c->listener = &listener;
    c->peer = peer;
    c->generation = next_generation_++;
    c->accepted_round = round_;
    c->last_input_ms = now_ms_;
    if (listener.tls != nullptr) {
      c->ssl = listener.tls->Current()->NewConnection(AlpnFor(listener.protocol));
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) {
        close(fd);  // out of memory: the client sees a reset
        open_connections_->fetch_sub(1, std::memory_order_relaxed);
        if (limits_.per_ip != nullptr) limits_.per_ip->Remove(peer);
        continue;
      }
      c->timers.AfterInput(now_ms_, false, true);  // the handshake: under the request timeout
    }
    c->session = listener.factory->NewSession(index_, ConnectionRef{this, fd, c->generation});
    c->interest = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    Connection* raw = c.get();
    connections_[fd] = std::move(c);
    ++num_connections_;
    Touch(*raw);
    listener.counters->open.fetch_add(1, std::memory_order_relaxed);
    listener.counters->accepted.fetch_add(1, std::memory_order_relaxed);
  }
}

// Takes a slot for a new connection from `peer`, evicting an idle one at
// max_connections; or refuses it (a message, then close). False: refused.
bool EventLoop::AdmitPeer(const ListenerSpec& listener, const PeerAddress& peer, int fd) {
  const char* refused = nullptr;
  if (limits_.per_ip != nullptr && !limits_.per_ip->TryAdd(peer)) {
    listener.counters->refused_per_ip.fetch_add(1, std::memory_order_relaxed);
    refused = "max_connections_per_ip";
  } else if (open_connections_->fetch_add(1, std::memory_order_relaxed) >=
                 limits_.max_connections &&
             !EvictIdle("max_connections")) {
    open_connections_->fetch_sub(1, std::memory_order_relaxed);
    if (limits_.per_ip != nullptr) limits_.per_ip->Remove(peer);
    listener.counters->refused.fetch_add(1, std::memory_order_relaxed);
    refused = "max_connections";
  }
  if (refused == nullptr) return true;
  int64_t suppressed = 0;
  if (refused_log_.Allow(now_ms_, &suppressed)) {
    Log(LogLevel::kWarn, "connection refused",
        {{"reason", refused},
         {"protocol", listener.protocol},
         {"peer", peer.ToString()},
         {"suppressed", std::to_string(suppressed)}});
  }
  if (listener.tls == nullptr) {  // a TLS client could not read it
    const std::string msg = listener.factory->RefusalMessage();
    [[maybe_unused]] ssize_t w = send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
  }
  close(fd);
  return false;
}

bool EventLoop::CanRead(const Connection& c) const {
  return !c.closing && !c.eof && c.unsent() <= c.listener->policy.read_limit() &&
         c.session->InFlight() < limits_.max_in_flight;
}

void EventLoop::Handle(Connection& c) {
  if (c.handled_round == round_) return;  // its share of this round is spent
  c.handled_round = round_;
  bool socket_more = false;
  // Read only what the session can take soon: while complete requests wait
  // in the input, more bytes would only pile up (an incomplete request
  // larger than a chunk needs them, though).
  if (CanRead(c) && (c.pending_input() < kReadChunk || c.stuck)) {
    // Read into scratch space and append only what arrived: growing the
    // string by a whole chunk first would zero-fill 64 KiB per read.
    thread_local char scratch[kReadChunk];
    ssize_t n;
    if (c.ssl != nullptr) {
      n = ReadTls(c, scratch, kReadChunk);
    } else {
      do {
        n = recv(c.fd, scratch, kReadChunk, 0);
      } while (n < 0 && errno == EINTR);
    }
    if (n > 0) {
      c.input.append(scratch, static_cast<size_t>(n));
      c.stuck = false;
      socket_more =
          static_cast<size_t>(n) == kReadChunk || (c.ssl != nullptr && SSL_has_pending(c.ssl) == 1);
      c.last_input_ms = now_ms_;
      Touch(c);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      c.eof = true;  // the peer is done sending (or gone): answer what it sent
    }
  }
  bool completed = false;
  for (int batch = 0; batch < kBatchesPerRound; ++batch) {
    if (c.closing || c.stuck || c.pending_input() == 0) break;
    // Back-pressure: replies nobody reads stop the parsing, not just reads.
    if (c.unsent() > c.listener->policy.read_limit() ||
        c.session->InFlight() >= limits_.max_in_flight) {
      break;
    }
    bool close_after = false;
    const std::string_view pending(c.input.data() + c.input_start, c.pending_input());
    const size_t used = c.session->OnInput(pending, &c.output, &close_after);
    c.input_start += used;
    if (used > 0) completed = true;
    if (used == 0) c.stuck = true;  // an incomplete request: it needs more bytes
    if (close_after) c.closing = true;
  }
  if (c.input_start == c.input.size()) {
    if (c.input.capacity() > kKeepCapacity) {
      std::string().swap(c.input);
    } else {
      c.input.clear();
    }
    c.input_start = 0;
  } else if (c.input_start > 0 && c.input_start >= c.input.size() / 2) {
    c.input.erase(0, c.input_start);
    c.input_start = 0;
  }
  c.timers.AfterInput(now_ms_, completed,
                      c.pending_input() > 0 || (c.ssl != nullptr && !c.tls_ready));
  if (completed) Touch(c);
  if (completed && draining_ && c.session->DrainClosesAfterReply()) c.drain_answered = true;
  if (!c.closing && c.pending_input() > limits_.max_pending_input) {
    // One request larger than any parser limit allows: refuse and close.
    c.listener->counters->closed[static_cast<int>(CloseReason::kOversized)].fetch_add(
        1, std::memory_order_relaxed);
    c.output += c.listener->oversize_reply;
    c.closing = true;
  }
  // A peer that has sent its last bytes is closed once they are answered,
  // unless what it waits for is held waiting for room (WAIT, wait_ms): a
  // client gone while waiting is closed at once, and its session's end
  // drops what it holds (it must not be admitted for nobody).
  if (c.eof && (c.pending_input() == 0 || c.stuck)) {
    c.closing = true;
    if (c.session->InFlight() > 0 && c.session->DropOnEof()) {
      Close(c.fd);
      return;
    }
  }
  if (c.timers.AfterOutput(c.listener->policy, now_ms_, c.unsent()) != CloseReason::kNone) {
    CloseFor(c, CloseReason::kOutputHardLimit);
    return;
  }
  const bool work_left = (c.pending_input() > 0 && !c.stuck) || socket_more;
  if (!c.closing && work_left && c.unsent() <= c.listener->policy.read_limit() &&
      c.session->InFlight() < limits_.max_in_flight) {
    QueueAgain(c);
  }
  QueueFlush(c);
}

// TLS: what recv would say, from OpenSSL: bytes, 0 at the peer's
// close_notify, or -1 with errno EAGAIN (OpenSSL needs more bytes, or the
// socket writable: tls_wants_write) or ECONNRESET (a failed handshake, a
// broken record: the connection ends). The handshake runs here first.
ssize_t EventLoop::ReadTls(Connection& c, char* buf, size_t n) {
  c.tls_wants_write = false;
  auto failed = [&c](int r) -> ssize_t {
    const int e = SSL_get_error(c.ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ) {
      errno = EAGAIN;
      return -1;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
      c.tls_wants_write = true;
      errno = EAGAIN;
      return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN) return 0;
    if (!c.tls_ready) {
      c.listener->counters->tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
    }
    errno = ECONNRESET;
    return -1;
  };
  if (!c.tls_ready) {
    const int r = SSL_do_handshake(c.ssl);
    if (r != 1) return failed(r);
    c.tls_ready = true;
    c.client_names = VerifiedClientNames(c.ssl);
  }
  c.tls_buffers = true;
  const int r = SSL_read(c.ssl, buf, static_cast<int>(n));
  return r > 0 ? r : failed(r);
}

// TLS: what send would say of the unsent output, from OpenSSL.
ssize_t EventLoop::WriteTls(Connection& c) {
  c.tls_wants_write = false;
  c.tls_buffers = true;
  const int r = SSL_write(c.ssl, c.output.data() + c.output_start,
                          static_cast<int>(std::min<size_t>(c.unsent(), 1 << 30)));
  if (r > 0) return r;
  const int e = SSL_get_error(c.ssl, r);
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
    errno = EAGAIN;
    return -1;
  }
  errno = EPIPE;
  return -1;
}

void EventLoop::Flush(Connection& c) {
  if (c.ssl != nullptr && !c.tls_ready) {
    if (c.closing) {  // the handshake failed
      Close(c.fd);
      return;
    }
    // Writable again during the handshake: it goes on from Handle.
    if (c.tls_wants_write) QueueAgain(c);
    UpdateInterest(c);
    return;
  }
  while (c.output_start < c.output.size()) {
    const ssize_t n = c.ssl != nullptr
                          ? WriteTls(c)
                          : send(c.fd, c.output.data() + c.output_start, c.unsent(), MSG_NOSIGNAL);
    if (n > 0) {
      c.output_start += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Close(c.fd);  // the peer reset the connection
    return;
  }
  if (c.output_start == c.output.size()) {
    if (c.output.capacity() > kKeepCapacity) {
      std::string().swap(c.output);
    } else {
      c.output.clear();
    }
    c.output_start = 0;
    if (c.closing && c.session->InFlight() == 0) {
      Close(c.fd);
      return;
    }
    // Draining: a connection that has had its reply, with nothing behind
    // it, is done here (its client reconnects, to the process that
    // replaces this one).
    if (draining_ && c.drain_answered && DrainQuiet(c, false)) {
      Close(c.fd);
      return;
    }
  }
  c.timers.AfterOutput(c.listener->policy, now_ms_, c.unsent());
  // Input held back while the client was not reading can go on now.
  if (!c.closing && c.pending_input() > 0 && !c.stuck &&
      c.unsent() <= c.listener->policy.read_limit()) {
    QueueAgain(c);
  }
  UpdateInterest(c);
}

void EventLoop::UpdateInterest(Connection& c) {
  const bool pending_out = c.output_start < c.output.size() || c.tls_wants_write;
  const uint32_t want = (CanRead(c) ? EPOLLIN : 0u) | (pending_out ? EPOLLOUT : 0u);
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = static_cast<uint64_t>(c.fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.interest = want;
}

void EventLoop::Touch(Connection& c) {
  if (lru_tail_ == &c) return;
  // Unlink (if linked), then append at the back.
  if (c.lru_prev != nullptr) c.lru_prev->lru_next = c.lru_next;
  if (c.lru_next != nullptr) c.lru_next->lru_prev = c.lru_prev;
  if (lru_head_ == &c) lru_head_ = c.lru_next;
  c.lru_prev = lru_tail_;
  c.lru_next = nullptr;
  if (lru_tail_ != nullptr) lru_tail_->lru_next = &c;
  lru_tail_ = &c;
  if (lru_head_ == nullptr) lru_head_ = &c;
}

bool EventLoop::EvictIdle(const char* why) {
  int looked = 0;
  for (Connection* c = lru_head_; c != nullptr && looked < kEvictScan; c = c->lru_next, ++looked) {
    if (c->closing || c->pending_input() > 0 || c->unsent() > 0 || c->session->InFlight() > 0 ||
        now_ms_ - c->timers.last_active_ms() < kMinIdleToEvictMs) {
      continue;  // a request in progress, or not idle for long: not evictable
    }
    int64_t suppressed = 0;
    if (evict_log_.Allow(now_ms_, &suppressed)) {
      Log(LogLevel::kWarn, "connection evicted",
          {{"reason", why},
           {"protocol", c->listener->protocol},
           {"peer", c->peer.ToString()},
           {"idle_ms", std::to_string(now_ms_ - c->timers.last_active_ms())},
           {"suppressed", std::to_string(suppressed)}});
    }
    c->listener->counters->closed[static_cast<int>(CloseReason::kEvicted)].fetch_add(
        1, std::memory_order_relaxed);
    Close(c->fd);
    return true;
  }
  return false;
}

void EventLoop::SweepTimers() {
  next_sweep_ms_ = now_ms_ + sweep_every_ms_;
  for (Connection* c = lru_head_; c != nullptr;) {
    Connection* next = c->lru_next;  // c may be closed
    const bool busy = c->unsent() > 0 || c->session->InFlight() > 0;
    const CloseReason reason = c->timers.Due(c->listener->policy, now_ms_, busy);
    if (reason != CloseReason::kNone) {
      CloseFor(*c, reason);
    } else if (c->ssl != nullptr && c->tls_buffers && c->tls_ready && !busy &&
               now_ms_ - std::max(c->last_input_ms, c->timers.last_active_ms()) >=
                   kTlsQuietBuffersMs) {
      // A quiet TLS connection gives its record buffers back (some 34 KiB):
      // idle ones cost what plaintext ones do. Refused while OpenSSL holds
      // bytes in them; tried again next sweep.
      c->tls_buffers = SSL_free_buffers(c->ssl) != 1;
    }
    c = next;
  }
}

void EventLoop::PauseAccepting(int error) {
  accept_backoff_ms_ =
      accept_backoff_ms_ == 0 ? 10 : std::min(accept_backoff_ms_ * 2, kMaxAcceptBackoffMs);
  accept_resume_ms_ = now_ms_ + accept_backoff_ms_;
  for (size_t i = 0; i < listeners_.size(); ++i) {
    epoll_event ev{};
    ev.events = 0;
    ev.data.u64 = kListenerTag | i;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listeners_[i].fd, &ev);
  }
  int64_t suppressed = 0;
  if (accept_log_.Allow(now_ms_, &suppressed)) {
    Log(LogLevel::kError, "accept failed; pausing accepts",
        {{"error", std::strerror(error)},
         {"backoff_ms", std::to_string(accept_backoff_ms_)},
         {"loop", std::to_string(index_)},
         {"open", std::to_string(num_connections_)},
         {"suppressed", std::to_string(suppressed)}});
  }
}

void EventLoop::ResumeAccepting() {
  accept_resume_ms_ = 0;
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerTag | i;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listeners_[i].fd, &ev);
  }
}

void EventLoop::BeginDrain() {
  draining_ = true;
  drain_deadline_ms_ = now_ms_ + limits_.drain_timeout_ms;
  accept_resume_ms_ = 0;
  for (ListenerSpec& l : listeners_) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, l.fd, nullptr);
    close(l.fd);
    l.fd = -1;
  }
  // Event streams go now (they take no further request); the others are
  // read on: busy ones finish what they were sent, and each is closed once
  // it has had a reply, or after kDrainGraceMs of quiet (DrainSweep).
  for (Connection* c = lru_head_; c != nullptr;) {
    Connection* next = c->lru_next;
    if (c->session->Streaming() && c->unsent() == 0) Close(c->fd);
    c = next;
  }
  next_drain_sweep_ms_ = now_ms_;
  DrainSweep();
}

// Nothing to answer or send, nothing unparsed (with `partial`, but for an
// incomplete request), and nothing unread in the socket: a request that
// arrived since the last read is answered first; one arriving after the
// close finds the socket gone, unread, so a client may send it again.
bool EventLoop::DrainQuiet(const Connection& c, bool partial) const {
  if (c.closing || c.unsent() > 0 || c.session->InFlight() > 0) return false;
  if (c.pending_input() > 0 && !(partial && c.stuck)) return false;
  if (c.ssl != nullptr && SSL_has_pending(c.ssl) == 1) return false;  // read ahead, unparsed
  char byte;
  return recv(c.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

// Closes the connections that have had their reply during the drain, or
// have been quiet for kDrainGraceMs (idle, or an incomplete request that
// stopped arriving); a grace for a request that may be on the wire.
void EventLoop::DrainSweep() {
  next_drain_sweep_ms_ = now_ms_ + kDrainSweepMs;
  for (Connection* c = lru_head_; c != nullptr;) {
    Connection* next = c->lru_next;  // c may be closed
    const int64_t quiet_ms = now_ms_ - std::max(c->last_input_ms, c->timers.last_active_ms());
    if ((c->drain_answered && DrainQuiet(*c, false)) ||
        (quiet_ms >= kDrainGraceMs && DrainQuiet(*c, true))) {
      Close(c->fd);
    }
    c = next;
  }
}

void EventLoop::CloseFor(Connection& c, CloseReason reason) {
  c.listener->counters->closed[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  int64_t suppressed = 0;
  if (close_logs_[static_cast<int>(reason)].Allow(now_ms_, &suppressed)) {
    Log(LogLevel::kWarn, "connection closed",
        {{"reason", std::string(CloseReasonName(reason))},
         {"protocol", c.listener->protocol},
         {"peer", c.peer.ToString()},
         {"unsent_bytes", std::to_string(c.unsent())},
         {"pending_bytes", std::to_string(c.pending_input())},
         {"suppressed", std::to_string(suppressed)}});
  }
  // Not on TLS: plaintext would be garbage to the client's TLS stack (and
  // one that stalled its handshake has no session to read it).
  if (reason == CloseReason::kRequestTimeout && !c.listener->timeout_reply.empty() &&
      c.unsent() == 0 && c.ssl == nullptr) {
    // Best effort, never waited for: a client that is merely slow learns why.
    [[maybe_unused]] ssize_t w = send(c.fd, c.listener->timeout_reply.data(),
                                      c.listener->timeout_reply.size(), MSG_NOSIGNAL);
  }
  Close(c.fd);
}

void EventLoop::Close(int fd) {
  auto& slot = connections_[fd];
  if (!slot) return;
  Connection& c = *slot;
  // A queued flush or again for this fd is skipped: the slot is empty by
  // then, or holds a new connection that reused the fd and has nothing
  // pending.
  if (c.lru_prev != nullptr) c.lru_prev->lru_next = c.lru_next;
  if (c.lru_next != nullptr) c.lru_next->lru_prev = c.lru_prev;
  if (lru_head_ == &c) lru_head_ = c.lru_next;
  if (lru_tail_ == &c) lru_tail_ = c.lru_prev;
  if (limits_.per_ip != nullptr) limits_.per_ip->Remove(c.peer);
  c.listener->counters->open.fetch_sub(1, std::memory_order_relaxed);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  slot.reset();
  --num_connections_;
  open_connections_->fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace floodgate::server
