// HTTP/1.1 sessions: the JSON front (/v1/check, /healthz, /readyz, /metrics, /v1/rules, …).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/net/session.h"

namespace floodgate::server {

class HttpSessionFactory final : public SessionFactory {
 public:
  HttpSessionFactory(std::vector<LoopContext*> loops, http::ParserLimits limits)
      : loops_(std::move(loops)), limits_(limits) {}
  std::unique_ptr<Session> NewSession(int loop_index, ConnectionRef self) override;
  std::string RefusalMessage() const override;

 private:
  std::vector<LoopContext*> loops_;
  http::ParserLimits limits_;
};

}  // namespace floodgate::server
