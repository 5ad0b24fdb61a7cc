// HTTP/1.1 sessions: parse pipelined requests, answer each in order, honour
// keep-alive, and answer malformed requests with problem+json then close.
#include "server/http_session.h"

#include "protocol/http/response.h"
#include "server/http_routes.h"

namespace floodgate::server {
namespace {

constexpr int kMaxBatch = 32;  // requests handled per OnInput call

class HttpSession final : public Session {
 public:
  HttpSession(LoopContext* loop, http::ParserLimits limits, ConnectionRef self)
      : loop_(loop), parser_(limits), async_{&replies_, self} {}

  // One batch: up to kMaxBatch requests (Session::OnInput).
  size_t OnInput(std::string_view input, std::string* output, bool* close) override {
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
      // Sampled (see Metrics); each connection's first request is timed, so
      // short connections are seen too.
      const bool timed = (requests_++ % kLatencySampling) == 0;
      const int64_t start = timed ? MonotonicNs() : 0;
      std::string* out = replies_.Target(output);
      const size_t response_start = out->size();
      HandleHttp(*loop_, req, async_, out);
      if (req.method == "HEAD") StripBody(out, response_start);
      if (timed) loop_->service().metrics->ObserveLatency(loop_->index(), MonotonicNs() - start);
      if (!req.keep_alive) {
        *close = true;
        return input.size();
      }
    }
    return used;
  }

  void OnCompletion(uint64_t tag, Completion completion, std::string* output) override {
    replies_.Complete(tag, std::move(completion), output);
  }

  size_t InFlight() const override { return replies_.in_flight(); }

 private:
  LoopContext* loop_;
  http::RequestParser parser_;
  uint64_t requests_ = 0;
  bool continue_sent_ = false;  // "100 Continue" sent for the request in progress
  ReplyQueue replies_;
  HttpAsync async_;
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
