// GGUF v3 writer: metadata serialized up front, tensor bytes streamed through a buffered file sink.
#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace gemlet {

namespace {

constexpr uint32_t kGgufWriteVersion = 3;
// Large enough that a multi-GB file goes out in few syscalls, small enough to never matter for RAM.
constexpr size_t kWriteBufferBytes = size_t{4} << 20;

// Little-endian serialization into a byte vector (every supported host is little-endian, as is GGUF v3
// without the big-endian flag, so plain memcpy is the encoding).
class Bytes {
 public:
  explicit Bytes(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    const size_t at = out_->size();
    out_->resize(at + sizeof(T));
    std::memcpy(out_->data() + at, &v, sizeof(T));
  }
  void PutRaw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    PutRaw(s.data(), s.size());
  }

 private:
  std::vector<uint8_t>* out_;
};

std::vector<uint8_t> StringArrayPayload(const std::vector<std::string>& v) {
  std::vector<uint8_t> payload;
  Bytes b(&payload);
  b.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
  b.Put<uint64_t>(v.size());
  for (const std::string& s : v) b.PutString(s);
  return payload;
}

template <typename T>
std::vector<uint8_t> NumericArrayPayload(GgufType elem, const T* data, size_t n) {
  std::vector<uint8_t> payload;
  Bytes b(&payload);
  b.Put<uint32_t>(static_cast<uint32_t>(elem));
  b.Put<uint64_t>(n);
  b.PutRaw(data, n * sizeof(T));
  return payload;
}

template <typename T>
std::vector<uint8_t> ScalarPayload(T v) {
  std::vector<uint8_t> payload;
  Bytes(&payload).Put(v);
  return payload;
}

bool IsKnownType(GgufType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(GgufType::kFloat64); }

