// MappedFile implementation over POSIX mmap.
#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace gemlet {

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::Error("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error("'" + path + "' is not a regular file");
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Status::Error("cannot map '" + path + "': " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->map_base_ = static_cast<uint8_t*>(p);
    file->map_size_ = file->size_;
  }
  ::close(fd);  // the mapping keeps its own reference
  return file;
}

Result<std::unique_ptr<MappedFile>> MappedFile::OpenRange(int fd, uint64_t offset, uint64_t length, std::string label) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::Error("cannot stat " + label + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error(label + " is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (length == 0 || offset > file_size || length > file_size - offset) {
    return Status::Error(StatusCode::kInvalidArgument, label + ": bytes " + std::to_string(offset) + ".." +
                                                           std::to_string(offset + length) + " are not inside its " +
                                                           std::to_string(file_size) + "-byte file");
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;  // mmap takes page-aligned offsets only
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = std::move(label);
  file->map_size_ = static_cast<size_t>(length + (offset - start));
  void* p = ::mmap(nullptr, file->map_size_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) return Status::Error("cannot map " + file->path_ + ": " + std::strerror(errno));
  file->map_base_ = static_cast<uint8_t*>(p);
  file->data_ = file->map_base_ + (offset - start);
  file->size_ = static_cast<size_t>(length);
  return file;
}

MappedFile::~MappedFile() {
  if (map_base_ != nullptr) ::munmap(map_base_, map_size_);
}

size_t MappedFile::ResidentBytes() const {
  if (map_base_ == nullptr) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (map_size_ + page - 1) / page;
  std::vector<unsigned char> in_core(pages);
  if (::mincore(map_base_, map_size_, in_core.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char c : in_core) resident += (c & 1) ? page : 0;
  return resident < size_ ? resident : size_;
}

namespace {

// The whole pages that hold [begin, begin + size), clipped to [map_begin, map_end); false if empty.
bool PageSpan(const uint8_t* begin, size_t size, const uint8_t* map_begin, size_t map_size, uintptr_t* lo, uintptr_t* hi) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = std::max(reinterpret_cast<uintptr_t>(begin), reinterpret_cast<uintptr_t>(map_begin));
  const uintptr_t e = std::min(reinterpret_cast<uintptr_t>(begin) + size, reinterpret_cast<uintptr_t>(map_begin) + map_size);
  if (e <= b) return false;
  *lo = b / page * page;  // the mapping starts on a page boundary, so these stay inside it
  *hi = (e + page - 1) / page * page;
  return true;
}

}  // namespace

// Both are advice: if the kernel refuses, reads stay correct and only memory use differs.
void MappedFile::AdviseRandomAccess(const uint8_t* begin, size_t size) const {
  uintptr_t lo = 0, hi = 0;
  if (PageSpan(begin, size, data_, size_, &lo, &hi)) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_RANDOM);
}

void MappedFile::ReleasePagesAfterRead(const uint8_t* begin, size_t size, const uint8_t* region, size_t region_size) const {
  constexpr uintptr_t kLargestFolio = uintptr_t{2} << 20;
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin), r = reinterpret_cast<uintptr_t>(region);
  const uintptr_t lo = std::max(r, b / kLargestFolio * kLargestFolio);
  const uintptr_t hi = std::min(r + region_size, (b + size + kLargestFolio - 1) / kLargestFolio * kLargestFolio);
  if (hi <= lo) return;
  // MADV_DONTNEED on a read-only shared file mapping drops only our page-table entries: the data
  // is re-read from the page cache (or the file) on the next access, never lost.
  uintptr_t page_lo = 0, page_hi = 0;
  if (PageSpan(reinterpret_cast<const uint8_t*>(lo), hi - lo, data_, size_, &page_lo, &page_hi)) {
    ::madvise(reinterpret_cast<void*>(page_lo), page_hi - page_lo, MADV_DONTNEED);
  }
}

}  // namespace gemlet
