// The packed-weight cache file: validate and map, or build (slab by slab, through pwrite) and rename.
#include "kernels/packed_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "base/mapped_file.h"

namespace gemlet {

uint64_t Fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

namespace {

constexpr char kMagic[8] = {'G', 'M', 'L', 'T', 'P', 'A', 'C', 'K'};
// Bumped whenever a packed layout (packed-inl.h, matmul_neon.cc) or this file's format changes.
// 3: AVX3_DL Q6_K in triples (session 15); 4: AVX3_DL packs Q5_K, Q3_K; 5: AVX3_DL packs Q2_K (a
// version-4 cache holds Q2_K matrices unpacked: stale, and turned away by its version before its entries);
// 6: AVX2 and AVX2_VNNI pack Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K (AVX3_DL's layouts, packed_x86.h).
constexpr uint32_t kFormatVersion = 6;
constexpr uint64_t kAlign = 16384;

struct Entry {
  uint32_t type = 0;
  uint32_t reserved = 0;
  int64_t n_in = 0, n_out = 0;
  uint64_t offset = 0, bytes = 0;
};

uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The header as bytes: everything before the data, its checksum last.
class HeaderWriter {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  template <class T>
  void Put(T v) { Bytes(&v, sizeof v); }
  void String(const std::string& s) {
    Put(static_cast<uint32_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  std::vector<uint8_t> Finish() {
    Put(Fnv1a64(out_.data(), out_.size()));
    return std::move(out_);
  }

 private:
  std::vector<uint8_t> out_;
};

class HeaderReader {
 public:
  HeaderReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool Bytes(void* out, size_t n) {
    if (n > n_ - at_) return false;
    std::memcpy(out, p_ + at_, n);
    at_ += n;
    return true;
  }
  template <class T>
  bool Get(T* v) { return Bytes(v, sizeof *v); }
  bool String(std::string* s) {
    uint32_t len = 0;
    if (!Get(&len) || len > n_ - at_) return false;
    s->assign(reinterpret_cast<const char*>(p_ + at_), len);
    at_ += len;
    return true;
  }
  size_t at() const { return at_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

// What the file must say for this model and table: one entry per remembered matrix, in order
// (bytes 0 for a matrix the table does not pack).
std::vector<Entry> Expected(const PackedWeightStore& store, const KernelTable& kernels, uint64_t* data_end,
                            size_t header_bytes) {
  std::vector<Entry> entries;
  uint64_t offset = AlignUp(header_bytes);
  for (const WeightMatrix& w : store.matrices()) {
    Entry e;
    e.type = static_cast<uint32_t>(w.type);
    e.n_in = w.n_in;
    e.n_out = w.n_out;
    const PackedLayout* layout = kernels.packed_layout(w.type);
    const size_t group = layout != nullptr ? layout->group_bytes(w) : 0;
    if (group > 0) {
      e.bytes = static_cast<uint64_t>(w.n_out / PackedWeights::kGroupRows) * group;
      e.offset = offset;
      offset = AlignUp(offset + e.bytes);
    }
    entries.push_back(e);
  }
  *data_end = offset;
  return entries;
}

std::vector<uint8_t> Header(const std::string& identity, const std::string& origin, const KernelTable& kernels,
                            uint64_t file_size, const std::vector<Entry>& entries) {
  HeaderWriter h;
  h.Bytes(kMagic, sizeof kMagic);
  h.Put(kFormatVersion);
  h.Put(file_size);
  h.String(identity);
  h.String(origin);
  h.String(kernels.name);
  h.Put(static_cast<uint32_t>(entries.size()));
  for (const Entry& e : entries) h.Put(e);
  return h.Finish();
}

size_t HeaderBytes(const std::string& identity, const std::string& origin, const KernelTable& kernels,
                   size_t n_entries) {
  return sizeof kMagic + 4 + 8 + 4 + identity.size() + 4 + origin.size() + 4 + std::strlen(kernels.name) + 4 +
         n_entries * sizeof(Entry) + 8;
}

// Maps the file and points the slots into it; false (nothing changed) unless everything matches.
bool TryAdopt(PackedWeightStore& store, const KernelTable& kernels, const std::string& path,
              const std::string& identity, const std::string& origin) {
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return false;
  const MappedFile& f = **mapped;
  const std::vector<WeightMatrix>& matrices = store.matrices();
  const size_t header_bytes = HeaderBytes(identity, origin, kernels, matrices.size());
  if (f.size() < header_bytes) return false;
  HeaderReader r(f.data(), header_bytes);
  char magic[8];
  uint32_t version = 0, n = 0;
  uint64_t size = 0, checksum = 0;
  std::string id, from, table;
  if (!r.Bytes(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !r.Get(&version) || version != kFormatVersion ||
      !r.Get(&size) || size != f.size() || !r.String(&id) || id != identity || !r.String(&from) || from != origin ||
      !r.String(&table) ||
      table != kernels.name || !r.Get(&n) || n != matrices.size()) {
    return false;
  }
  uint64_t data_end = 0;
  const std::vector<Entry> want = Expected(store, kernels, &data_end, header_bytes);
  if (data_end != f.size()) return false;
  for (const Entry& e : want) {
    Entry got;
    if (!r.Get(&got) || std::memcmp(&got, &e, sizeof e) != 0) return false;
  }
  const size_t summed = r.at();
  if (!r.Get(&checksum) || checksum != Fnv1a64(f.data(), summed)) return false;
  // Decode streams all of it every token: mapped in 2 MiB pages, as the anonymous packed copies are,
  // it spares the TLB a miss per 4 KiB. Measured on E2B: 60% of the file PMD-mapped without this,
  // 7% slower decode than packing in memory; all of it with this, the same speed (bench/RESULTS.md).
  ::madvise(const_cast<uint8_t*>(f.data()), f.size(), MADV_HUGEPAGE);
  for (size_t i = 0; i < matrices.size(); ++i) {
    if (want[i].bytes == 0) continue;
    matrices[i].packed->Adopt(f.data() + want[i].offset, want[i].bytes, *kernels.packed_layout(matrices[i].type));
  }
  store.KeepMapping(std::move(mapped).value());
  return true;
}

Status WriteAll(int fd, const uint8_t* p, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::Error("cannot write " + path + ": " + std::strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

// Packs every matrix the table has a layout for straight into a new file: slabs of about 8 MiB in
// memory at a time, the rows' file pages released after each (the weights are never resident twice).
Status Build(const PackedWeightStore& store, const KernelTable& kernels, const std::string& path,
             const std::string& identity, const std::string& origin, ThreadPool& pool) {
  const std::vector<WeightMatrix>& matrices = store.matrices();
  const size_t header_bytes = HeaderBytes(identity, origin, kernels, matrices.size());
  uint64_t data_end = 0;
  const std::vector<Entry> entries = Expected(store, kernels, &data_end, header_bytes);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error("cannot create " + tmp + ": " + std::strerror(errno));
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  // Claim the space first: a full disk fails here, not halfway through.
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(data_end)); e != 0) {
    return fail(Status::Error("cannot reserve " + std::to_string(data_end >> 20) + " MiB for " + tmp + ": " +
                              std::strerror(e)));
  }
  std::vector<uint8_t> slab;
  const MappedFile* source = store.source();
  for (size_t i = 0; i < matrices.size(); ++i) {
    const Entry& e = entries[i];
    if (e.bytes == 0) continue;
    const WeightMatrix& w = matrices[i];
    const PackedLayout& layout = *kernels.packed_layout(w.type);
    const size_t group = layout.group_bytes(w), n_groups = static_cast<size_t>(w.n_out / PackedWeights::kGroupRows);
    const size_t per_slab = std::max<size_t>(1, (size_t{8} << 20) / group);
    const size_t stored_group = static_cast<size_t>(PackedWeights::kGroupRows) * w.row_bytes;
    for (size_t g0 = 0; g0 < n_groups; g0 += per_slab) {
      const size_t g1 = std::min(n_groups, g0 + per_slab);
      slab.resize((g1 - g0) * group);
      pool.ParallelForDynamic(g1 - g0, 1, [&](size_t begin, size_t end, int) {
        layout.pack(w, g0 + begin, g0 + end, slab.data() + begin * group);
      });
      if (Status s = WriteAll(fd, slab.data(), slab.size(), e.offset + g0 * group, tmp); !s.ok()) return fail(s);
      if (source != nullptr) {
        const uint8_t* rows = w.data + g0 * stored_group;
        source->ReleasePagesAfterRead(rows, (g1 - g0) * stored_group, rows, (g1 - g0) * stored_group);
      }
    }
  }
  const std::vector<uint8_t> header = Header(identity, origin, kernels, data_end, entries);
  if (Status s = WriteAll(fd, header.data(), header.size(), 0, tmp); !s.ok()) return fail(s);
  if (::fdatasync(fd) != 0) return fail(Status::Error("cannot write " + tmp + ": " + std::strerror(errno)));
  // The page cache now holds the file in the small folios the writes made; dropped, it is read back
  // through the mapping in 2 MiB ones (MADV_HUGEPAGE in TryAdopt), as a later start reads it.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::Error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::Error("cannot rename " + tmp + " to " + path + ": " + std::strerror(e));
  }
  return Status::Ok();
}

// After a build: other cache files in the folder made from the same model path for an older version
// of it (another identity) are removed; an updated model would otherwise leave gigabytes behind.
// Files this format cannot read, or made from other paths, are left alone.
void RemoveOlderVersions(const std::string& path, const std::string& identity, const std::string& origin) {
  if (origin.empty()) return;
  const std::filesystem::path ours(path);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ours.parent_path(), ec)) {
    if (e.path().extension() != ".gpack" || e.path() == ours) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> head(4096);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    HeaderReader r(head.data(), static_cast<size_t>(in.gcount()));
    char magic[8];
    uint32_t version = 0;
    uint64_t size = 0;
    std::string id, from;
    if (!r.Bytes(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !r.Get(&version) || version != kFormatVersion ||
        !r.Get(&size) || !r.String(&id) || !r.String(&from)) {
      continue;
    }
    if (from == origin && id != identity) std::filesystem::remove(e.path(), ec);
  }
}

// The model file's rows that the cache replaces are not read again (but for a tied embedding's few
// rows per token): dropped from the page cache, they leave the memory to the packed bytes. Left there
// (the file was just built from, downloaded, verified, or read by another tool), they pushed the
// packed pages out as PrepareWeights read them in: on the 26B-A4B after its file had been read
// twice, the first evaluation took 8.5 s after a 12 s PrepareWeights. The page cache keeps what a
// process maps (the header and norms this one read at load, and the folios around them).
void DropReplacedRows(const PackedWeightStore& store, const std::string& model_path) {
  const MappedFile* source = store.source();
  if (source == nullptr || model_path.empty()) return;
  const int fd = ::open(model_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == source->size()) {
    for (const auto& [begin, end] : ReplacedRowRanges(store)) {
      ::posix_fadvise(fd, static_cast<off_t>(begin), static_cast<off_t>(end - begin), POSIX_FADV_DONTNEED);
    }
  }
  ::close(fd);
}

}  // namespace

std::vector<std::pair<size_t, size_t>> ReplacedRowRanges(const PackedWeightStore& store) {
  std::vector<std::pair<size_t, size_t>> rows, ranges;
  const MappedFile* source = store.source();
  if (source == nullptr) return ranges;
  for (const WeightMatrix& w : store.matrices()) {
    if (w.packed->data() == nullptr || w.packed->in_memory()) continue;
    const size_t bytes = static_cast<size_t>(w.n_out) * w.row_bytes;
    if (w.data < source->data() || w.data + bytes > source->data() + source->size()) continue;
    const auto begin = static_cast<size_t>(w.data - source->data());
    rows.emplace_back(begin, begin + bytes);
  }
  std::sort(rows.begin(), rows.end());
  // Few ranges, across the small tensors between matrices (norms, read at load, stay in any case).
  constexpr size_t kGap = size_t{1} << 20;
  for (const auto& [begin, end] : rows) {
    if (!ranges.empty() && begin <= ranges.back().second + kGap) ranges.back().second = std::max(ranges.back().second, end);
    else ranges.emplace_back(begin, end);
  }
  return ranges;
}

Result<PackedCacheOutcome> UsePackedCache(PackedWeightStore& store, const KernelTable& kernels, const std::string& path,
                                          const std::string& identity, ThreadPool& pool, const std::string& origin) {
  if (TryAdopt(store, kernels, path, identity, origin)) {
    DropReplacedRows(store, origin);
    return PackedCacheOutcome::kLoaded;
  }
  RETURN_IF_ERROR(Build(store, kernels, path, identity, origin, pool));
  if (!TryAdopt(store, kernels, path, identity, origin)) {
    return Status::Error("the packed-weight cache " + path + " just written does not read back");
  }
  DropReplacedRows(store, origin);
  RemoveOlderVersions(path, identity, origin);
  return PackedCacheOutcome::kBuilt;
}

}  // namespace gemlet
