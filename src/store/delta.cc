// The delta format (docs/delta.md): DiffGguf matches NEW's tensors against OLD's by name and digest
// and writes copy/literal/zero ops; ApplyDelta streams them into a temporary file with bounded
// buffers, checking each op's and each literal chunk's SHA-256, then NEW's, before the rename.
#include "store/delta.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_reader.h"
#include "store/sha256.h"

namespace gemlet::store {
namespace {

// Op kinds and what a region of NEW holds, as stored in an op record.
enum OpKind : uint8_t { kCopy = 1, kLiteral = 2, kZero = 3 };
enum RegionKind : uint8_t { kHeader = 0, kTensor = 1, kPadding = 2 };

constexpr size_t kBlock = 4u << 20;           // bytes read or written at a time
constexpr uint64_t kMaxTable = 256u << 20;    // far above any real directory; bounds a hostile one
constexpr size_t kMaxName = 1024;
constexpr size_t kIndexDigestAt = 112;        // the header's digest covers bytes [0, 112) and the table

std::string Quoted(const std::string& s) { return "'" + s + "'"; }
std::string Errno() { return std::strerror(errno); }

// ---- little-endian fields and raw digests ----

void PutU16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out += static_cast<char>(v >> (8 * i));
}
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (8 * i));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i));
}
uint64_t GetLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

int HexValue(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }
std::string RawDigest(const std::string& hex) {  // 64 lowercase hex digits -> 32 bytes
  std::string raw(32, '\0');
  for (size_t i = 0; i < 32; ++i) raw[i] = static_cast<char>(HexValue(hex[2 * i]) * 16 + HexValue(hex[2 * i + 1]));
  return raw;
}
std::string HexDigest(const uint8_t* raw) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 32; ++i) {
    hex += kHex[raw[i] >> 4];
    hex += kHex[raw[i] & 15];
  }
  return hex;
}

