// The dashboard's pages over HTTP, from the assets built into the binary
// (server/http/ui_assets.h):
//   GET|HEAD /ui          301 to /ui/
//   GET|HEAD /ui/         index.html
//   GET|HEAD /ui/{file}   that file of ui/; 404 problem+json for any other
// Every asset answer carries Content-Type, a strong ETag (304 when
// If-None-Match names it, or is "*"), Cache-Control: no-cache (revalidated
// on every use, so a new binary's dashboard is picked up at once), a
// Content-Security-Policy the dashboard satisfies (same origin only: no
// inline script or style, no eval, no framing), X-Content-Type-Options:
// nosniff and Referrer-Policy: no-referrer.
//
// The pages are public: they hold no data. The data they show comes from
// the admin routes, which check access themselves (docs/operations.md,
// "Dashboard").
#pragma once

#include <string>
#include <string_view>

#include "protocol/http/request_parser.h"
#include "server/context/service_context.h"
#include "server/http/http_route_table.h"

namespace floodgate::server {

// The policy every asset is served with.
inline constexpr std::string_view kUiContentSecurityPolicy =
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'";

// GET|HEAD /ui: the redirect to /ui/.
void UiRootRoute(const RouteCall& c);
// GET|HEAD /ui/ and /ui/{file}: a file of the dashboard, by its name as
// sent (asset names need no escapes, so none is decoded). Each appends the
// whole response to `out` and touches no shared state but the error
// counter.
void UiFileRoute(const RouteCall& c);

}  // namespace floodgate::server
