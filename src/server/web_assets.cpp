// Looks up the embedded web files; their bytes come from the generated web_assets_data.inc.
#include "server/web_assets.h"

#include <iterator>

namespace tessera::server {

namespace {
#include "web_assets_data.inc"
}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  for (const auto& a : kWebAssets) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace tessera::server
