// RESP2 sessions: parse pipelined commands, dispatch each, reply in order.
//
// A pipeline is handled in three passes: parse every complete command,
// prefetch the state each will touch, then execute them with one clock read.
// The prefetches let the cache misses of a pipeline's subjects overlap
// instead of being paid one after another.
#include "server/resp/resp_session.h"

#include <deque>

#include "protocol/resp/writer.h"
#include "server/context/answer.h"
#include "server/resp/resp_commands.h"

namespace floodgate::server {
namespace {

constexpr size_t kMaxBatch = 128;  // commands parsed ahead of execution

class RespSession final : public QueuedSession {
 public:
  RespSession(LoopContext* loop, resp::ParserLimits limits, ConnectionRef self) : parser_(limits) {
    client_.loop = loop;
    client_.replies = &replies_;
    client_.self = self;
    client_.id = loop->service().next_client_id.fetch_add(1, std::memory_order_relaxed);
    client_.authenticated = loop->service().auth_token.empty();
  }
  // A request still held waiting is dropped: nobody is left to answer.
  ~RespSession() override {
    if (client_.waited) client_.loop->service().services->waiting->Cancel(client_.id);
  }
  bool DropOnEof() const override { return client_.waited; }

  // One batch: up to kMaxBatch commands (Session::OnInput).
  size_t OnInput(std::string_view input, std::string* output, bool* close) override {
    bool error = false, more = false;
    std::string error_text;
    const size_t used = ParseBatch(input, 0, &error, &error_text, &more);
    Execute(output);
    if (client_.quit) {
      *close = true;
      return input.size();
    }
    if (error) {
      // A malformed stream cannot be resynchronised: answer, then close
      // this connection only.
      resp::AppendError(replies_.Target(output), "Protocol error: " + error_text);
      client_.loop->service().metrics->CountError("protocol");
      *close = true;
      return input.size();
    }
    return used;
  }

 private:
  // Parses up to kMaxBatch commands from input[used..]. Sets *more when the
  // batch filled up before the input ran out of complete commands.
  size_t ParseBatch(std::string_view input, size_t used, bool* error, std::string* error_text,
                    bool* more) {
    args_.clear();
    ranges_.clear();
    owned_.clear();
    while (used < input.size()) {
      if (ranges_.size() == kMaxBatch) {
        *more = true;
        break;
      }
      size_t consumed = 0;
      const auto status = parser_.Parse(input.substr(used), &parsed_, &consumed, error_text);
      if (status == resp::Parser::Status::kError) {
        *error = true;
        break;
      }
      used += consumed;  // also after kNeedMore: skipped empty lines and *0
      if (status == resp::Parser::Status::kNeedMore) break;
      if (parsed_.empty()) continue;
      const size_t first = args_.size();
      for (std::string_view arg : parsed_) {
        // Multibulk arguments point into the connection's input, which stays
        // put until we return; inline ones point into the parser, which the
        // next Parse call reuses, so they are copied.
        const bool in_input =
            arg.data() >= input.data() && arg.data() <= input.data() + input.size();
        if (!in_input) arg = owned_.emplace_back(arg);
        args_.push_back(arg);
      }
      ranges_.emplace_back(first, parsed_.size());
    }
    return used;
  }

  void Execute(std::string* output) {
    if (ranges_.empty()) return;
    if (ranges_.size() > 1) {  // a lone command has nothing to overlap with
      for (const auto& [first, n] : ranges_) PrefetchResp(client_, Args(&args_[first], n));
    }
    client_.now_ms = client_.loop->service().clock().NowMs();
    // Timing every pipeline would add two clock reads to each request; one
    // pipeline in kLatencySampling is timed (see Metrics).
    const bool timed = (batches_++ % kLatencySampling) == 0;  // the first one too
    const Clock& clock = client_.loop->service().clock();
    const int64_t start = timed ? clock.MonotonicNs() : 0;
    size_t executed = 0;
    for (const auto& [first, n] : ranges_) {
      std::string* out = replies_.Target(output);
      const RequestInProgress request(&replies_, output);
      DispatchResp(client_, Args(&args_[first], n), out);
      ++executed;
      if (client_.quit) break;
    }
    if (timed) {  // one timing per pipeline, shared by its commands
      client_.loop->service().metrics->ObserveLatencies(
          client_.loop->index(), (clock.MonotonicNs() - start) / static_cast<int64_t>(executed),
          executed);
    }
  }

  resp::Parser parser_;
  std::vector<std::string_view> parsed_;
  std::vector<std::string_view> args_;             // every argument of the batch
  std::vector<std::pair<size_t, size_t>> ranges_;  // (first, count) per command
  std::deque<std::string> owned_;                  // copies of inline arguments
  uint64_t batches_ = 0;
  RespClient client_;
};

}  // namespace

std::unique_ptr<Session> RespSessionFactory::NewSession(int loop_index, ConnectionRef self) {
  return std::make_unique<RespSession>(loops_[loop_index], limits_, self);
}

}  // namespace floodgate::server
