// HTTP/1.1 sessions: parse pipelined requests, answer each in order, honour
// keep-alive, and answer malformed requests with problem+json then close.
#include "server/http/http_session.h"

#include "protocol/http/response.h"
#include "server/context/answer.h"
#include "server/http/http_routes.h"
#include "server/http/visibility.h"

namespace floodgate::server {
namespace {

constexpr int kMaxBatch = 32;  // requests handled per OnInput call

class HttpSession final : public QueuedSession {
 public:
  HttpSession(LoopContext* loop, http::ParserLimits limits, ConnectionRef self)
      : loop_(loop), parser_(limits), async_{&replies_, self} {
    async_.waits = &waits_;
    async_.start_stream = [this] { return StartStream(); };
  }
  // A request still held waiting is dropped: nobody is left to answer.
  ~HttpSession() override {
    if (waits_.owner != 0) loop_->service().services->waiting->Cancel(waits_.owner);
    if (streaming_) Streams()->Remove(async_.self);
  }
  bool DropOnEof() const override { return waits_.owner != 0 || streaming_; }
  bool Streaming() const override { return streaming_; }
  bool DrainClosesAfterReply() const override { return false; }

  // An event stream's events come outside the reply order: the stream is
  // the connection's last response, and nothing is queued behind it.
  void OnCompletion(uint64_t tag, Completion completion, std::string* output) override {
    if (tag == kStreamTag) {
      if (streaming_) completion(output);
      return;
    }
    QueuedSession::OnCompletion(tag, std::move(completion), output);
  }

  // One batch: up to kMaxBatch requests (Session::OnInput).
  size_t OnInput(std::string_view input, std::string* output, bool* close) override {
    // A streaming connection reads no further request: what its client
    // sends is dropped (EventSource sends nothing).
    if (streaming_) return input.size();
    size_t used = 0;
    for (int handled = 0; handled < kMaxBatch && used < input.size(); ++handled) {
      http::Request req;
      size_t consumed = 0;
      int status = 0;
      std::string error;
      const auto result = parser_.Parse(input.substr(used), &req, &consumed, &status, &error);
      if (result == http::RequestParser::Status::kNeedMore) {
        // "Expect: 100-continue": say go ahead once the headers are in, so
        // the client does not wait (curl waits a second) before the body.
        if (parser_.ExpectsContinue() && !continue_sent_) {
          replies_.Target(output)->append("HTTP/1.1 100 Continue\r\n\r\n");
          continue_sent_ = true;
        }
        break;
      }
      if (result == http::RequestParser::Status::kError) {
        loop_->service().metrics->CountError("protocol");
        http::AppendProblem(replies_.Target(output), status, http::StatusReason(status), error,
                            /*keep_alive=*/false);
        *close = true;
        return input.size();
      }
      used += consumed;
      continue_sent_ = false;
      // Draining: the answer says "Connection: close" and the connection
      // closes after it; the client's next request opens a connection to
      // the process that replaces this one.
      if (loop_->service().draining.load(std::memory_order_relaxed)) req.keep_alive = false;
      // Sampled (see Metrics); each connection's first request is timed, so
      // short connections are seen too.
      const bool timed = (requests_++ % kLatencySampling) == 0;
      const Clock& clock = loop_->service().clock();
      const int64_t start = timed ? clock.MonotonicNs() : 0;
      std::string* out = replies_.Target(output);
      const size_t response_start = out->size();
      {
        const RequestInProgress request(&replies_, output);
        HandleHttp(*loop_, req, async_, out);
      }
      if (req.method == "HEAD") StripBody(out, response_start);
      if (timed)
        loop_->service().metrics->ObserveLatency(loop_->index(), clock.MonotonicNs() - start);
      // A stream lasts until either side closes, whatever the request said
      // of keep-alive ("Connection: close", HTTP/1.0).
      if (streaming_) return input.size();
      if (!req.keep_alive) {
        *close = true;
        return input.size();
      }
    }
    return used;
  }

 private:
  EventStreams* Streams() const {
    Visibility* v = loop_->service().visibility;
    return v != nullptr ? v->streams() : nullptr;
  }
  bool StartStream() {
    EventStreams* streams = Streams();
    if (streaming_ || streams == nullptr || replies_.in_flight() > 0) return false;
    if (!streams->Add(async_.self)) return false;
    streaming_ = true;
    return true;
  }

  LoopContext* loop_;
  http::RequestParser parser_;
  uint64_t requests_ = 0;
  bool continue_sent_ = false;  // "100 Continue" sent for the request in progress
  bool streaming_ = false;      // GET /v1/admin/events: an event stream from here on
  HttpAsync async_;
  WaitOwner waits_{loop_->service().next_client_id};
};

}  // namespace

std::unique_ptr<Session> HttpSessionFactory::NewSession(int loop_index, ConnectionRef self) {
  return std::make_unique<HttpSession>(loops_[loop_index], limits_, self);
}

std::string HttpSessionFactory::RefusalMessage() const {
  std::string out;
  http::AppendProblem(&out, 503, http::StatusReason(503),
                      "the server is at its connection limit; retry later", false);
  return out;
}

}  // namespace floodgate::server
