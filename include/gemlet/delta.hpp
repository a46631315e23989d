// gemlet's delta API: tensor-level patches between two GGUF files (the format: docs/delta.md), what
// `gemlet diff` / `gemlet patch` and a model store's update stand on, and file digests.
//
// In libgemlet (apps download files themselves, then verify and patch). Built only where OpenSSL's
// libcrypto is (the SHA-256): elsewhere every call fails with a message saying so. Calls are
// synchronous and reentrant; callbacks run on the calling thread. Output files are written under a
// temporary name beside the output and renamed: nothing appears at the output path on failure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gemlet/export.h"
#include "gemlet/status.hpp"

namespace gemlet::delta {

// True where this library was built with the delta format (false: every call below fails).
GEMLET_CXX_API bool Available();

struct DiffReport {
  uint64_t patch_bytes = 0;
  uint64_t new_file_bytes = 0;
  int tensors_total = 0;    // NEW's
  int tensors_changed = 0;  // in both by name, with other bytes: sent whole
  int tensors_added = 0;    // names OLD lacks (copied when OLD holds the same bytes under another name)
  int tensors_removed = 0;  // names NEW lacks
  int tensors_moved = 0;    // copied from an OLD tensor of another name (renamed, or equal to another)
  bool metadata_changed = false;
  uint64_t literal_bytes = 0;  // NEW's bytes the patch carries
  uint64_t copied_bytes = 0;   // NEW's bytes taken from OLD
  std::string old_sha256;
  std::string new_sha256;
};

// Matches NEW's tensors against OLD's by name and SHA-256 (a renamed or moved tensor is still
// copied) and writes a patch: NEW's header when it changed, the tensors OLD lacks, copy ops for the rest.
GEMLET_CXX_API Result<DiffReport> Diff(const std::string& old_gguf, const std::string& new_gguf, const std::string& patch_out);

struct ApplyReport {
  uint64_t bytes_written = 0;
  uint64_t bytes_copied = 0;   // from OLD
  uint64_t bytes_literal = 0;  // from the patch
  std::string sha256;          // NEW's, as checked
};

struct ApplyOptions {
  // Read OLD whole first and compare its SHA-256 with the patch's. A store that has just verified the
  // installed file may turn it off: each copied tensor's own digest still catches a wrong OLD.
  bool verify_old = true;
  // (bytes of NEW written, NEW's size); returning false cancels (kCancelled, nothing at new_out).
  std::function<bool(uint64_t done, uint64_t total)> progress{};
};

// Verifies the old file is the one the patch was made from (its SHA-256), rebuilds NEW through a
// temporary file beside new_out, checking each copied tensor's and each literal chunk's digest as
// it goes (memory stays at a few MiB whatever the tensors' sizes), checks NEW's SHA-256 recorded in
// the patch, then renames into place (replacing a file there) and syncs the file and the directory;
// nothing appears at new_out on any failure. Errors name the file and what failed.
GEMLET_CXX_API Result<ApplyReport> Apply(const std::string& old_gguf, const std::string& patch, const std::string& new_out);
GEMLET_CXX_API Result<ApplyReport> Apply(const std::string& old_gguf, const std::string& patch, const std::string& new_out,
                                     const ApplyOptions& options);

// A patch's header, read and checked (magic, version, its index's digest, its size) without
// applying it: for a store to see that a patch fits the installed file before downloading OLD's
// replacement or touching anything.
struct PatchInfo {
  uint32_t version = 0;
  uint64_t old_size = 0;
  std::string old_sha256;
  uint64_t new_size = 0;
  std::string new_sha256;
  uint64_t patch_bytes = 0;
  uint64_t literal_bytes = 0;  // NEW's bytes the patch carries
  uint64_t copied_bytes = 0;   // NEW's bytes taken from OLD
};
GEMLET_CXX_API Result<PatchInfo> ReadPatchInfo(const std::string& patch);

// The SHA-256 of a whole file, 64 lowercase hex digits.
GEMLET_CXX_API Result<std::string> FileSha256(const std::string& path);
// Ok when the file's SHA-256 is `sha256_hex` (either case); otherwise an error naming both digests.
GEMLET_CXX_API Status VerifyFile(const std::string& path, const std::string& sha256_hex);

}  // namespace gemlet::delta
