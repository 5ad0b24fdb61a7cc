// HTTP/1.1 sessions: parse pipelined requests, answer each in order, honour
// keep-alive, and answer malformed requests with problem+json then close.
#include "server/http_session.h"

#include "protocol/http/response.h"
#include "server/http_routes.h"

namespace floodgate::server {
namespace {

class HttpSession final : public Session {
 public:
  HttpSession(LoopContext* loop, http::ParserLimits limits) : loop_(loop), parser_(limits) {}

  size_t OnInput(std::string_view input, std::string* output, bool* close) override {
    size_t used = 0;
    while (used < input.size()) {
      http::Request req;
      size_t consumed = 0;
      int status = 0;
      std::string error;
      const auto result = parser_.Parse(input.substr(used), &req, &consumed, &status, &error);
      if (result == http::RequestParser::Status::kNeedMore) break;
      if (result == http::RequestParser::Status::kError) {
        loop_->service().metrics->CountError("protocol");
        http::AppendProblem(output, status, http::StatusReason(status), error,
                            /*keep_alive=*/false);
        *close = true;
        return input.size();
      }
      used += consumed;
      const bool timed = (++requests_ % kLatencySampling) == 0;  // see Metrics
      const int64_t start = timed ? MonotonicNs() : 0;
      HandleHttp(*loop_, req, output);
      if (timed) loop_->service().metrics->ObserveLatency(loop_->index(), MonotonicNs() - start);
      if (!req.keep_alive) {
        *close = true;
        return input.size();
      }
    }
    return used;
  }

 private:
  LoopContext* loop_;
  http::RequestParser parser_;
  uint64_t requests_ = 0;
};

}  // namespace

std::unique_ptr<Session> HttpSessionFactory::NewSession(int loop_index) {
  return std::make_unique<HttpSession>(loops_[loop_index], limits_);
}

std::string HttpSessionFactory::RefusalMessage() const {
  std::string out;
  http::AppendProblem(&out, 503, http::StatusReason(503),
                      "the server is at its connection limit; retry later", false);
  return out;
}

}  // namespace floodgate::server
