// GGUF parsing with bounds checks on every read; nothing in the file is trusted before it is checked.
#include "gguf/gguf_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace gemlet {

namespace {

// Reservations driven by counts read from the file stay this small; vectors grow as entries parse,
// so a hostile count costs nothing before the bytes behind it are seen.
constexpr uint64_t kMaxReserve = 4096;
size_t CappedReserve(uint64_t n) { return static_cast<size_t>(n < kMaxReserve ? n : kMaxReserve); }

// A cursor over the file bytes; every read checks the remaining length first.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }

  template <typename T>
  bool Read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Skip(size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

std::string At(const Cursor& c) { return " at byte " + std::to_string(c.pos()); }

Status ReadString(Cursor& c, std::string_view* out, const std::string& what) {
  uint64_t len = 0;
  if (!c.Read(&len)) return Status::Error("truncated file: length of " + what + At(c));
  if (len > c.remaining()) {
    return Status::Error(what + " claims " + std::to_string(len) + " bytes but only " +
                         std::to_string(c.remaining()) + " remain in the file" + At(c));
  }
  *out = std::string_view(reinterpret_cast<const char*>(c.here()), static_cast<size_t>(len));
  c.Skip(static_cast<size_t>(len));
  return Status::Ok();
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

Status ReadScalar(Cursor& c, GgufType type, GgufValue* v, const std::string& what) {
  v->type = type;
  const size_t size = GgufScalarSize(type);
  if (c.remaining() < size) return Status::Error("truncated file: value of " + what + At(c));
  const uint8_t* p = c.here();
  switch (type) {
    case GgufType::kUint8: v->u64 = p[0]; v->i64 = p[0]; break;
    case GgufType::kInt8: { int8_t x; std::memcpy(&x, p, 1); v->i64 = x; v->u64 = static_cast<uint64_t>(x); break; }
    case GgufType::kUint16: { uint16_t x; std::memcpy(&x, p, 2); v->u64 = x; v->i64 = x; break; }
    case GgufType::kInt16: { int16_t x; std::memcpy(&x, p, 2); v->i64 = x; v->u64 = static_cast<uint64_t>(x); break; }
    case GgufType::kUint32: { uint32_t x; std::memcpy(&x, p, 4); v->u64 = x; v->i64 = x; break; }
    case GgufType::kInt32: { int32_t x; std::memcpy(&x, p, 4); v->i64 = x; v->u64 = static_cast<uint64_t>(x); break; }
    case GgufType::kUint64: { uint64_t x; std::memcpy(&x, p, 8); v->u64 = x; v->i64 = static_cast<int64_t>(x); break; }
    case GgufType::kInt64: { int64_t x; std::memcpy(&x, p, 8); v->i64 = x; v->u64 = static_cast<uint64_t>(x); break; }
    case GgufType::kFloat32: { float x; std::memcpy(&x, p, 4); v->f64 = x; break; }
    case GgufType::kFloat64: { double x; std::memcpy(&x, p, 8); v->f64 = x; break; }
    case GgufType::kBool:
      if (p[0] > 1) return Status::Error("bool value of " + what + " is " + std::to_string(p[0]) + At(c));
      v->u64 = p[0]; v->i64 = p[0];
      break;
    default:
      return Status::Error("internal: not a scalar type");
  }
  c.Skip(size);
  return Status::Ok();
}

Status ReadValue(Cursor& c, GgufType type, GgufValue* v, const std::string& what, int depth);

Status ReadArray(Cursor& c, GgufValue* v, const std::string& what, int depth) {
  if (depth > kGgufMaxArrayDepth) {
    return Status::Error(what + ": arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth) + " levels" + At(c));
  }
  uint32_t elem_type = 0;
  uint64_t count = 0;
  if (!c.Read(&elem_type) || !c.Read(&count)) return Status::Error("truncated file: array header of " + what + At(c));
  if (!IsKnownType(elem_type)) {
    return Status::Error(what + ": unknown array element type " + std::to_string(elem_type) + At(c));
  }
  v->type = GgufType::kArray;
  v->elem_type = static_cast<GgufType>(elem_type);
  v->count = count;
  const size_t elem_size = GgufScalarSize(v->elem_type);
  if (elem_size > 0) {
    if (count > c.remaining() / elem_size) {
      return Status::Error(what + ": array of " + std::to_string(count) + " " + GgufTypeName(v->elem_type) +
                           " does not fit in the " + std::to_string(c.remaining()) + " bytes left" + At(c));
    }
    v->raw = c.here();
    if (v->elem_type == GgufType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (v->raw[i] > 1) return Status::Error(what + ": bool element " + std::to_string(i) + " is not 0 or 1");
      }
    }
    c.Skip(static_cast<size_t>(count * elem_size));
    return Status::Ok();
  }
  // Strings take at least 8 bytes each and arrays at least 12: reject absurd counts before reserving.
  const size_t min_elem = v->elem_type == GgufType::kString ? 8 : 12;
  if (count > c.remaining() / min_elem) {
    return Status::Error(what + ": array of " + std::to_string(count) + " " + GgufTypeName(v->elem_type) +
                         " cannot fit in the " + std::to_string(c.remaining()) + " bytes left" + At(c));
  }
  if (v->elem_type == GgufType::kString) {
    // Up to min_elem bytes each, so a full reservation is at most twice the bytes behind it.
    v->strings.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      // Inlined ReadString: token arrays hold 256k strings; the element's name is built only on error.
      const Cursor before = c;
      uint64_t len = 0;
      if (!c.Read(&len) || len > c.remaining()) {
        Cursor again = before;  // re-read through ReadString for its exact message
        std::string_view unused;
        return ReadString(again, &unused, what + "[" + std::to_string(i) + "]");
      }
      v->strings.emplace_back(reinterpret_cast<const char*>(c.here()), static_cast<size_t>(len));
      c.Skip(static_cast<size_t>(len));
    }
    return Status::Ok();
  }
  if (v->elem_type != GgufType::kArray) return Status::Error(what + ": internal: unexpected element type");
  v->arrays.reserve(CappedReserve(count));
  for (uint64_t i = 0; i < count; ++i) {
    v->arrays.emplace_back();
    RETURN_IF_ERROR(ReadArray(c, &v->arrays.back(), what + "[" + std::to_string(i) + "]", depth + 1));
  }
  return Status::Ok();
}

Status ReadValue(Cursor& c, GgufType type, GgufValue* v, const std::string& what, int depth) {
  if (type == GgufType::kString) {
    v->type = type;
    return ReadString(c, &v->str, what);
  }
  if (type == GgufType::kArray) return ReadArray(c, v, what, depth + 1);
  return ReadScalar(c, type, v, what);
}

// A string from the file, quoted for a terminal: control bytes escaped (a hostile file must not
// drive the terminal or break a one-line error), cut after `max_bytes` without splitting a UTF-8 sequence.
std::string Printable(std::string_view s, size_t max_bytes, char quote = '"') {
  size_t n = s.size();
  bool cut = false;
  if (n > max_bytes) {
    n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // s[n] continues a sequence
    cut = true;
  }
  std::string out(1, quote);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch == '\n') out += "\\n";
    else if (ch == '\t') out += "\\t";
    else if (ch == static_cast<unsigned char>(quote) || ch == '\\') { out += '\\'; out += static_cast<char>(ch); }
    else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else out += static_cast<char>(ch);
  }
  if (cut) out += "...";
  out.push_back(quote);
  return out;
}

