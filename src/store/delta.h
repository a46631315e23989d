// Tensor-level patches between two GGUF files (docs/delta.md): Diff writes one, Apply rebuilds NEW
// from OLD and the patch with every chunk's digest and NEW's whole digest checked.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace gemlet::store {

// The patch format's constants (docs/delta.md has the byte layout).
inline constexpr char kDeltaMagic[8] = {'G', 'E', 'M', 'D', 'E', 'L', 'T', 'A'};
inline constexpr uint32_t kDeltaVersion = 1;
inline constexpr size_t kDeltaHeaderBytes = 144;
inline constexpr size_t kDeltaOpBytes = 56;  // an op record before its name
inline constexpr uint32_t kDeltaDefaultChunk = 1u << 20;
// Apply refuses larger chunks: its buffer is one chunk, and a hostile patch must not size it.
inline constexpr uint32_t kDeltaMaxChunk = 64u << 20;

struct DeltaDiffOptions {
  uint32_t chunk_size = kDeltaDefaultChunk;  // literal bytes per digest: the unit a corruption is named by
};

struct DeltaDiffReport {
  uint64_t patch_bytes = 0;
  uint64_t new_file_bytes = 0;
  int tensors_total = 0;    // NEW's
  int tensors_changed = 0;  // in both by name, bytes differ: sent whole
  int tensors_added = 0;    // names OLD lacks (copied if OLD holds the same bytes under another name)
  int tensors_removed = 0;  // names NEW lacks
  int tensors_moved = 0;    // copied from an OLD tensor of another name
  bool metadata_changed = false;  // a key added, removed or with another value
  uint64_t literal_bytes = 0;     // NEW's bytes the patch carries
  uint64_t copied_bytes = 0;      // NEW's bytes taken from OLD
  std::string old_sha256, new_sha256;
};

Result<DeltaDiffReport> DiffGguf(const std::string& old_gguf, const std::string& new_gguf,
                                 const std::string& patch_out, const DeltaDiffOptions& options = {});

// What a patch says about itself, read and checked (magic, version, the index's digest, sizes)
// without OLD and without applying it.
struct DeltaPatchInfo {
  uint32_t version = 0;
  uint32_t chunk_size = 0;
  uint64_t old_size = 0, new_size = 0;
  std::string old_sha256, new_sha256;
  uint64_t patch_bytes = 0;
  uint64_t n_ops = 0, n_copy = 0, n_literal = 0, n_zero = 0;
  uint64_t literal_bytes = 0, copied_bytes = 0;
};
Result<DeltaPatchInfo> ReadDeltaPatchInfo(const std::string& patch);

struct DeltaApplyOptions {
  // Reads OLD whole first and compares its SHA-256 with the patch's. A store that has just verified
  // the installed file may skip it: each copied tensor's own digest still catches a wrong OLD.
  bool verify_old = true;
  // (bytes of NEW written, NEW's size); false cancels (kCancelled, nothing at new_out).
  std::function<bool(uint64_t done, uint64_t total)> progress;
};

struct DeltaApplyReport {
  uint64_t bytes_written = 0;
  uint64_t bytes_copied = 0;   // from OLD
  uint64_t bytes_literal = 0;  // from the patch
  std::string sha256;
};

// NEW is written to a temporary file beside new_out, fsynced, checked against the patch's SHA-256 of
// NEW, renamed over new_out and the directory fsynced; on any failure nothing appears at new_out
// (a file already there stays as it was).
Result<DeltaApplyReport> ApplyDelta(const std::string& old_gguf, const std::string& patch, const std::string& new_out,
                                    const DeltaApplyOptions& options = {});

}  // namespace gemlet::store