// ---- files ----

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at offset; false at an early end of file (errno 0) or an error.
bool PreadAll(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = 0;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

std::string ReadFailure(const std::string& path, const std::string& what) {
  return "cannot read " + what + " of " + Quoted(path) + ": " + (errno ? Errno() : std::string("the file ends early"));
}

// A file written under a unique name beside `path` and renamed over it by Commit; removed when the
// object goes away uncommitted, so a failure never leaves anything at `path`.
class TempOutput {
 public:
  static Result<std::unique_ptr<TempOutput>> Create(const std::string& path) {
    std::unique_ptr<TempOutput> out(new TempOutput(path));
    static std::atomic<uint64_t> counter{0};
    const std::filesystem::path final_path(path);
    for (int attempt = 0; attempt < 100; ++attempt) {
      out->tmp_ = (final_path.parent_path() / ("." + final_path.filename().string() + ".partial-" +
                                                std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                      .string();
      // O_EXCL: two writers never share a temporary file; 0666 lets the umask decide, as for any new file.
      out->fd_ = ::open(out->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (out->fd_ >= 0) return out;
      if (errno != EEXIST) break;
    }
    return Status::Error("cannot create a temporary file beside " + Quoted(path) + ": " + Errno());
  }
  ~TempOutput() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  Status Write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Status::Error("cannot write " + Quoted(tmp_) + ": " + Errno());
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  }

  // fsync before the rename so the new name never points at unwritten data after a crash; fsync of
  // the directory after it so the rename itself survives one.
  Status Commit() {
    if (::fsync(fd_) != 0) return Status::Error("cannot sync " + Quoted(tmp_) + ": " + Errno());
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Status::Error("cannot close " + Quoted(tmp_) + ": " + Errno());
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return Status::Error("cannot rename " + Quoted(tmp_) + " to " + Quoted(path_) + ": " + Errno());
    }
    committed_ = true;
    std::string dir = std::filesystem::path(path_).parent_path().string();
    if (dir.empty()) dir = ".";
    Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d.fd < 0 || ::fsync(d.fd) != 0) return Status::Error("cannot sync the directory " + Quoted(dir) + ": " + Errno());
    return Status::Ok();
  }

 private:
  explicit TempOutput(std::string path) : path_(std::move(path)) {}
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// ---- the index: header and op table ----

struct Op {
  OpKind kind = kLiteral;
  RegionKind region = kTensor;
  uint64_t length = 0;
  uint64_t old_offset = 0;
  std::string digest;  // raw, 32 bytes: of the region's bytes in NEW
  std::string name;    // the tensor's; "" for the header and padding
};

std::string Label(const Op& op) {
  switch (op.region) {
    case kHeader: return "the GGUF header";
    case kPadding: return op.name.empty() ? "padding" : "the padding before tensor " + Quoted(op.name);
    case kTensor: break;
  }
  return "tensor " + Quoted(op.name);
}

uint64_t ChunksOf(uint64_t length, uint32_t chunk) { return (length + chunk - 1) / chunk; }

std::string EncodeIndex(const DeltaPatchInfo& info, const std::vector<Op>& ops) {
  std::string table;
  for (const Op& op : ops) {
    table += static_cast<char>(op.kind);
    table += static_cast<char>(op.region);
    PutU16(table, static_cast<uint16_t>(op.name.size()));
    PutU32(table, 0);
    PutU64(table, op.length);
    PutU64(table, op.old_offset);
    table += op.digest;
    table += op.name;
  }
  std::string header(kDeltaMagic, sizeof(kDeltaMagic));
  PutU32(header, kDeltaVersion);
  PutU32(header, info.chunk_size);
  PutU64(header, info.old_size);
  header += RawDigest(info.old_sha256);
  PutU64(header, info.new_size);
  header += RawDigest(info.new_sha256);
  PutU64(header, ops.size());
  PutU64(header, table.size());
  Sha256 h;
  h.Update(header);
  h.Update(table);
  header += RawDigest(h.FinishHex());
  return header + table;
}

struct Index {
  DeltaPatchInfo info;
  std::vector<Op> ops;
  uint64_t data_start = 0;  // the first literal chunk
};

// Reads and checks everything but the literal chunks: a patch that passes is one Diff wrote (or
// one whose index was forged along with its digest), and its size is exactly what the index says.
Result<Index> ReadIndex(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::Error("cannot stat " + Quoted(path) + ": " + Errno());
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const std::string where = "patch " + Quoted(path);
  if (size < kDeltaHeaderBytes) {
    return Status::Error(where + " is truncated or not a patch: " + std::to_string(size) + " bytes, less than its " +
                         std::to_string(kDeltaHeaderBytes) + "-byte header");
  }
  uint8_t h[kDeltaHeaderBytes];
  if (!PreadAll(fd, h, sizeof(h), 0)) return Status::Error(ReadFailure(path, "the header"));
  if (std::memcmp(h, kDeltaMagic, sizeof(kDeltaMagic)) != 0) {
    return Status::Error(where + " is not a gemlet patch (no GEMDELTA magic)");
  }
  Index index;
  DeltaPatchInfo& info = index.info;
  info.version = static_cast<uint32_t>(GetLe(h + 8, 4));
  if (info.version != kDeltaVersion) {
    return Status::Error(where + " has format version " + std::to_string(info.version) + "; this gemlet reads version " +
                         std::to_string(kDeltaVersion));
  }
  info.chunk_size = static_cast<uint32_t>(GetLe(h + 12, 4));
  info.old_size = GetLe(h + 16, 8);
  info.old_sha256 = HexDigest(h + 24);
  info.new_size = GetLe(h + 56, 8);
  info.new_sha256 = HexDigest(h + 64);
  info.n_ops = GetLe(h + 96, 8);
  const uint64_t table_bytes = GetLe(h + 104, 8);
  info.patch_bytes = size;
  if (table_bytes > kMaxTable || table_bytes > size - kDeltaHeaderBytes) {
    return Status::Error(where + " is truncated or corrupt: its op table of " + std::to_string(table_bytes) +
                         " bytes does not fit in the file's " + std::to_string(size) + " bytes");
  }
  std::vector<uint8_t> table(table_bytes);
  if (!PreadAll(fd, table.data(), table.size(), kDeltaHeaderBytes)) return Status::Error(ReadFailure(path, "the op table"));
  Sha256 digest;
  digest.Update(h, kIndexDigestAt);
  digest.Update(table.data(), table.size());
  const std::string actual = digest.FinishHex();
  if (actual != HexDigest(h + kIndexDigestAt)) {
    return Status::Error(where + " is corrupt: its header and op table have SHA-256 " + actual + ", the header says " +
                         HexDigest(h + kIndexDigestAt));
  }
  if (info.chunk_size == 0 || info.chunk_size > kDeltaMaxChunk) {
    return Status::Error(where + ": chunk size " + std::to_string(info.chunk_size) + " is out of range (1.." +
                         std::to_string(kDeltaMaxChunk) + ")");
  }
  if (info.n_ops > table_bytes / kDeltaOpBytes) {
    return Status::Error(where + ": " + std::to_string(info.n_ops) + " ops cannot fit in a table of " +
                         std::to_string(table_bytes) + " bytes");
  }
  // Every op must fit: NEW's size is their sum, copies lie inside OLD, and the literal chunks end
  // exactly at the end of the file. Sums are checked before they could overflow.
  uint64_t at = 0, new_bytes = 0, expected = kDeltaHeaderBytes + table_bytes;
  index.ops.reserve(info.n_ops);
  for (uint64_t i = 0; i < info.n_ops; ++i) {
    const std::string op_where = where + ": op " + std::to_string(i);
    if (table_bytes - at < kDeltaOpBytes) return Status::Error(op_where + " runs past the op table");
    const uint8_t* r = table.data() + at;
    Op op;
    op.kind = static_cast<OpKind>(r[0]);
    op.region = static_cast<RegionKind>(r[1]);
    const size_t name_len = GetLe(r + 2, 2);
    op.length = GetLe(r + 8, 8);
    op.old_offset = GetLe(r + 16, 8);
    op.digest.assign(reinterpret_cast<const char*>(r + 24), 32);
    if (name_len > kMaxName || table_bytes - at - kDeltaOpBytes < name_len) {
      return Status::Error(op_where + ": its name runs past the op table");
    }
    op.name.assign(reinterpret_cast<const char*>(r + kDeltaOpBytes), name_len);
    at += kDeltaOpBytes + name_len;
    if (op.kind != kCopy && op.kind != kLiteral && op.kind != kZero) {
      return Status::Error(op_where + " has an unknown kind " + std::to_string(r[0]));
    }
    if (op.region > kPadding) return Status::Error(op_where + " has an unknown region " + std::to_string(r[1]));
    if (op.length == 0 || op.length > info.new_size - new_bytes) {
      return Status::Error(op_where + " (" + Label(op) + ") of " + std::to_string(op.length) +
                           " bytes does not fit in NEW's " + std::to_string(info.new_size));
    }
    new_bytes += op.length;
    if (op.kind == kCopy) {
      if (op.old_offset > info.old_size || op.length > info.old_size - op.old_offset) {
        return Status::Error(op_where + " copies " + Label(op) + " from beyond the end of OLD");
      }
      info.copied_bytes += op.length;
      ++info.n_copy;
    } else if (op.kind == kLiteral) {
      const uint64_t bytes = op.length + 32 * ChunksOf(op.length, info.chunk_size);
      if (bytes > UINT64_MAX - expected) return Status::Error(op_where + ": literal sizes overflow");
      expected += bytes;
      info.literal_bytes += op.length;
      ++info.n_literal;
    } else {
      ++info.n_zero;
    }
    index.ops.push_back(std::move(op));
  }
  if (at != table_bytes) return Status::Error(where + ": " + std::to_string(table_bytes - at) + " bytes after its last op");
  if (new_bytes != info.new_size) {
    return Status::Error(where + ": its ops make " + std::to_string(new_bytes) + " bytes, NEW has " +
                         std::to_string(info.new_size));
  }
  if (size < expected) {
    return Status::Error(where + " is truncated: " + std::to_string(size) + " bytes, its index needs " +
                         std::to_string(expected));
  }
  if (size > expected) {
    return Status::Error(where + " has " + std::to_string(size - expected) + " bytes after its last chunk");
  }
  index.data_start = kDeltaHeaderBytes + table_bytes;
  return index;
}

// ---- diff ----

struct Region {
  uint64_t start = 0, length = 0;
  RegionKind kind = kTensor;
  std::string name;
  std::string digest;  // raw
};

// The file cut into the regions NEW is rebuilt from, in file order: the header (through the
// directory and its padding), each tensor's bytes, and whatever lies between or after them.
Result<std::vector<Region>> Layout(const GgufFile& f) {
  const uint64_t size = f.file_size();
  std::vector<Region> out;
  const uint64_t header = std::min<uint64_t>(f.data_offset(), size);
  out.push_back({0, header, kHeader, "", ""});
  std::vector<const GgufTensor*> tensors;
  for (const GgufTensor& t : f.tensors()) {
    if (t.nbytes > 0) tensors.push_back(&t);
  }
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  uint64_t at = header;
  std::string previous;
  for (const GgufTensor* t : tensors) {
    const uint64_t start = f.data_offset() + t->offset;
    if (start < at) {
      return Status::Error(Quoted(f.path()) + ": tensors '" + previous + "' and '" + std::string(t->name) +
                           "' overlap; a patch rebuilds files whose tensors do not share bytes");
    }
    if (start > at) out.push_back({at, start - at, kPadding, std::string(t->name), ""});
    out.push_back({start, t->nbytes, kTensor, std::string(t->name), ""});
    at = start + t->nbytes;
    previous = std::string(t->name);
  }
  if (size > at) out.push_back({at, size - at, kPadding, "", ""});
  std::erase_if(out, [](const Region& r) { return r.length == 0; });
  return out;
}

// Each region's digest and the whole file's, in one sequential pass over the map.
std::string HashRegions(const uint8_t* base, std::vector<Region>& regions) {
  Sha256 whole;
  for (Region& r : regions) {
    Sha256 h;
    for (uint64_t at = 0; at < r.length; at += kBlock) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, r.length - at));
      h.Update(base + r.start + at, n);
      whole.Update(base + r.start + at, n);
    }
    r.digest = RawDigest(h.FinishHex());
  }
  return whole.FinishHex();
}

