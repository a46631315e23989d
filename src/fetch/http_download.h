// One file over HTTP(S) with libcurl, resumed with Range requests across interruptions and
// processes, retried with backoff; and small documents (manifests) into memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gemlet/fetch.hpp"

namespace gemlet::fetch {

struct DownloadRequest {
  std::string url;
  // The file the bytes go to. It is resumed when it holds a prefix of this URL's body (its sidecar
  // partial + ".json" says which URL, digest and server validator it came from).
  std::string partial;
  std::string expected_sha256;  // "": unknown
  uint64_t expected_size = 0;   // 0: unknown
  std::vector<std::string> headers;  // extra request headers ("Authorization: Bearer ...")
};

struct DownloadOutcome {
  uint64_t size = 0;
  // Some of the bytes came from an earlier transfer (this process's or another's): a digest
  // mismatch may then be the old prefix's fault, so the caller tries once more from the start.
  bool resumed = false;
};

Result<DownloadOutcome> Download(const DownloadRequest& request, const FetchOptions& options);
// Removes a partial download and its sidecar.
void DiscardPartial(const std::string& partial);

// What the Hugging Face hub says of a file before any byte of it is fetched: for an LFS file, its
// SHA-256 (X-Linked-Etag) and size (X-Linked-Size), from a HEAD of its resolve/ URL without following
// the redirect to the CDN. sha256 is "" when the hub gives none (a file kept in git itself).
struct HubFileInfo {
  std::string sha256;
  uint64_t size = 0;
};
Result<HubFileInfo> HeadHubFile(const std::string& url, const std::vector<std::string>& headers, const FetchOptions& options);

// A small document (at most 16 MiB): http(s) through libcurl, file:// and paths read directly.
Result<std::string> FetchText(const std::string& url, const std::vector<std::string>& headers, const FetchOptions& options);

}  // namespace gemlet::fetch
