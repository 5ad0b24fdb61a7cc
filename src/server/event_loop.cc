// EventLoop: level-triggered epoll. Reads until EAGAIN, lets the session
// consume every complete request (pipelining), writes as much as the socket
// takes, and asks for EPOLLOUT only while output is pending.
//
// A round with a remote store's driver: read the clients; if the store's
// descriptor was ready, read its answers (their completions queue up on
// this thread); end the round (the batch of decisions goes to the driver);
// step the driver (the batch is written to Redis now); deliver the
// completions; write the replies. No other thread takes part.
#include "server/event_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace floodgate::server {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
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

}  // namespace

struct EventLoop::Connection {
  int fd = -1;
  const ListenerSpec* listener = nullptr;
  std::unique_ptr<Session> session;
  std::string input;
  size_t input_start = 0;  // bytes of `input` already consumed
  std::string output;
  size_t output_start = 0;    // bytes of `output` already written
  bool closing = false;       // close once output is flushed
  bool flush_queued = false;  // in pending_flush_ for the end of this round
  uint32_t interest = 0;      // current epoll events
  uint64_t generation = 0;    // see ConnectionRef
};

void ConnectionRef::Complete(uint64_t tag, Completion completion) const {
  EventLoop* l = loop;
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
                     std::atomic<int64_t>* open_connections, LoopHooks hooks)
    : index_(index),
      listeners_(std::move(listeners)),
      limits_(limits),
      open_connections_(open_connections),
      hooks_(std::move(hooks)) {
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
  for (auto& l : listeners_) close(l.fd);
  close(wake_fd_);
  close(epoll_fd_);
}

void EventLoop::Stop() {
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
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
  if (ref.fd < 0 || static_cast<size_t>(ref.fd) >= connections_.size()) return;
  auto& slot = connections_[ref.fd];
  if (!slot || slot->generation != ref.generation) return;  // closed meanwhile
  Connection& c = *slot;
  c.session->OnCompletion(tag, std::move(completion), &c.output);
  QueueFlush(c);
}