bool SameValue(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GgufType::kString: return a.str == b.str;
    case GgufType::kArray: {
      if (a.elem_type != b.elem_type || a.count != b.count) return false;
      if (a.elem_type == GgufType::kString) return a.strings == b.strings;
      if (a.elem_type == GgufType::kArray) {
        if (a.arrays.size() != b.arrays.size()) return false;
        for (size_t i = 0; i < a.arrays.size(); ++i) {
          if (!SameValue(a.arrays[i], b.arrays[i])) return false;
        }
        return true;
      }
      return std::memcmp(a.raw, b.raw, a.count * GgufScalarSize(a.elem_type)) == 0;
    }
    default: return a.u64 == b.u64 && a.i64 == b.i64 && (a.f64 == b.f64 || (a.f64 != a.f64 && b.f64 != b.f64));
  }
}

// Keys and values, whatever their order (an order change alone rewrites the header but means nothing).
bool SameMetadata(const GgufFile& a, const GgufFile& b) {
  if (a.metadata().size() != b.metadata().size()) return false;
  for (const auto& [key, value] : a.metadata()) {
    const GgufValue* other = b.Find(key);
    if (other == nullptr || !SameValue(value, *other)) return false;
  }
  return true;
}

bool AllZero(const uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

Result<DeltaDiffReport> DiffGguf(const std::string& old_gguf, const std::string& new_gguf,
                                 const std::string& patch_out, const DeltaDiffOptions& options) {
  if (options.chunk_size == 0 || options.chunk_size > kDeltaMaxChunk) {
    return Status::Error(StatusCode::kInvalidArgument, "chunk size " + std::to_string(options.chunk_size) +
                                                           " is out of range (1.." + std::to_string(kDeltaMaxChunk) + ")");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> old_file, GgufFile::Open(old_gguf));
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> new_file, GgufFile::Open(new_gguf));
  ASSIGN_OR_RETURN(std::vector<Region> old_regions, Layout(*old_file));
  ASSIGN_OR_RETURN(std::vector<Region> new_regions, Layout(*new_file));
  const uint8_t* old_base = old_file->mapping()->data();
  const uint8_t* new_base = new_file->mapping()->data();

  DeltaDiffReport report;
  report.old_sha256 = HashRegions(old_base, old_regions);
  report.new_sha256 = HashRegions(new_base, new_regions);
  report.new_file_bytes = new_file->file_size();
  report.metadata_changed = !SameMetadata(*old_file, *new_file);

  std::unordered_map<std::string, const Region*> old_by_name, old_by_digest;
  for (const Region& r : old_regions) {
    if (r.kind != kTensor) continue;
    old_by_name.emplace(r.name, &r);
    old_by_digest.emplace(r.digest, &r);  // the first of equal tensors: any of them would do
  }

  std::vector<Op> ops;
  for (const Region& r : new_regions) {
    Op op;
    op.region = r.kind;
    op.length = r.length;
    op.digest = r.digest;
    op.name = r.name.size() <= kMaxName ? r.name : r.name.substr(0, kMaxName);
    const Region* source = nullptr;
    if (r.kind == kHeader) {
      const Region& h = old_regions.front();
      if (h.kind == kHeader && h.length == r.length && h.digest == r.digest) source = &h;
    } else if (r.kind == kTensor) {
      ++report.tensors_total;
      auto by_name = old_by_name.find(r.name);
      if (by_name == old_by_name.end()) {
        ++report.tensors_added;
      } else if (by_name->second->digest == r.digest && by_name->second->length == r.length) {
        source = by_name->second;
      } else {
        ++report.tensors_changed;
      }
      if (source == nullptr) {
        auto by_digest = old_by_digest.find(r.digest);
        if (by_digest != old_by_digest.end() && by_digest->second->length == r.length) {
          source = by_digest->second;
          ++report.tensors_moved;
        }
      }
    }
    if (source != nullptr) {
      op.kind = kCopy;
      op.old_offset = source->start;
      report.copied_bytes += r.length;
    } else if (r.kind == kPadding && AllZero(new_base + r.start, r.length)) {
      op.kind = kZero;
    } else {
      op.kind = kLiteral;
      report.literal_bytes += r.length;
    }
    ops.push_back(std::move(op));
  }
  for (const GgufTensor& t : old_file->tensors()) {
    if (new_file->FindTensor(t.name) == nullptr) ++report.tensors_removed;
  }

  DeltaPatchInfo info;
  info.chunk_size = options.chunk_size;
  info.old_size = old_file->file_size();
  info.old_sha256 = report.old_sha256;
  info.new_size = new_file->file_size();
  info.new_sha256 = report.new_sha256;
  const std::string index = EncodeIndex(info, ops);

  ASSIGN_OR_RETURN(std::unique_ptr<TempOutput> out, TempOutput::Create(patch_out));
  RETURN_IF_ERROR(out->Write(index.data(), index.size()));
  uint64_t written = index.size();
  size_t i = 0;
  for (const Region& r : new_regions) {
    const Op& op = ops[i++];
    if (op.kind != kLiteral) continue;
    for (uint64_t at = 0; at < r.length; at += options.chunk_size) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(options.chunk_size, r.length - at));
      const uint8_t* chunk = new_base + r.start + at;
      const std::string digest = RawDigest(Sha256Hex(std::string_view(reinterpret_cast<const char*>(chunk), n)));
      RETURN_IF_ERROR(out->Write(digest.data(), digest.size()));
      RETURN_IF_ERROR(out->Write(chunk, n));
      written += digest.size() + n;
    }
  }
  RETURN_IF_ERROR(out->Commit());
  report.patch_bytes = written;
  return report;
}

