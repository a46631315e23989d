// SentencePiece's tokenizer.model (a serialized ModelProto) read by a minimal, bounds-checked
// protobuf wire-format reader: the pieces, and the trainer/normalizer settings that change encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gemlet {

// ModelProto.SentencePiece. `type` uses SentencePiece's numbers, which are also TokenType's:
// NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6.
struct SpmPiece {
  std::string text;
  float score = 0.0f;
  int32_t type = 1;
};

// The fields of sentencepiece_model.proto that we use; an absent field has the .proto's default.
struct SpmModel {
  std::vector<SpmPiece> pieces;

  // TrainerSpec (ModelProto field 2).
  int32_t model_type = 1;  // ModelType: UNIGRAM 1, BPE 2, WORD 3, CHAR 4
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;

  // NormalizerSpec (ModelProto field 3).
  std::string normalizer_name;
  size_t precompiled_charsmap_size = 0;  // bytes of a compiled normalisation (NFKC...) table
  size_t normalization_rule_tsv_size = 0;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;

  // denormalizer_spec (ModelProto field 5): only whether it would rewrite decoded text.
  size_t denormalizer_charsmap_size = 0;
};

enum : int32_t { kSpmUnigram = 1, kSpmBpe = 2, kSpmWord = 3, kSpmChar = 4 };

// Parses a ModelProto. Rejects, with the byte offset where it went wrong: truncated or malformed
// wire data (lengths and varints past the end, deprecated groups, a known field with the wrong wire
// type), a piece that is empty, duplicated, has a non-finite score or an unknown type, and a model
// without pieces, trainer_spec or normalizer_spec (so a file cut short is never taken for a smaller
// model). Unknown fields are skipped, as protobuf does.
Result<SpmModel> ParseSpmModel(std::string_view bytes);
Result<SpmModel> ReadSpmModelFile(const std::string& path);

// Whether the model is one that gemlet's SentencePiece-BPE tokenizer (tokenizer.ggml.model "llama")
// encodes exactly as SentencePiece does: BPE, whitespace escaped to U+2581 as a prefix, and no
// normalisation beyond that (Gemma's "identity" normalizer). The error says what is not supported.
Status CheckSpmModelSupported(const SpmModel& model);

}  // namespace gemlet
