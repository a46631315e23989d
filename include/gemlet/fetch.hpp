// Downloading models into the store (gemlet/store.hpp) over HTTP(S): `gemlet pull` and
// `gemlet update`. In the gemlet_fetch library (libcurl), apart from libgemlet and the store, so an
// app that downloads by itself links no HTTP client.
//
// A download resumes with a Range request after any interruption, in this process (retries with
// backoff) or a later one (the partial file and what the server said about it stay in the store's
// .partial folder); it is checked against its SHA-256 before it is installed, and a download whose
// digest does not match is discarded whole. Proxies come from the usual environment variables
// (http_proxy, https_proxy, no_proxy), as libcurl reads them. Guarantees: docs/store.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gemlet/status.hpp"
#include "gemlet/store.hpp"

namespace gemlet {

struct FetchProgress {
  uint64_t done = 0;   // bytes of the file on disk so far
  uint64_t total = 0;  // 0: unknown
  double bytes_per_second = 0;  // of this transfer
  bool verifying = false;  // hashing the finished file (done/total are the bytes hashed)
};

struct FetchOptions {
  std::string store_dir;  // "": ModelStore::DefaultDir()
  std::string sha256;     // the digest the file must have ("" for a NAME: the manifest's)
  std::string name;       // install as this name (default: from the URL's file name, or the NAME)
  std::string version;    // install as this version (default: the manifest's, else the digest's first 12 digits)
  // Where NAMEs are looked up: a manifest's URL or path. "": $GEMLET_MANIFEST, else the manifest
  // the name was installed from.
  std::string manifest;
  // Where short names ("gemma3-1b") are looked up when no manifest is given: a catalog file. "":
  // $GEMLET_CATALOG, else catalog.json in the store's folder, else the catalog built in (a copy of
  // models/catalog.json). A catalog maps names to hf:// or https:// sources, with or without digests.
  std::string catalog;
  // A file whose SHA-256 no one gave (no manifest, no `sha256`, no digest from the Hugging Face hub)
  // is refused unless this is set; then it is installed with the digest of the bytes that came.
  bool trust_unverified = false;
  // A PEM file of certificate authorities to trust for https instead of the system's (a company
  // proxy's own CA, a test server's); "": the system's.
  std::string ca_file;
  bool keep_old = false;  // update: keep the replaced version for rollback
  // pull of a catalog NAME whose entry names towers (an mmproj): fetch them too, as NAME-mmproj.
  bool with_mmproj = true;
  int retries = 5;        // attempts in a row that get no byte further before giving up
  int retry_delay_ms = 500;  // the first pause between attempts; doubled each time, at most 30 s
  int stall_seconds = 30;    // a transfer that receives nothing this long is retried
  uint64_t assume_free_bytes = 0;  // tests: the free space to assume instead of asking the filesystem
  std::function<void(const FetchProgress&)> progress;  // a few times a second at most
  std::function<void(const std::string&)> log;         // one-line notes: resuming, retrying, fallbacks
};

struct PullResult {
  std::string name, version, path, sha256;
  uint64_t size = 0;
  bool already_installed = false;  // nothing was downloaded
  // The model's towers, pulled with it (FetchOptions::with_mmproj), installed as NAME-mmproj.
  std::shared_ptr<PullResult> mmproj;
};

// `what`: an http(s) URL, hf://ORG/REPO/FILE[@REV], NAME[:VERSION] from the manifest, or a NAME of
// the catalog. Installs and activates it (the version it replaces goes, unless keep_old). The bytes
// are checked against a SHA-256 from `sha256`, the manifest, the catalog or, for hf:// sources, the
// hub's record of the LFS file (fetched before the download), else refused unless trust_unverified.
// https URLs are not followed to http.
Result<PullResult> Pull(const std::string& what, const FetchOptions& options);

struct UpdateResult {
  std::string name, from, to, path;
  bool updated = false;  // false: already the newest
  std::string how;       // "patch", "full download", "installed already"
};

// Installs and activates the newest version NAME's manifest lists (a patch when the manifest
// offers one for the active version and this build can apply it, else the whole file). The old
// version stays until the new one is verified and active; then it goes unless keep_old.
Result<UpdateResult> Update(const std::string& name, const FetchOptions& options);

// A manifest from a URL (http, https, file) or a path.
Result<Manifest> FetchManifest(const std::string& source, const FetchOptions& options);

// hf://ORG/REPO/FILE[@REV] to $HF_ENDPOINT/ORG/REPO/resolve/REV/FILE (HF_ENDPOINT default
// https://huggingface.co, REV default main).
Result<std::string> ResolveHfUrl(const std::string& ref);

}  // namespace gemlet
