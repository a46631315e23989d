// The ModelProto reader: protobuf wire format (varints, fixed32/64, length-delimited fields) with
// every length checked against the bytes left, and field numbers from sentencepiece_model.proto.
#include "tokenizer/spm_model.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "base/mapped_file.h"

namespace gemlet {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// Reads one message's bytes; offsets in errors count from the start of the file (`base`).
class WireReader {
 public:
  WireReader(std::string_view bytes, size_t base) : bytes_(bytes), base_(base) {}

  bool done() const { return pos_ == bytes_.size(); }
  size_t offset() const { return base_ + pos_; }

  Status Varint(uint64_t* out) {
    const size_t start = pos_;
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ == bytes_.size()) return ErrorAt(start, "varint runs past the end of its message");
      const uint8_t b = static_cast<uint8_t>(bytes_[pos_++]);
      if (shift == 63 && b > 1) return ErrorAt(start, "varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return Status::Ok();
      }
    }
    return ErrorAt(start, "varint longer than 10 bytes");
  }

  Status Tag(uint32_t* field, uint32_t* wire) {
    const size_t start = pos_;
    uint64_t key = 0;
    RETURN_IF_ERROR(Varint(&key));
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    if (key >> 3 == 0 || key >> 3 > 0x1FFFFFFF) return ErrorAt(start, "invalid field number " + std::to_string(key >> 3));
    if (*wire == kStartGroup || *wire == kEndGroup) {
      return ErrorAt(start, "field " + std::to_string(*field) + " uses the deprecated group encoding");
    }
    if (*wire != kVarint && *wire != kFixed64 && *wire != kLen && *wire != kFixed32) {
      return ErrorAt(start, "field " + std::to_string(*field) + " has invalid wire type " + std::to_string(*wire));
    }
    return Status::Ok();
  }

  // A length-delimited payload; `*at` gets its file offset for nested readers.
  Status Bytes(std::string_view* out, size_t* at) {
    const size_t start = pos_;
    uint64_t len = 0;
    RETURN_IF_ERROR(Varint(&len));
    if (len > bytes_.size() - pos_) {
      return ErrorAt(start, "length " + std::to_string(len) + " runs past the end of its message (" +
                                std::to_string(bytes_.size() - pos_) + " bytes left)");
    }
    *out = bytes_.substr(pos_, static_cast<size_t>(len));
    *at = base_ + pos_;
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }

  Status Fixed32(uint32_t* out) {
    if (bytes_.size() - pos_ < 4) return ErrorAt(pos_, "fixed32 runs past the end of its message");
    uint8_t b[4];
    std::memcpy(b, bytes_.data() + pos_, 4);
    *out = uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
    pos_ += 4;
    return Status::Ok();
  }

  Status Skip(uint32_t wire) {
    uint64_t v = 0;
    uint32_t f32 = 0;
    std::string_view s;
    size_t at = 0;
    switch (wire) {
      case kVarint: return Varint(&v);
      case kFixed32: return Fixed32(&f32);
      case kLen: return Bytes(&s, &at);
      default:  // kFixed64: Tag() admits no other type
        if (bytes_.size() - pos_ < 8) return ErrorAt(pos_, "fixed64 runs past the end of its message");
        pos_ += 8;
        return Status::Ok();
    }
  }

  Status ErrorAt(size_t pos, const std::string& what) const {
    return Status::Error("at byte " + std::to_string(base_ + pos) + ": " + what);
  }

 private:
  std::string_view bytes_;
  size_t base_;
  size_t pos_ = 0;
};

// A known field with the wrong wire type is corruption, not an extension.
Status Expect(size_t tag_at, const char* name, uint32_t field, uint32_t wire, uint32_t want) {
  if (wire == want) return Status::Ok();
  return Status::Error("at byte " + std::to_string(tag_at) + ": " + name + " (field " + std::to_string(field) +
                       ") has wire type " + std::to_string(wire) + ", expected " + std::to_string(want));
}

// proto int32 fields are varints of the value sign-extended to 64 bits; protobuf keeps the low 32.
int32_t AsInt32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v & 0xFFFFFFFFu)); }