Result<DeltaPatchInfo> ReadDeltaPatchInfo(const std::string& patch) {
  Fd fd(::open(patch.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return Status::Error("cannot open patch " + Quoted(patch) + ": " + Errno());
  ASSIGN_OR_RETURN(Index index, ReadIndex(fd.fd, patch));
  return index.info;
}

Result<DeltaApplyReport> ApplyDelta(const std::string& old_gguf, const std::string& patch, const std::string& new_out,
                                    const DeltaApplyOptions& options) {
  Fd patch_fd(::open(patch.c_str(), O_RDONLY | O_CLOEXEC));
  if (patch_fd.fd < 0) return Status::Error("cannot open patch " + Quoted(patch) + ": " + Errno());
  ASSIGN_OR_RETURN(Index index, ReadIndex(patch_fd.fd, patch));
  const DeltaPatchInfo& info = index.info;

  Fd old_fd(::open(old_gguf.c_str(), O_RDONLY | O_CLOEXEC));
  if (old_fd.fd < 0) return Status::Error("cannot open " + Quoted(old_gguf) + ": " + Errno());
  struct stat st;
  if (::fstat(old_fd.fd, &st) != 0) return Status::Error("cannot stat " + Quoted(old_gguf) + ": " + Errno());
  if (static_cast<uint64_t>(st.st_size) != info.old_size) {
    return Status::Error(Quoted(old_gguf) + " is not the file the patch was made from: it is " +
                         std::to_string(st.st_size) + " bytes, the patch was made from a file of " +
                         std::to_string(info.old_size) + " bytes (SHA-256 " + info.old_sha256 + ")");
  }
  if (options.verify_old) {
    ASSIGN_OR_RETURN(std::string old_sha, Sha256File(old_gguf));
    if (old_sha != info.old_sha256) {
      return Status::Error(Quoted(old_gguf) + " is not the file the patch was made from: its SHA-256 is " + old_sha +
                           ", the patch was made from " + info.old_sha256);
    }
  }

  ASSIGN_OR_RETURN(std::unique_ptr<TempOutput> out, TempOutput::Create(new_out));
  // Bounded memory whatever the tensors' sizes: one block for copies and zeros, one chunk for literals.
  std::vector<uint8_t> block(kBlock);
  std::vector<uint8_t> chunk(std::min<uint64_t>(info.chunk_size, info.literal_bytes) + 32);
  Sha256 whole;
  DeltaApplyReport report;
  uint64_t patch_at = index.data_start;
  auto emit = [&](const uint8_t* p, size_t n, Sha256& region) -> Status {
    region.Update(p, n);
    whole.Update(p, n);
    RETURN_IF_ERROR(out->Write(p, n));
    report.bytes_written += n;
    if (options.progress && !options.progress(report.bytes_written, info.new_size)) {
      return Status::Error(StatusCode::kCancelled, "applying " + Quoted(patch) + ": cancelled");
    }
    return Status::Ok();
  };
  for (const Op& op : index.ops) {
    Sha256 region;
    if (op.kind == kZero) {
      std::fill(block.begin(), block.end(), 0);
      for (uint64_t at = 0; at < op.length; at += kBlock) {
        RETURN_IF_ERROR(emit(block.data(), static_cast<size_t>(std::min<uint64_t>(kBlock, op.length - at)), region));
      }
    } else if (op.kind == kCopy) {
      for (uint64_t at = 0; at < op.length; at += kBlock) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, op.length - at));
        if (!PreadAll(old_fd.fd, block.data(), n, op.old_offset + at)) {
          return Status::Error(ReadFailure(old_gguf, Label(op)));
        }
        RETURN_IF_ERROR(emit(block.data(), n, region));
      }
      report.bytes_copied += op.length;
    } else {
      const uint64_t n_chunks = ChunksOf(op.length, info.chunk_size);
      for (uint64_t k = 0; k < n_chunks; ++k) {
        const uint64_t at = k * info.chunk_size;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(info.chunk_size, op.length - at));
        const std::string chunk_name = "chunk " + std::to_string(k + 1) + " of " + std::to_string(n_chunks) + " of " +
                                       Label(op) + " (patch bytes " + std::to_string(patch_at) + ".." +
                                       std::to_string(patch_at + 32 + n) + ")";
        if (!PreadAll(patch_fd.fd, chunk.data(), 32 + n, patch_at)) return Status::Error(ReadFailure(patch, chunk_name));
        patch_at += 32 + n;
        const std::string actual =
            Sha256Hex(std::string_view(reinterpret_cast<const char*>(chunk.data() + 32), n));
        if (actual != HexDigest(chunk.data())) {
          return Status::Error("patch " + Quoted(patch) + " is corrupt: " + chunk_name + " has SHA-256 " + actual +
                               ", its digest says " + HexDigest(chunk.data()));
        }
        RETURN_IF_ERROR(emit(chunk.data() + 32, n, region));
      }
      report.bytes_literal += op.length;
    }
    const std::string actual = region.FinishHex();
    const std::string expected = HexDigest(reinterpret_cast<const uint8_t*>(op.digest.data()));
    if (actual != expected) {
      if (op.kind == kCopy) {
        return Status::Error(Quoted(old_gguf) + " is not the file the patch was made from: " + Label(op) + " (" +
                             std::to_string(op.length) + " bytes at offset " + std::to_string(op.old_offset) +
                             ") has SHA-256 " + actual + ", the patch expects " + expected);
      }
      return Status::Error("patch " + Quoted(patch) + " is corrupt: " + Label(op) + " rebuilt with SHA-256 " + actual +
                           ", its index says " + expected);
    }
  }
  report.sha256 = whole.FinishHex();
  if (report.sha256 != info.new_sha256) {
    return Status::Error("applying " + Quoted(patch) + ": the rebuilt file has SHA-256 " + report.sha256 +
                         ", the patch says NEW's is " + info.new_sha256);
  }
  RETURN_IF_ERROR(out->Commit().WithContext("applying " + Quoted(patch)));
  return report;
}

}  // namespace gemlet::store
