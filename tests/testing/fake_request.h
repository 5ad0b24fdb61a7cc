// FakeRequest: a request as the subjects room reads it
// (service/subjects/request_view.h), written out field by field: the tests
// of the subjects' layer read requests without an HTTP parser.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/ip_address.h"
#include "common/text.h"
#include "service/subjects/request_view.h"

namespace floodgate::testing {

class FakeRequest final : public service::RequestView {
 public:
  FakeRequest() : peer_(IpAddress::FromV4(0xcb007107)) {}  // 203.0.113.7

  // Setters return *this, so a request is written in one expression.
  FakeRequest& Peer(std::string_view address) {
    peer_ = IpAddress::Parse(address).value();
    return *this;
  }
  // Appends a field, name as sent (any case).
  FakeRequest& Add(std::string name, std::string value) {
    headers_.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  FakeRequest& Method(std::string method) {
    method_ = std::move(method);
    return *this;
  }
  FakeRequest& Target(std::string target) {
    target_ = std::move(target);
    return *this;
  }

  IpAddress peer() const override { return peer_; }
  std::string_view Header(std::string_view name) const override {
    for (const auto& [field, value] : headers_) {
      if (text::EqualsIgnoreCase(field, name)) return value;
    }
    return {};
  }
  void ForEachHeader(std::string_view name,
                     absl::FunctionRef<void(std::string_view)> f) const override {
    for (const auto& [field, value] : headers_) {
      if (text::EqualsIgnoreCase(field, name)) f(value);
    }
  }
  std::string_view method() const override { return method_; }
  std::string_view target() const override { return target_; }

 private:
  IpAddress peer_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::string method_ = "GET";
  std::string target_ = "/v1/check?rule=api";
};

}  // namespace floodgate::testing
