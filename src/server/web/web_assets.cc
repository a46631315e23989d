// Looks up the embedded chat page's files by URL path (the table itself is generated at build time).
#include "server/web/web_assets.h"

namespace gemlet::server {

const WebAsset* FindWebAsset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& asset : WebAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace gemlet::server
