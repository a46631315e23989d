// Test helper: SentencePiece ModelProto bytes built field by field (protobuf wire format), for small
// valid models and hand-made corrupt ones.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gemlet::test {

class ProtoBytes {
 public:
  ProtoBytes& Varint(uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  ProtoBytes& Tag(uint32_t field, uint32_t wire) { return Varint((uint64_t{field} << 3) | wire); }
  // int32/enum/bool: negative values are sign-extended to ten bytes, as protobuf writes them.
  ProtoBytes& Int(uint32_t field, int64_t v) { return Tag(field, 0).Varint(static_cast<uint64_t>(v)); }
  ProtoBytes& Bytes(uint32_t field, std::string_view s) {
    Tag(field, 2).Varint(s.size());
    bytes_.append(s);
    return *this;
  }
  ProtoBytes& Float(uint32_t field, float f) {
    Tag(field, 5);
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
    return *this;
  }
  ProtoBytes& Message(uint32_t field, const ProtoBytes& m) { return Bytes(field, m.str()); }
  ProtoBytes& Raw(std::string_view s) {
    bytes_.append(s);
    return *this;
  }
  const std::string& str() const { return bytes_; }

 private:
  std::string bytes_;
};

struct SpmTestPiece {
  std::string text;
  float score = 0.0f;
  int type = 1;  // NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6
};

// A model in the layout spm_train writes: pieces, trainer_spec, normalizer_spec.
struct SpmTestModel {
  std::vector<SpmTestPiece> pieces;
  int model_type = 2;  // BPE
  int unk_id = 3, bos_id = 2, eos_id = 1, pad_id = 0;
  bool byte_fallback = true;
  std::string normalizer_name = "identity";
  std::string charsmap;
  bool add_dummy_prefix = false;
  bool remove_extra_whitespaces = false;
  bool write_remove_extra_whitespaces = true;  // false: leave it at the .proto default (true)
};

inline std::string SpmModelBytes(const SpmTestModel& m) {
  ProtoBytes model;
  for (const SpmTestPiece& p : m.pieces) {
    model.Message(1, ProtoBytes().Bytes(1, p.text).Float(2, p.score).Int(3, p.type));
  }
  model.Message(2, ProtoBytes()
                       .Bytes(1, "input.txt")
                       .Int(3, m.model_type)
                       .Int(4, static_cast<int64_t>(m.pieces.size()))
                       .Int(35, m.byte_fallback)
                       .Int(40, m.unk_id)
                       .Int(41, m.bos_id)
                       .Int(42, m.eos_id)
                       .Int(43, m.pad_id));
  ProtoBytes normalizer;
  normalizer.Bytes(1, m.normalizer_name).Bytes(2, m.charsmap).Int(3, m.add_dummy_prefix);
  if (m.write_remove_extra_whitespaces) normalizer.Int(4, m.remove_extra_whitespaces);
  model.Message(3, normalizer);
  return model.str();
}

// Gemma's layout in miniature: <pad> <eos> <bos> <unk>, two turn markers, "\n", 256 byte pieces,
// then the normal pieces given (highest score first, as spm_train orders them).
inline SpmTestModel GemmaLikeSpmModel(const std::vector<std::string>& normal) {
  SpmTestModel m;
  m.pieces = {{"<pad>", 0, 3}, {"<eos>", 0, 3}, {"<bos>", 0, 3}, {"<unk>", 0, 2},
              {"<start_of_turn>", 0, 4}, {"<end_of_turn>", 0, 4}, {"\n", 0, 4}};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) m.pieces.push_back({std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, 6});
  for (size_t i = 0; i < normal.size(); ++i) m.pieces.push_back({normal[i], -static_cast<float>(i), 1});
  return m;
}

}  // namespace gemlet::test