// A key or tensor name inside an error message.
std::string Quoted(std::string_view s) { return Printable(s, 120, '\''); }

}  // namespace

// ---------------------------------------------------------------------------------------------
const char* GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "u8";
    case GgufType::kInt8: return "i8";
    case GgufType::kUint16: return "u16";
    case GgufType::kInt16: return "i16";
    case GgufType::kUint32: return "u32";
    case GgufType::kInt32: return "i32";
    case GgufType::kFloat32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "str";
    case GgufType::kArray: return "arr";
    case GgufType::kUint64: return "u64";
    case GgufType::kInt64: return "i64";
    case GgufType::kFloat64: return "f64";
  }
  return "?";
}

size_t GgufScalarSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 0;
  }
}

bool GgufValue::IsInteger() const {
  switch (type) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

int64_t GgufValue::IntAt(uint64_t i) const {
  const uint8_t* p = raw + i * GgufScalarSize(elem_type);
  switch (elem_type) {
    case GgufType::kUint8: case GgufType::kBool: return p[0];
    case GgufType::kInt8: { int8_t x; std::memcpy(&x, p, 1); return x; }
    case GgufType::kUint16: { uint16_t x; std::memcpy(&x, p, 2); return x; }
    case GgufType::kInt16: { int16_t x; std::memcpy(&x, p, 2); return x; }
    case GgufType::kUint32: { uint32_t x; std::memcpy(&x, p, 4); return x; }
    case GgufType::kInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case GgufType::kUint64: { uint64_t x; std::memcpy(&x, p, 8); return static_cast<int64_t>(x); }
    case GgufType::kInt64: { int64_t x; std::memcpy(&x, p, 8); return x; }
    case GgufType::kFloat32: case GgufType::kFloat64: {
      // Casting NaN or an out-of-range double to an integer is undefined: saturate instead.
      const double x = FloatAt(i);
      if (std::isnan(x)) return 0;
      if (x >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
      if (x <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(x);
    }
    default: return 0;
  }
}

double GgufValue::FloatAt(uint64_t i) const {
  const uint8_t* p = raw + i * GgufScalarSize(elem_type);
  if (elem_type == GgufType::kFloat32) { float x; std::memcpy(&x, p, 4); return x; }
  if (elem_type == GgufType::kFloat64) { double x; std::memcpy(&x, p, 8); return x; }
  return static_cast<double>(IntAt(i));
}

std::string GgufValue::ToString(size_t max_elems) const {
  auto scalar = [&]() -> std::string {
    if (type == GgufType::kBool) return u64 ? "true" : "false";
    if (IsFloat()) { char buf[64]; std::snprintf(buf, sizeof buf, "%g", f64); return buf; }
    if (type == GgufType::kUint64) return std::to_string(u64);
    return std::to_string(i64);
  };
  if (type == GgufType::kString) return Printable(str, 200);
  if (type != GgufType::kArray) return scalar();
  std::string out = "[";
  // Elements actually held: a hand-built value may claim more than it has.
  size_t n = static_cast<size_t>(count);
  if (elem_type == GgufType::kString) n = std::min(n, strings.size());
  else if (elem_type == GgufType::kArray) n = std::min(n, arrays.size());
  else if (raw == nullptr) n = 0;
  for (size_t i = 0; i < n && i < max_elems; ++i) {
    if (i) out += ", ";
    if (elem_type == GgufType::kString) out += Printable(strings[i], 40);
    else if (elem_type == GgufType::kArray) out += arrays[i].ToString(max_elems);
    else if (elem_type == GgufType::kBool) out += raw[i] ? "true" : "false";
    else if (elem_type == GgufType::kUint64) {
      uint64_t x; std::memcpy(&x, raw + i * 8, 8); out += std::to_string(x);
    } else if (elem_type == GgufType::kFloat32 || elem_type == GgufType::kFloat64) {
      char buf[64]; std::snprintf(buf, sizeof buf, "%g", FloatAt(i)); out += buf;
    } else out += std::to_string(IntAt(i));
  }
  if (count > max_elems) {
    out += std::string(max_elems > 0 ? ", " : "") + "... (" + std::to_string(count) + " " + GgufTypeName(elem_type) + ")";
  }
  return out + "]";
}

std::string GgufTensor::ShapeString() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = mapped->data();
  file->size_ = mapped->size();
  file->label_ = path;
  file->file_ = std::move(mapped);
  RETURN_IF_ERROR(file->ParseAll().WithContext("'" + path + "' is not a valid GGUF file"));
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::OpenRange(int fd, uint64_t offset, uint64_t length) {
  const std::string label = "fd " + std::to_string(fd) + " @" + std::to_string(offset) + "+" + std::to_string(length);
  ASSIGN_OR_RETURN(auto mapped, MappedFile::OpenRange(fd, offset, length, label));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = mapped->data();
  file->size_ = mapped->size();
  file->label_ = label;
  file->file_ = std::move(mapped);
  RETURN_IF_ERROR(file->ParseAll().WithContext("'" + label + "' is not a valid GGUF file"));
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* bytes, size_t size, std::string label) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = bytes;
  file->size_ = size;
  file->label_ = std::move(label);
  RETURN_IF_ERROR(file->ParseAll().WithContext("'" + file->label_ + "' is not a valid GGUF file"));
  return file;
}

Status GgufFile::ParseAll() {
  Cursor c(bytes_, size_);
  uint32_t magic = 0;
  if (!c.Read(&magic)) return Status::Error("file is too small for a GGUF header (" + std::to_string(size_) + " bytes)");
  if (magic != kGgufMagic) return Status::Error("bad magic: not a GGUF file");
  if (!c.Read(&version_)) return Status::Error("truncated file: version");
  if (version_ == 1) return Status::Error("GGUF version 1 is obsolete and not supported (convert it again)");
  if (version_ != 2 && version_ != 3) return Status::Error("unsupported GGUF version " + std::to_string(version_));
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(&n_tensors) || !c.Read(&n_kv)) return Status::Error("truncated file: header counts");
  // A key-value pair takes at least 13 bytes and a tensor info at least 24: check the counts first.
  if (n_kv > c.remaining() / 13) {
    return Status::Error("header claims " + std::to_string(n_kv) + " metadata entries, more than the file can hold");
  }
  if (n_tensors > c.remaining() / 24) {
    return Status::Error("header claims " + std::to_string(n_tensors) + " tensors, more than the file can hold");
  }

  kv_.reserve(CappedReserve(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key;
    RETURN_IF_ERROR(ReadString(c, &key, "key of metadata entry " + std::to_string(i)));
    uint32_t type = 0;
    if (!c.Read(&type)) return Status::Error("truncated file: type of key " + Quoted(key));
    if (!IsKnownType(type)) return Status::Error("key " + Quoted(key) + " has unknown value type " + std::to_string(type));
    GgufValue value;
    RETURN_IF_ERROR(ReadValue(c, static_cast<GgufType>(type), &value, "key " + Quoted(key), 0));
    if (!kv_index_.emplace(key, kv_.size()).second) return Status::Error("duplicate metadata key " + Quoted(key));
    kv_.emplace_back(key, std::move(value));
  }

  if (const GgufValue* a = Find("general.alignment")) {
    if (a->type != GgufType::kUint32) return Status::Error("general.alignment must be u32");
    if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0) {
      return Status::Error("general.alignment " + std::to_string(a->u64) + " is not a power of two");
    }
    alignment_ = static_cast<uint32_t>(a->u64);
  }

  tensors_.reserve(CappedReserve(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor& t = tensors_.emplace_back();
    RETURN_IF_ERROR(ReadString(c, &t.name, "name of tensor " + std::to_string(i)));
    const std::string what = "tensor " + Quoted(t.name);
    uint32_t n_dims = 0;
    if (!c.Read(&n_dims)) return Status::Error("truncated file: dimensions of " + what);
    if (n_dims == 0 || n_dims > kGgufMaxDims) {
      return Status::Error(what + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    t.n_dims = static_cast<int>(n_dims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      if (!c.Read(&ne)) return Status::Error("truncated file: shape of " + what);
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::Error(what + " has invalid dimension " + std::to_string(d) + " = " + std::to_string(ne));
      }
      if (static_cast<uint64_t>(n_elements) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne) {
        return Status::Error(what + " has an absurd element count (shape overflows)");
      }
      t.ne[d] = static_cast<int64_t>(ne);
      n_elements *= t.ne[d];
    }
    uint32_t type = 0;
    if (!c.Read(&type) || !c.Read(&t.offset)) return Status::Error("truncated file: type/offset of " + what);
    const DTypeInfo* info = FindDTypeInfo(type);
    if (info == nullptr) return Status::Error(what + " has unknown tensor type id " + std::to_string(type));
    t.type = info->type;
    if (t.ne[0] % info->block_size != 0) {
      return Status::Error(what + " of type " + info->name + " has a row of " + std::to_string(t.ne[0]) +
                           " values, not a multiple of its block size " + std::to_string(info->block_size));
    }
    const uint64_t blocks = static_cast<uint64_t>(n_elements) / static_cast<uint64_t>(info->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info->block_bytes)) {
      return Status::Error(what + " is absurdly large");
    }
    t.nbytes = static_cast<size_t>(blocks * static_cast<uint64_t>(info->block_bytes));
    if (t.offset % alignment_ != 0) {
      return Status::Error(what + " data offset " + std::to_string(t.offset) + " is not aligned to " +
                           std::to_string(alignment_));
    }
    if (!tensor_index_.emplace(t.name, static_cast<size_t>(i)).second) {
      return Status::Error("duplicate tensor name " + Quoted(t.name));
    }
  }

  // The data section starts at the next multiple of the alignment after the directory.
  const size_t dir_end = c.pos();
  data_offset_ = (dir_end + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_) {
    return Status::Error("truncated file: the data section would start at byte " + std::to_string(data_offset_) +
                         " but the file has " + std::to_string(size_));
  }
  const uint64_t data_size = size_ > data_offset_ ? size_ - data_offset_ : 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Status::Error("tensor " + Quoted(t.name) + " (" + std::to_string(t.nbytes) + " bytes at data offset " +
                           std::to_string(t.offset) + ") runs past the end of the file; the file is truncated or corrupt");
    }
    t.data = bytes_ + data_offset_ + t.offset;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status Missing(std::string_view key) { return Status::Error("missing metadata key '" + std::string(key) + "'"); }
Status WrongType(std::string_view key, const GgufValue& v, const char* want) {
  return Status::Error("metadata key '" + std::string(key) + "' has type " + GgufTypeName(v.type) + ", expected " + want);
}
}  // namespace

Result<uint32_t> GgufFile::GetU32(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (!v->IsInteger()) return WrongType(key, *v, "an integer");
  if (v->i64 < 0 || v->u64 > std::numeric_limits<uint32_t>::max()) {
    return Status::Error("metadata key '" + std::string(key) + "' = " + v->ToString() + " is out of range");
  }
  return static_cast<uint32_t>(v->u64);
}

Result<float> GgufFile::GetF32(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->IsFloat()) return static_cast<float>(v->f64);
  if (v->IsInteger()) return static_cast<float>(v->i64);
  return WrongType(key, *v, "a number");
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufType::kBool) return WrongType(key, *v, "bool");
  return v->u64 != 0;
}