Status ParsePiece(std::string_view bytes, size_t base, SpmPiece* piece) {
  WireReader r(bytes, base);
  bool has_text = false;
  while (!r.done()) {
    const size_t tag_at = r.offset();
    uint32_t field = 0, wire = 0;
    RETURN_IF_ERROR(r.Tag(&field, &wire));
    if (field == 1) {  // string piece
      RETURN_IF_ERROR(Expect(tag_at, "piece", field, wire, kLen));
      std::string_view s;
      size_t at = 0;
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      piece->text.assign(s);
      has_text = true;
    } else if (field == 2) {  // float score
      RETURN_IF_ERROR(Expect(tag_at, "score", field, wire, kFixed32));
      uint32_t bits = 0;
      RETURN_IF_ERROR(r.Fixed32(&bits));
      piece->score = std::bit_cast<float>(bits);
    } else if (field == 3) {  // Type type
      RETURN_IF_ERROR(Expect(tag_at, "type", field, wire, kVarint));
      uint64_t v = 0;
      RETURN_IF_ERROR(r.Varint(&v));
      if (v < 1 || v > 6) return r.ErrorAt(tag_at - base, "unknown piece type " + std::to_string(v));
      piece->type = static_cast<int32_t>(v);
    } else {
      RETURN_IF_ERROR(r.Skip(wire));
    }
  }
  if (!has_text || piece->text.empty()) return Status::Error("at byte " + std::to_string(base) + ": empty piece");
  if (!std::isfinite(piece->score)) {
    return Status::Error("at byte " + std::to_string(base) + ": piece '" + piece->text + "' has a non-finite score");
  }
  return Status::Ok();
}

Status ParseTrainerSpec(std::string_view bytes, size_t base, SpmModel* m) {
  WireReader r(bytes, base);
  while (!r.done()) {
    const size_t tag_at = r.offset();
    uint32_t field = 0, wire = 0;
    RETURN_IF_ERROR(r.Tag(&field, &wire));
    int32_t* int_slot = nullptr;
    bool* bool_slot = nullptr;
    const char* name = nullptr;
    switch (field) {
      case 3: int_slot = &m->model_type, name = "trainer_spec.model_type"; break;
      case 40: int_slot = &m->unk_id, name = "trainer_spec.unk_id"; break;
      case 41: int_slot = &m->bos_id, name = "trainer_spec.bos_id"; break;
      case 42: int_slot = &m->eos_id, name = "trainer_spec.eos_id"; break;
      case 43: int_slot = &m->pad_id, name = "trainer_spec.pad_id"; break;
      case 24: bool_slot = &m->treat_whitespace_as_suffix, name = "trainer_spec.treat_whitespace_as_suffix"; break;
      case 35: bool_slot = &m->byte_fallback, name = "trainer_spec.byte_fallback"; break;
      default: break;
    }
    if (name == nullptr) {
      RETURN_IF_ERROR(r.Skip(wire));
      continue;
    }
    RETURN_IF_ERROR(Expect(tag_at, name, field, wire, kVarint));
    uint64_t v = 0;
    RETURN_IF_ERROR(r.Varint(&v));
    if (int_slot) *int_slot = AsInt32(v);
    if (bool_slot) *bool_slot = v != 0;
  }
  return Status::Ok();
}

