// The dashboard's files (ui/), built into the binary: cmake/embed_ui.cmake
// turns each file into one UiAsset of a generated source, so a binary
// serves the dashboard it was built with and nothing else.
#pragma once

#include <span>
#include <string_view>

namespace floodgate::server {

// One file of ui/. Every view points at static storage (the program's
// lifetime). Immutable: thread-safe.
struct UiAsset {
  std::string_view path;          // the file's name in ui/, e.g. "app.js"
  std::string_view content_type;  // from its extension, e.g. "text/css; charset=utf-8"
  std::string_view body;          // its exact bytes
  std::string_view etag;          // a strong validator, quoted: "\"<32 hex digits>\""
};

// Every asset, in name order (defined by the generated source).
std::span<const UiAsset> UiAssets();

// The asset named `path` (a file name of ui/, "index.html"), or null.
const UiAsset* FindUiAsset(std::string_view path);

}  // namespace floodgate::server