void EventLoop::QueueFlush(Connection& c) {
  if (!c.flush_queued) {
    c.flush_queued = true;
    pending_flush_.push_back(c.fd);
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
  while (!stopping_.load(std::memory_order_acquire)) {
    // After a busy round, poll without sleeping a few times before blocking:
    // a loop that sleeps between every round of requests makes each client
    // write pay for waking it (on loopback the sender's CPU does that work).
    int timeout = idle_polls < max_idle_polls ? 0 : -1;
    if (driver != nullptr) timeout = again ? 0 : SoonerTimeout(timeout, driver->TimeoutMs());
    if (store_only && !again) {
      // Only the store's answer (or Stop, Post) can make the next round
      // worth its wake-up; what clients send meanwhile is read with it.
      pollfd wait_for[2] = {{driver->fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(wait_for, 2, timeout) < 0 && errno != EINTR) break;
      timeout = 0;
    }
    const int n = epoll_wait(epoll_fd_, events, 256, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (n == 0) {
      ++idle_polls;
      // With a driver a timeout is the store's: its deadlines are due.
      if (driver == nullptr) continue;
    } else {
      idle_polls = 0;
    }
    RunPosted();
    bool store_ready = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t data = events[i].data.u64;
      if (data & kListenerTag) {
        Accept(listeners_[data & 0xffffffff]);
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
      if (c.closing && (events[i].events & (EPOLLHUP | EPOLLERR))) {
        // The peer is gone both ways: replies still in flight have nowhere
        // to go (and a hung-up socket would report itself every round).
        Close(fd);
        continue;
      }
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        OnReadable(c);
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
  }
  // Everything still held goes to the driver, which answers it all
  // (UNAVAILABLE) on this thread: no callback is left to run after the
  // loop is gone. The connections close without those replies.
  if (hooks_.stop) hooks_.stop();
  if (driver != nullptr) driver->Detach();
  local_.clear();
  t_running_loop = nullptr;
}

void EventLoop::Accept(const ListenerSpec& listener) {
  for (;;) {
    const int fd = accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error: epoll will tell us again
    if (open_connections_->fetch_add(1, std::memory_order_relaxed) >= limits_.max_connections) {
      open_connections_->fetch_sub(1, std::memory_order_relaxed);
      listener.counters->refused.fetch_add(1, std::memory_order_relaxed);
      const std::string msg = listener.factory->RefusalMessage();
      [[maybe_unused]] ssize_t w = send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
      close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (static_cast<size_t>(fd) >= connections_.size()) connections_.resize(fd + 64);
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->listener = &listener;
    c->generation = next_generation_++;
    c->session = listener.factory->NewSession(index_, ConnectionRef{this, fd, c->generation});
    c->interest = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    connections_[fd] = std::move(c);
    listener.counters->open.fetch_add(1, std::memory_order_relaxed);
    listener.counters->accepted.fetch_add(1, std::memory_order_relaxed);
  }
}

void EventLoop::OnReadable(Connection& c) {
  bool eof = false;
  for (;;) {
    if (c.output.size() - c.output_start > limits_.max_pending_output) break;  // back-pressure
    if (c.session->InFlight() >= limits_.max_in_flight) break;
    // Read into scratch space and append only what arrived: growing the
    // string by a whole chunk first would zero-fill 64 KiB per read.
    thread_local char scratch[kReadChunk];
    const ssize_t n = recv(c.fd, scratch, kReadChunk, 0);
    if (n > 0) {
      c.input.append(scratch, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < kReadChunk) break;  // drained for now
      continue;
    }
    if (n == 0) eof = true;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) eof = true;
    break;
  }
  if (!c.closing && c.input.size() > c.input_start) {
    bool close_after = false;
    const std::string_view pending(c.input.data() + c.input_start, c.input.size() - c.input_start);
    c.input_start += c.session->OnInput(pending, &c.output, &close_after);
    if (close_after) c.closing = true;
  }
  if (c.input_start == c.input.size()) {
    c.input.clear();
    c.input_start = 0;
  } else if (c.input_start > 0 && c.input_start >= c.input.size() / 2) {
    c.input.erase(0, c.input_start);
    c.input_start = 0;
  }
  if (!c.closing && c.input.size() - c.input_start > limits_.max_pending_input) {
    // One request larger than any parser limit allows: refuse and close.
    c.listener->counters->oversized.fetch_add(1, std::memory_order_relaxed);
    c.output += c.listener->oversize_reply;
    c.closing = true;
  }
  if (eof) {
    // The peer is gone (or half-closed): best effort to send what we have.
    c.closing = true;
  }
  QueueFlush(c);
}

void EventLoop::Flush(Connection& c) {
  while (c.output_start < c.output.size()) {
    const ssize_t n = send(c.fd, c.output.data() + c.output_start, c.output.size() - c.output_start,
                           MSG_NOSIGNAL);
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
    c.output.clear();
    c.output_start = 0;
    if (c.closing && c.session->InFlight() == 0) {
      Close(c.fd);
      return;
    }
  }
  UpdateInterest(c);
}

void EventLoop::UpdateInterest(Connection& c) {
  const bool pending_out = c.output_start < c.output.size();
  const bool can_read = !c.closing &&
                        c.output.size() - c.output_start <= limits_.max_pending_output &&
                        c.session->InFlight() < limits_.max_in_flight;
  const uint32_t want = (can_read ? EPOLLIN : 0u) | (pending_out ? EPOLLOUT : 0u);
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = static_cast<uint64_t>(c.fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.interest = want;
}

void EventLoop::Close(int fd) {
  auto& slot = connections_[fd];
  if (!slot) return;
  // A queued flush for this fd is skipped: the slot is empty by then, or
  // holds a new connection that reused the fd and has nothing pending.
  slot->listener->counters->open.fetch_sub(1, std::memory_order_relaxed);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  slot.reset();
  open_connections_->fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace floodgate::server
