// The expiring sets over HTTP, /v1/sets/{key} (the key percent-encoded as
// one path segment):
//   POST   {"member":"m","ttl_ms":60000}  add or refresh a member
//   GET                                   the live members with their TTLs
//   GET    ?member=m                      whether m is a live member
//   DELETE ?member=m                      remove m
#pragma once

#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/http_routes.h"
#include "server/service_context.h"

namespace floodgate::server {

// Answers a request for the set `key` (already decoded) with query `query`.
void HandleSetRequest(LoopContext& loop, const http::Request& req, std::string_view key,
                      std::string_view query, const HttpAsync& async, std::string* out);

}  // namespace floodgate::server