Result<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufType::kString) return WrongType(key, *v, "a string");
  return std::string(v->str);
}

Result<uint32_t> GgufFile::GetU32Or(std::string_view key, uint32_t fallback) const {
  return Has(key) ? GetU32(key) : Result<uint32_t>(fallback);
}
Result<float> GgufFile::GetF32Or(std::string_view key, float fallback) const {
  return Has(key) ? GetF32(key) : Result<float>(fallback);
}
Result<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  return Has(key) ? GetBool(key) : Result<bool>(fallback);
}

Result<std::vector<uint32_t>> GgufFile::GetU32PerLayer(std::string_view key, uint32_t n_layers) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufType::kArray) {
    ASSIGN_OR_RETURN(uint32_t x, GetU32(key));
    return std::vector<uint32_t>(n_layers, x);
  }
  if (!v->IsNumericArray() || v->elem_type == GgufType::kFloat32 || v->elem_type == GgufType::kFloat64) {
    return WrongType(key, *v, "an integer or an integer array");
  }
  if (v->count != n_layers) {
    return Status::Error("metadata key '" + std::string(key) + "' has " + std::to_string(v->count) +
                         " entries, expected one per layer (" + std::to_string(n_layers) + ")");
  }
  std::vector<uint32_t> out(n_layers);
  for (uint32_t i = 0; i < n_layers; ++i) {
    int64_t x = v->IntAt(i);
    if (x < 0 || x > std::numeric_limits<uint32_t>::max()) {
      return Status::Error("metadata key '" + std::string(key) + "' entry " + std::to_string(i) + " is out of range");
    }
    out[i] = static_cast<uint32_t>(x);
  }
  return out;
}

Result<std::vector<float>> GgufFile::GetF32Array(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (!v->IsNumericArray()) return WrongType(key, *v, "a numeric array");
  std::vector<float> out(static_cast<size_t>(v->count));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(v->FloatAt(i));
  return out;
}

Result<std::vector<int32_t>> GgufFile::GetI32Array(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (!v->IsNumericArray()) return WrongType(key, *v, "an integer array");
  std::vector<int32_t> out(static_cast<size_t>(v->count));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(v->IntAt(i));
  return out;
}

Result<std::vector<bool>> GgufFile::GetBoolArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (!v->IsNumericArray()) return WrongType(key, *v, "a bool array");
  std::vector<bool> out(static_cast<size_t>(v->count));
  for (size_t i = 0; i < out.size(); ++i) out[i] = v->IntAt(i) != 0;
  return out;
}

const std::vector<std::string_view>* GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v || v->type != GgufType::kArray || v->elem_type != GgufType::kString) return nullptr;
  return &v->strings;
}

}  // namespace gemlet