// Serializes one scalar of `type` from the widened fields of `v`, checking that it fits.
Status PutScalar(Bytes& b, GgufType type, const GgufValue& v) {
  auto unsigned_fits = [&](uint64_t max) -> Status {
    if (v.u64 > max) {
      return Status::Error("value " + std::to_string(v.u64) + " does not fit in " + GgufTypeName(type));
    }
    return Status::Ok();
  };
  auto signed_fits = [&](int64_t min, int64_t max) -> Status {
    if (v.i64 < min || v.i64 > max) {
      return Status::Error("value " + std::to_string(v.i64) + " does not fit in " + GgufTypeName(type));
    }
    return Status::Ok();
  };
  switch (type) {
    case GgufType::kUint8: RETURN_IF_ERROR(unsigned_fits(0xff)); b.Put<uint8_t>(static_cast<uint8_t>(v.u64)); break;
    case GgufType::kUint16: RETURN_IF_ERROR(unsigned_fits(0xffff)); b.Put<uint16_t>(static_cast<uint16_t>(v.u64)); break;
    case GgufType::kUint32: RETURN_IF_ERROR(unsigned_fits(0xffffffffu)); b.Put<uint32_t>(static_cast<uint32_t>(v.u64)); break;
    case GgufType::kUint64: b.Put<uint64_t>(v.u64); break;
    case GgufType::kInt8: RETURN_IF_ERROR(signed_fits(-128, 127)); b.Put<int8_t>(static_cast<int8_t>(v.i64)); break;
    case GgufType::kInt16: RETURN_IF_ERROR(signed_fits(-32768, 32767)); b.Put<int16_t>(static_cast<int16_t>(v.i64)); break;
    case GgufType::kInt32:
      RETURN_IF_ERROR(signed_fits(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
      b.Put<int32_t>(static_cast<int32_t>(v.i64));
      break;
    case GgufType::kInt64: b.Put<int64_t>(v.i64); break;
    case GgufType::kFloat32: b.Put<float>(static_cast<float>(v.f64)); break;
    case GgufType::kFloat64: b.Put<double>(v.f64); break;
    case GgufType::kBool:
      if (v.u64 > 1) return Status::Error("bool value " + std::to_string(v.u64) + " is not 0 or 1");
      b.Put<uint8_t>(static_cast<uint8_t>(v.u64));
      break;
    default:
      return Status::Error(std::string("internal: ") + GgufTypeName(type) + " is not a scalar type");
  }
  return Status::Ok();
}

// Serializes an array body (element type, count, elements); `depth` counts array levels from 1.
Status PutArray(Bytes& b, const GgufValue& v, int depth) {
  if (depth > kGgufMaxArrayDepth) {
    return Status::Error("arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth) + " levels");
  }
  if (!IsKnownType(v.elem_type)) {
    return Status::Error("unknown array element type " + std::to_string(static_cast<uint32_t>(v.elem_type)));
  }
  b.Put<uint32_t>(static_cast<uint32_t>(v.elem_type));
  b.Put<uint64_t>(v.count);
  const size_t elem_size = GgufScalarSize(v.elem_type);
  if (elem_size > 0) {
    if (v.count > 0 && v.raw == nullptr) return Status::Error("numeric array of " + std::to_string(v.count) + " has no data");
    if (v.count > std::numeric_limits<size_t>::max() / elem_size) return Status::Error("array count overflows");
    if (v.elem_type == GgufType::kBool) {
      for (uint64_t i = 0; i < v.count; ++i) {
        if (v.raw[i] > 1) return Status::Error("bool element " + std::to_string(i) + " is not 0 or 1");
      }
    }
    b.PutRaw(v.raw, static_cast<size_t>(v.count) * elem_size);
    return Status::Ok();
  }
  if (v.elem_type == GgufType::kString) {
    if (v.strings.size() != v.count) {
      return Status::Error("string array claims " + std::to_string(v.count) + " elements but holds " +
                           std::to_string(v.strings.size()));
    }
    for (std::string_view s : v.strings) b.PutString(s);
    return Status::Ok();
  }
  if (v.arrays.size() != v.count) {
    return Status::Error("array of arrays claims " + std::to_string(v.count) + " elements but holds " +
                         std::to_string(v.arrays.size()));
  }
  for (size_t i = 0; i < v.arrays.size(); ++i) {
    if (v.arrays[i].type != GgufType::kArray) {
      return Status::Error("element " + std::to_string(i) + " of an array of arrays is a " +
                           GgufTypeName(v.arrays[i].type));
    }
    RETURN_IF_ERROR(PutArray(b, v.arrays[i], depth + 1).WithContext("element " + std::to_string(i)));
  }
  return Status::Ok();
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Buffered POSIX file output; large writes bypass the buffer. Errors name the file and errno.
class GgufWriter::FileSink : public ByteSink {
 public:
  explicit FileSink(std::string path) : path_(std::move(path)) {}
  ~FileSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return Errno("cannot create");
    buffer_.resize(kWriteBufferBytes);
    return Status::Ok();
  }

  Status Write(const void* data, size_t size) override {
    const auto* p = static_cast<const uint8_t*>(data);
    written_ += size;
    if (size <= buffer_.size() - used_) {
      if (size > 0) std::memcpy(buffer_.data() + used_, p, size);
      used_ += size;
      return Status::Ok();
    }
    RETURN_IF_ERROR(Flush());
    if (size >= buffer_.size()) return WriteAll(p, size);
    std::memcpy(buffer_.data(), p, size);
    used_ = size;
    return Status::Ok();
  }

  // Zero bytes up to the next multiple of `alignment` (a power of two).
  Status PadTo(uint64_t alignment) {
    static const uint8_t kZeros[256] = {};
    uint64_t pad = (alignment - written_ % alignment) % alignment;
    while (pad > 0) {
      const size_t n = static_cast<size_t>(pad < sizeof kZeros ? pad : sizeof kZeros);
      RETURN_IF_ERROR(Write(kZeros, n));
      pad -= n;
    }
    return Status::Ok();
  }

  // Flushes, syncs and closes: after an Ok the bytes are on disk, ready for the rename.
  Status Close() {
    RETURN_IF_ERROR(Flush());
    if (::fsync(fd_) != 0) return Errno("cannot sync");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Errno("cannot close");
    return Status::Ok();
  }

  uint64_t written() const { return written_; }

 private:
  Status Flush() {
    RETURN_IF_ERROR(WriteAll(buffer_.data(), used_));
    used_ = 0;
    return Status::Ok();
  }
  Status WriteAll(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Errno("cannot write");
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::Ok();
  }
  Status Errno(const char* what) const { return Status::Error(std::string(what) + " '" + path_ + "': " + std::strerror(errno)); }

  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
  size_t used_ = 0;
  uint64_t written_ = 0;
};

namespace {
// Forwards one tensor's bytes to the file, refusing anything past the declared size.
class CountingSink : public ByteSink {
 public:
  CountingSink(ByteSink* out, size_t expected) : out_(out), expected_(expected) {}
  Status Write(const void* data, size_t size) override {
    attempted_ += size;
    if (size > expected_ - count_) {
      return Status::Error("producer wrote more than the declared " + std::to_string(expected_) + " bytes");
    }
    count_ += size;
    return out_->Write(data, size);
  }
  uint64_t attempted() const { return attempted_; }

 private:
  ByteSink* out_;
  size_t expected_;
  size_t count_ = 0;
  uint64_t attempted_ = 0;
};
}  // namespace

// ---------------------------------------------------------------------------------------------
GgufWriter::GgufWriter() = default;

void GgufWriter::SetRaw(const std::string& key, GgufType type, std::vector<uint8_t> payload) {
  auto it = kv_index_.find(key);
  if (it != kv_index_.end()) {
    kv_[it->second].type = type;
    kv_[it->second].payload = std::move(payload);
    return;
  }
  kv_index_.emplace(key, kv_.size());
  kv_.push_back({key, type, std::move(payload)});
}

void GgufWriter::SetU32(const std::string& key, uint32_t v) { SetRaw(key, GgufType::kUint32, ScalarPayload(v)); }
void GgufWriter::SetI32(const std::string& key, int32_t v) { SetRaw(key, GgufType::kInt32, ScalarPayload(v)); }
void GgufWriter::SetU64(const std::string& key, uint64_t v) { SetRaw(key, GgufType::kUint64, ScalarPayload(v)); }
void GgufWriter::SetI64(const std::string& key, int64_t v) { SetRaw(key, GgufType::kInt64, ScalarPayload(v)); }
void GgufWriter::SetF32(const std::string& key, float v) { SetRaw(key, GgufType::kFloat32, ScalarPayload(v)); }
void GgufWriter::SetF64(const std::string& key, double v) { SetRaw(key, GgufType::kFloat64, ScalarPayload(v)); }
void GgufWriter::SetBool(const std::string& key, bool v) {
  SetRaw(key, GgufType::kBool, ScalarPayload<uint8_t>(v ? 1 : 0));
}

void GgufWriter::SetString(const std::string& key, const std::string& v) {
  std::vector<uint8_t> payload;
  Bytes(&payload).PutString(v);
  SetRaw(key, GgufType::kString, std::move(payload));
}

void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  SetRaw(key, GgufType::kArray, StringArrayPayload(v));
}
void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& v) {
  SetRaw(key, GgufType::kArray, NumericArrayPayload(GgufType::kFloat32, v.data(), v.size()));
}
void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& v) {
  SetRaw(key, GgufType::kArray, NumericArrayPayload(GgufType::kInt32, v.data(), v.size()));
}
void GgufWriter::SetU32Array(const std::string& key, const std::vector<uint32_t>& v) {
  SetRaw(key, GgufType::kArray, NumericArrayPayload(GgufType::kUint32, v.data(), v.size()));
}
void GgufWriter::SetBoolArray(const std::string& key, const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  SetRaw(key, GgufType::kArray, NumericArrayPayload(GgufType::kBool, bytes.data(), bytes.size()));
}

