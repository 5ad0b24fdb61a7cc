// RequestView: what a front tells the subjects (subjects.h) about one
// request, so that this layer reads requests without knowing HTTP's
// parser (protocol/ sits beside service/, not below it).
#pragma once

#include <string_view>

#include "absl/functional/function_ref.h"
#include "common/ip_address.h"

namespace floodgate::service {

class RequestView {
 public:
  virtual ~RequestView() = default;
  // The address the connection comes from.
  virtual IpAddress peer() const = 0;
  // The value of the first field named `name` (given lower-cased; fields
  // compare without case), or "" when there is none.
  virtual std::string_view Header(std::string_view name) const = 0;
  // Calls f with each field named `name`, in arrival order: a header a
  // proxy appends a line to (X-Forwarded-For) is read whole.
  virtual void ForEachHeader(std::string_view name,
                             absl::FunctionRef<void(std::string_view value)> f) const = 0;
  // The request's own method and request target ("/v1/check?rule=api").
  virtual std::string_view method() const = 0;
  virtual std::string_view target() const = 0;
};

}  // namespace floodgate::service
