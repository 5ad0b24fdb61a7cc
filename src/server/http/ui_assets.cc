// The lookup over the generated asset table (the table itself is written at
// build time: cmake/embed_ui.cmake). A handful of files: a linear scan.
#include "server/http/ui_assets.h"

namespace floodgate::server {

const UiAsset* FindUiAsset(std::string_view path) {
  for (const UiAsset& asset : UiAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace floodgate::server
