// The web page's files, compiled into the binary at build time (see embed_web_assets.cmake): serving the page
// needs no build step, no files on disk and no network.
#pragma once

#include <string_view>

namespace tessera::server {

struct WebAsset {
  std::string_view path;  // as requested: "/" for index.html, "/app.js", ...
  std::string_view content_type;
  std::string_view body;
};

// nullptr when there is no such file.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace tessera::server