Status GgufWriter::SetValue(const std::string& key, const GgufValue& value) {
  std::vector<uint8_t> payload;
  Bytes b(&payload);
  Status s;
  if (value.type == GgufType::kString) {
    b.PutString(value.str);
  } else if (value.type == GgufType::kArray) {
    s = PutArray(b, value, 1);
  } else if (IsKnownType(value.type)) {
    s = PutScalar(b, value.type, value);
  } else {
    s = Status::Error("unknown value type " + std::to_string(static_cast<uint32_t>(value.type)));
  }
  RETURN_IF_ERROR(s.WithContext("metadata key " + Quoted(key)));
  SetRaw(key, value.type, std::move(payload));
  return Status::Ok();
}

bool GgufWriter::HasKey(const std::string& key) const { return kv_index_.count(key) != 0; }

Status GgufWriter::AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne, Producer produce) {
  const std::string what = "tensor " + Quoted(name);
  if (name.empty()) return Status::Error("a tensor needs a name");
  if (name.size() > kGgufMaxTensorName) {
    return Status::Error(what + ": the name is " + std::to_string(name.size()) + " bytes, GGUF readers accept at most " +
                         std::to_string(kGgufMaxTensorName));
  }
  if (tensor_index_.count(name)) return Status::Error("duplicate tensor name " + Quoted(name));
  const DTypeInfo* info = FindDTypeInfo(static_cast<uint32_t>(type));
  if (info == nullptr) return Status::Error(what + ": unknown tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > static_cast<size_t>(kGgufMaxDims)) {
    return Status::Error(what + " has " + std::to_string(ne.size()) + " dimensions (1 to 4 allowed)");
  }
  uint64_t n_elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) return Status::Error(what + " has invalid dimension " + std::to_string(d) + " = " + std::to_string(ne[d]));
    if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(ne[d])) {
      return Status::Error(what + " has an absurd element count (shape overflows)");
    }
    n_elements *= static_cast<uint64_t>(ne[d]);
  }
  if (ne[0] % info->block_size != 0) {
    return Status::Error(what + " of type " + info->name + " has a row of " + std::to_string(ne[0]) +
                         " values, not a multiple of its block size " + std::to_string(info->block_size));
  }
  const uint64_t blocks = n_elements / static_cast<uint64_t>(info->block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info->block_bytes)) {
    return Status::Error(what + " is absurdly large");
  }
  if (!produce) return Status::Error(what + " has no data producer");
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({name, type, ne, static_cast<size_t>(blocks * static_cast<uint64_t>(info->block_bytes)),
                      std::move(produce)});
  return Status::Ok();
}

