// RESP2 sessions: the Redis-protocol front. Commands are dispatched from one
// table (resp_commands.cc); any Redis client is a floodgate client.
#pragma once

#include <memory>
#include <string>

#include "protocol/resp/parser.h"
#include "server/context/service_context.h"
#include "server/net/session.h"

namespace floodgate::server {

class RespSessionFactory final : public SessionFactory {
 public:
  RespSessionFactory(std::vector<LoopContext*> loops, resp::ParserLimits limits)
      : loops_(std::move(loops)), limits_(limits) {}
  std::unique_ptr<Session> NewSession(int loop_index, ConnectionRef self) override;
  std::string RefusalMessage() const override { return "-ERR max number of clients reached\r\n"; }

 private:
  std::vector<LoopContext*> loops_;
  resp::ParserLimits limits_;
};

}  // namespace floodgate::server
