// The dashboard's routes. The assets never change while the process runs,
// so a strong ETag from their digest (computed at build time) is all the
// caching they need: Cache-Control: no-cache makes the browser ask each
// time and a 304 answers without the body.
#include "server/http/http_ui_routes.h"

#include "protocol/http/response.h"
#include "server/http/http_routes.h"
#include "server/http/ui_assets.h"

namespace floodgate::server {
namespace {

constexpr std::string_view kRoot = "/ui";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// If-None-Match (RFC 9110 13.1.2): "*" or a list of entity tags, compared
// weakly (a W/ prefix is ignored).
bool NoneMatchNames(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = Trim(header.substr(0, comma));
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

void ServeAsset(const http::Request& req, const UiAsset& asset, std::string* out) {
  const bool not_modified =
      req.HasHeader("if-none-match") && NoneMatchNames(req.Header("if-none-match"), asset.etag);
  const http::HeaderField headers[] = {
      {"Content-Type", asset.content_type},  {"ETag", asset.etag},
      {"Cache-Control", "no-cache"},         {"Content-Security-Policy", kUiContentSecurityPolicy},
      {"X-Content-Type-Options", "nosniff"}, {"Referrer-Policy", "no-referrer"},
  };
  if (not_modified) {
    http::AppendResponse(out, 304, "Not Modified", headers, "", req.keep_alive);
    return;
  }
  http::AppendResponse(out, 200, "", headers, asset.body, req.keep_alive);
}

}  // namespace

void UiRootRoute(const RouteCall& c) {
  const http::HeaderField headers[] = {{"Location", "/ui/"}, {"Cache-Control", "no-cache"}};
  http::AppendResponse(c.out, 301, "Moved Permanently", headers, "", c.req.keep_alive);
}

void UiFileRoute(const RouteCall& c) {
  LoopContext& loop = c.loop;
  const http::Request& req = c.req;
  const std::string_view path = c.path;
  std::string* out = c.out;
  std::string_view name = path.substr(kRoot.size() + 1);
  if (name.empty()) name = "index.html";
  const UiAsset* asset = FindUiAsset(name);  // one segment: the pattern's
  if (asset == nullptr) {
    return AppendRouteProblem(
        loop, req.keep_alive, 404, "not_found",
        "no dashboard file " + http::QuoteForDetail(path, 80) + "; the dashboard is /ui/", out);
  }
  ServeAsset(req, *asset, out);
}

}  // namespace floodgate::server
