// HttpRequestView: an HTTP request as the subjects room reads it
// (service/subjects/request_view.h): its fields, line and peer.
#pragma once

#include <optional>
#include <string_view>

#include "common/text.h"
#include "protocol/http/request_parser.h"
#include "server/net/session.h"
#include "service/subjects/request_view.h"

namespace floodgate::server {

class HttpRequestView final : public service::RequestView {
 public:
  // `req` and the connection `self` names must outlive this.
  HttpRequestView(const http::Request& req, const ConnectionRef& self) : req_(req), self_(self) {}

  // Looked up once, when a rule reads it: most checks never do.
  IpAddress peer() const override {
    if (!peer_) peer_ = self_.Peer().Ip();
    return *peer_;
  }
  std::string_view Header(std::string_view name) const override { return req_.Header(name); }
  void ForEachHeader(std::string_view name,
                     absl::FunctionRef<void(std::string_view)> f) const override {
    for (const auto& [field, value] : req_.headers) {
      if (text::EqualsIgnoreCase(field, name)) f(value);
    }
  }
  std::string_view method() const override { return req_.method; }
  std::string_view target() const override { return req_.target; }

 private:
  const http::Request& req_;
  const ConnectionRef& self_;
  mutable std::optional<IpAddress> peer_;
};

}  // namespace floodgate::server