// NormalizerSpec, for normalizer_spec (field 3) and denormalizer_spec (field 5).
struct Normalizer {
  std::string name;
  size_t charsmap = 0, rule_tsv = 0;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

Status ParseNormalizerSpec(std::string_view bytes, size_t base, Normalizer* n) {
  WireReader r(bytes, base);
  while (!r.done()) {
    const size_t tag_at = r.offset();
    uint32_t field = 0, wire = 0;
    RETURN_IF_ERROR(r.Tag(&field, &wire));
    if (field == 1 || field == 2 || field == 6) {  // name, precompiled_charsmap, normalization_rule_tsv
      RETURN_IF_ERROR(Expect(tag_at, "normalizer string", field, wire, kLen));
      std::string_view s;
      size_t at = 0;
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      if (field == 1) n->name.assign(s);
      if (field == 2) n->charsmap = s.size();
      if (field == 6) n->rule_tsv = s.size();
    } else if (field >= 3 && field <= 5) {  // add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces
      RETURN_IF_ERROR(Expect(tag_at, "normalizer flag", field, wire, kVarint));
      uint64_t v = 0;
      RETURN_IF_ERROR(r.Varint(&v));
      bool* slot = field == 3 ? &n->add_dummy_prefix : field == 4 ? &n->remove_extra_whitespaces : &n->escape_whitespaces;
      *slot = v != 0;
    } else {
      RETURN_IF_ERROR(r.Skip(wire));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<SpmModel> ParseSpmModel(std::string_view bytes) {
  SpmModel m;
  WireReader r(bytes, 0);
  bool has_trainer = false, has_normalizer = false;
  Normalizer normalizer, denormalizer;
  while (!r.done()) {
    const size_t tag_at = r.offset();
    uint32_t field = 0, wire = 0;
    RETURN_IF_ERROR(r.Tag(&field, &wire));
    if (field < 1 || field > 5 || field == 4) {  // 4: self_test_data, unused here
      RETURN_IF_ERROR(r.Skip(wire));
      continue;
    }
    static const char* const kNames[] = {"", "pieces", "trainer_spec", "normalizer_spec", "", "denormalizer_spec"};
    RETURN_IF_ERROR(Expect(tag_at, kNames[field], field, wire, kLen));
    std::string_view sub;
    size_t at = 0;
    RETURN_IF_ERROR(r.Bytes(&sub, &at));
    if (field == 1) {
      SpmPiece piece;
      RETURN_IF_ERROR(ParsePiece(sub, at, &piece).WithContext("piece " + std::to_string(m.pieces.size())));
      m.pieces.push_back(std::move(piece));
    } else if (field == 2) {  // repeated occurrences of a message field merge, as in protobuf
      RETURN_IF_ERROR(ParseTrainerSpec(sub, at, &m));
      has_trainer = true;
    } else if (field == 3) {
      RETURN_IF_ERROR(ParseNormalizerSpec(sub, at, &normalizer));
      has_normalizer = true;
    } else {
      RETURN_IF_ERROR(ParseNormalizerSpec(sub, at, &denormalizer));
    }
  }
  // SentencePiece always writes all three; a file cut short between fields still parses, so their
  // absence is how truncation shows.
  if (m.pieces.empty()) return Status::Error("no pieces (not a SentencePiece model, or truncated)");
  if (!has_trainer) return Status::Error("no trainer_spec (truncated?)");
  if (!has_normalizer) return Status::Error("no normalizer_spec (truncated?)");

  std::unordered_set<std::string_view> seen;
  seen.reserve(m.pieces.size() * 2);
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    if (!seen.insert(m.pieces[i].text).second) {
      return Status::Error("piece " + std::to_string(i) + " '" + m.pieces[i].text + "' is a duplicate");
    }
  }

  m.normalizer_name = std::move(normalizer.name);
  m.precompiled_charsmap_size = normalizer.charsmap;
  m.normalization_rule_tsv_size = normalizer.rule_tsv;
  m.add_dummy_prefix = normalizer.add_dummy_prefix;
  m.remove_extra_whitespaces = normalizer.remove_extra_whitespaces;
  m.escape_whitespaces = normalizer.escape_whitespaces;
  m.denormalizer_charsmap_size = denormalizer.charsmap;
  return m;
}

Result<SpmModel> ReadSpmModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  const std::string_view bytes(reinterpret_cast<const char*>(file->data()), file->size());
  Result<SpmModel> m = ParseSpmModel(bytes);
  if (!m.ok()) return Status::Error(path + ": not a valid SentencePiece model: " + m.message());
  return m;
}

Status CheckSpmModelSupported(const SpmModel& m) {
  switch (m.model_type) {
    case kSpmBpe: break;
    case kSpmUnigram:
      return Status::Error("it is a SentencePiece unigram model; gemlet's SentencePiece tokenizer is BPE only (as Gemma's)");
    case kSpmWord:
    case kSpmChar:
      return Status::Error(std::string("it is a SentencePiece ") + (m.model_type == kSpmWord ? "word" : "char") +
                           " model; gemlet's SentencePiece tokenizer is BPE only (as Gemma's)");
    default: return Status::Error("unknown SentencePiece model_type " + std::to_string(m.model_type));
  }
  // Gemma: normalizer "identity", only ' ' -> U+2581; anything else would encode differently.
  const std::string hint = "; gemlet's tokenizer only escapes spaces to U+2581, as Gemma's \"identity\" normalizer does";
  if (m.precompiled_charsmap_size > 0 || m.normalization_rule_tsv_size > 0) {
    return Status::Error("its normalizer '" + m.normalizer_name + "' rewrites text (e.g. NFKC)" + hint);
  }
  if (m.remove_extra_whitespaces) return Status::Error("its normalizer removes extra whitespace" + hint);
  if (!m.escape_whitespaces) return Status::Error("its normalizer does not escape whitespace" + hint);
  if (m.treat_whitespace_as_suffix) return Status::Error("it puts U+2581 after words (treat_whitespace_as_suffix)" + hint);
  if (m.denormalizer_charsmap_size > 0) return Status::Error("it has a denormalizer, which gemlet's decoder does not apply");
  return Status::Ok();
}

}  // namespace gemlet
