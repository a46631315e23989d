// The chat page served at "/" (the files of src/server/web/), compiled into the binary.
#pragma once

#include <span>
#include <string_view>

namespace gemlet::server {

struct WebAsset {
  std::string_view path;          // the URL path it is served at: "/index.html", "/app.js"
  std::string_view content_type;  // for the Content-Type header: "text/html; charset=utf-8"
  std::string_view body;          // the file's bytes, as they are in the source tree
};

// Every embedded file, in the order src/server/web/CMakeLists.txt lists them.
std::span<const WebAsset> WebAssets();

// The file served at a URL path ("/" is "/index.html"), or nullptr. The path is compared exactly
// (no query string, no percent-decoding, no "..": nothing outside the table can be named).
const WebAsset* FindWebAsset(std::string_view path);

// The Content-Security-Policy header to send with the page: scripts, styles and images from the
// page's own files only (and blob: images and media, the thumbnails of the photos and the players
// of the clips the user attaches or records, which only the page's own script can make: model output
// is never HTML), requests to its own origin
// only, no framing. index.html carries the same policy in a <meta> tag (less frame-ancestors, which
// a <meta> cannot set).
inline constexpr std::string_view kWebContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; media-src 'self' blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace gemlet::server
