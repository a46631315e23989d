// MappedFile: a read-only memory map of a whole file; weights are read in place, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace gemlet {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  // The `length` bytes from `offset` of an open file (a model stored inside an Android APK). fd is
  // not kept; `label` names the range in messages.
  static Result<std::unique_ptr<MappedFile>> OpenRange(int fd, uint64_t offset, uint64_t length, std::string label);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Bytes of this mapping currently resident in RAM (mincore), for memory reports.
  size_t ResidentBytes() const;

  // For a part of the file read a few rows at a time, at random (Gemma 4's per-layer embedding
  // table): no readahead around the rows that are read.
  void AdviseRandomAccess(const uint8_t* begin, size_t size) const;
  // Unmaps [begin, begin + size) from this process after it was read; the pages stay in the page
  // cache and fault back in when read again. A fault maps a whole large folio (up to 2 MiB) around
  // the bytes read, so the span released is widened to 2 MiB boundaries, kept inside the region
  // [region, region + region_size) the caller owns (e.g. one tensor). Keeps a rarely read region
  // out of the resident set. Ranges outside the mapping are ignored.
  void ReleasePagesAfterRead(const uint8_t* begin, size_t size, const uint8_t* region, size_t region_size) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  // The mapping itself: it starts on a page boundary, at or before data_ (OpenRange maps from the
  // page holding `offset`).
  uint8_t* map_base_ = nullptr;
  size_t map_size_ = 0;
};

}  // namespace gemlet
