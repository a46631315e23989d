// File-system steps the store's guarantees rest on: durable atomic replacement of small files,
// synced renames, advisory locks that a killed process gives back.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace gemlet::store {

// Writes `bytes` to path.tmp, syncs it, renames it over `path` and syncs the folder: a reader (or
// a crash) sees the old contents or the new, never a mix.
Status WriteFileAtomic(const std::string& path, const std::string& bytes);
Result<std::string> ReadSmallFile(const std::string& path);
// Syncs a folder, so that the renames and unlinks in it survive a power loss.
Status SyncDir(const std::string& dir);
Status SyncFile(const std::string& path);

// An exclusive flock(2) on a file (created when missing), released by the destructor or when the
// process dies, so kill -9 never leaves a store locked.
class FileLock {
 public:
  // blocking: wait for the lock; otherwise fail at once when another process holds it.
  static Result<FileLock> Acquire(const std::string& path, bool blocking);
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Free bytes for an unprivileged writer on the filesystem holding `dir`.
Result<uint64_t> FreeBytes(const std::string& dir);

}  // namespace gemlet::store