Status GgufWriter::AddTensorData(const std::string& name, DType type, const std::vector<int64_t>& ne,
                                 const void* data) {
  if (data == nullptr) return Status::Error("tensor " + Quoted(name) + " has no data");
  // The size is only known once AddTensor validated the shape; the producer reads it back from there.
  const size_t index = tensors_.size();
  RETURN_IF_ERROR(AddTensor(name, type, ne, [](ByteSink&) { return Status::Ok(); }));
  const size_t nbytes = tensors_[index].nbytes;
  tensors_[index].produce = [data, nbytes](ByteSink& sink) { return sink.Write(data, nbytes); };
  return Status::Ok();
}

Result<uint32_t> GgufWriter::Alignment() const {
  auto it = kv_index_.find("general.alignment");
  if (it == kv_index_.end()) return kGgufDefaultAlignment;
  const KeyValue& kv = kv_[it->second];
  if (kv.type != GgufType::kUint32) return Status::Error(std::string("general.alignment must be a u32, not ") + GgufTypeName(kv.type));
  uint32_t a = 0;
  std::memcpy(&a, kv.payload.data(), sizeof a);
  if (a == 0 || (a & (a - 1)) != 0) return Status::Error("general.alignment " + std::to_string(a) + " is not a power of two");
  return a;
}

Status GgufWriter::Write(const std::string& path) {
  const std::string tmp = path + ".tmp";
  Status s;
  Result<uint32_t> alignment = Alignment();
  if (!alignment.ok()) {
    s = alignment.status();
  } else {
    s = WriteTo(tmp, *alignment);
    if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      s = Status::Error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
    }
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s.WithContext("writing '" + path + "'");
  }
  return Status::Ok();
}

Status GgufWriter::WriteTo(const std::string& tmp_path, uint32_t alignment) {
  // The default alignment is implied by its absence; writing it anyway would be harmless but noisy.
  auto skipped = [&](const KeyValue& kv) { return kv.key == "general.alignment" && alignment == kGgufDefaultAlignment; };
  uint64_t n_kv = 0;
  for (const KeyValue& kv : kv_) n_kv += skipped(kv) ? 0 : 1;

  FileSink file(tmp_path);
  RETURN_IF_ERROR(file.Open());

  // Header, metadata and tensor directory are built in memory: they are small next to the data.
  std::vector<uint8_t> head;
  Bytes b(&head);
  b.Put<uint32_t>(kGgufMagic);
  b.Put<uint32_t>(kGgufWriteVersion);
  b.Put<uint64_t>(tensors_.size());
  b.Put<uint64_t>(n_kv);
  for (const KeyValue& kv : kv_) {
    if (skipped(kv)) continue;
    b.PutString(kv.key);
    b.Put<uint32_t>(static_cast<uint32_t>(kv.type));
    b.PutRaw(kv.payload.data(), kv.payload.size());
  }
  uint64_t offset = 0;  // relative to the data section
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors_.size());
  for (const TensorEntry& t : tensors_) {
    offset = (offset + alignment - 1) / alignment * alignment;
    offsets.push_back(offset);
    b.PutString(t.name);
    b.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) b.Put<uint64_t>(static_cast<uint64_t>(n));
    b.Put<uint32_t>(static_cast<uint32_t>(t.type));
    b.Put<uint64_t>(offset);
    offset += t.nbytes;
  }
  RETURN_IF_ERROR(file.Write(head.data(), head.size()));
  head = {};

  const uint64_t data_start = (file.written() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorEntry& t = tensors_[i];
    RETURN_IF_ERROR(file.PadTo(alignment));
    if (file.written() != data_start + offsets[i]) return Status::Error("internal: tensor offset mismatch");
    CountingSink sink(&file, t.nbytes);
    RETURN_IF_ERROR(t.produce(sink).WithContext("producing tensor " + Quoted(t.name)));
    if (sink.attempted() != t.nbytes) {
      return Status::Error("tensor " + Quoted(t.name) + ": producer wrote " + std::to_string(sink.attempted()) +
                           " bytes, expected " + std::to_string(t.nbytes));
    }
  }
  return file.Close();
}

}  // namespace gemlet
