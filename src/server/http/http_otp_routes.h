// OTP over HTTP:
//   POST /v1/otp/issue   {"subject":"+15550100"}
//     200 {"subject":…,"code":"012345","expires_in_ms":300000}
//     202 {"subject":…,"delivery":"queued","expires_in_ms":300000} (delivery URL)
//     429 problem+json with Retry-After past the issue limit
//   POST /v1/otp/verify  {"subject":"+15550100","code":"012345"}
//     200 {"subject":…,"valid":true|false}
//     429 problem+json with Retry-After past the verify limit
// 400 for bad input, 404 when OTP is not configured, 503 when the store or
// the delivery queue fails.
#pragma once

#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/http/http_route_table.h"

namespace floodgate::server {

// POST /v1/otp/issue and POST /v1/otp/verify.
void OtpIssueRoute(const RouteCall& c);
void OtpVerifyRoute(const RouteCall& c);

}  // namespace floodgate::server
