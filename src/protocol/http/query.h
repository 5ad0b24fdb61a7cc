// query: the request target taken apart — path and query split, percent-
// decoding (RFC 3986; '+' as space in queries, as HTML forms and most clients
// encode), query parameter lookup, and path segments for routes such as
// /v1/sets/{key}.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/text.h"

namespace floodgate::http {

struct Target {
  std::string_view path;   // still percent-encoded
  std::string_view query;  // after '?', without it; "" when there is none
};

// Splits a request target: "/v1/check?rule=a" -> {"/v1/check", "rule=a"}.
// Absolute-form ("http://host:8080/v1/check?x", which proxies may send) loses
// its scheme and authority; an empty path there is "/". "*" and
// authority-form ("host:443") come back whole as the path. A "#fragment",
// which clients must not send, is dropped.
Target SplitTarget(std::string_view target);

// Replaces *out with `in` percent-decoded; with `plus_as_space`, '+' decodes
// to ' '. Returns false when a '%' is not followed by two hex digits (*out is
// then unspecified). Decoded bytes may be anything, NUL included.
// (common/text.h, shared with the store URLs and the subjects' keys.)
using text::PercentDecode;

// The path's segments after its leading '/', each decoded on its own, so an
// encoded slash stays inside its segment: "/v1/sets/a%2Fb" -> {"v1", "sets",
// "a/b"}; "/" -> {""}; "/a/" -> {"a", ""}. '+' stays '+'. nullopt when a
// segment has an invalid escape.
std::optional<std::vector<std::string>> DecodePathSegments(std::string_view path);

// Every "name=value" pair of `query`, in order, decoded. Pairs are separated
// by '&'; empty pairs are skipped; a pair without '=' has the value "".
// Returns false with *error (a detail sentence naming the pair) on an invalid
// escape.
bool ParseQuery(std::string_view query, std::vector<std::pair<std::string, std::string>>* params,
                std::string* error);

// The decoded value of the first parameter whose decoded name is `name`, or
// nullopt when there is none. An invalid escape anywhere in the query is an
// error: nullopt with *error set (the query cannot be read reliably). *error
// is left alone otherwise.
std::optional<std::string> QueryParam(std::string_view query, std::string_view name,
                                      std::string* error);

}  // namespace floodgate::http
