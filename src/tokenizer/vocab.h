// Vocab: a Gemma tokenizer vocabulary (tokens, types, scores or merges, special ids) built from
// GGUF tokenizer.ggml.* metadata, with the lookup tables that encoding needs.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/hash_tables.h"

namespace gemlet {

class GgufFile;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type / SentencePiece piece types).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// How text becomes pieces. Both run BPE over UTF-8 characters of the text with ' ' escaped to
// U+2581; they differ in where the merge order comes from and in pre-splitting.
enum class VocabModel {
  kSpm,  // tokenizer.ggml.model "llama": SentencePiece BPE (Gemma 1/2/3).
  kBpe,  // tokenizer.ggml.model "gemma4": BPE with ranked merges, newline runs split off first.
};

struct SpecialTokens {
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t eot = -1;            // end of turn: <end_of_turn> (Gemma 1-3) or <turn|> (Gemma 4)
  int32_t start_of_turn = -1;  // <start_of_turn> or <|turn>
  int32_t unk = -1;
  int32_t pad = -1;
  int32_t mask = -1;
};

// Everything a Vocab is built from, as views into storage the caller keeps alive during Build():
// a mapped GGUF file, or TokenizerMetadata read from a Hugging Face tokenizer.json.
struct VocabSpec {
  std::string_view model;                    // tokenizer.ggml.model
  std::span<const std::string_view> tokens;  // tokenizer.ggml.tokens
  std::span<const float> scores;             // empty: all 0
  std::span<const int32_t> types;            // empty: all normal
  std::span<const std::string_view> merges;  // "left right"; empty for SentencePiece vocabs
  std::optional<int64_t> bos, eos, eot, unk, pad, mask;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

class Vocab {
 public:
  static Result<Vocab> FromGguf(const GgufFile& file);
  static Result<Vocab> Build(const VocabSpec& spec);

  VocabModel model() const { return model_; }
  int32_t size() const { return static_cast<int32_t>(types_.size()); }
  // Heap bytes the vocabulary's tables hold (texts, scores, lookups, merges): its share of a
  // process's anonymous memory.
  size_t Bytes() const;
  bool Valid(int32_t id) const { return id >= 0 && id < size(); }

  // The vocabulary text of a token ("▁world", "<0x0D>", "<start_of_turn>").
  std::string_view Text(int32_t id) const {
    return std::string_view(arena_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  TokenType Type(int32_t id) const { return types_[id]; }
  float Score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[id]; }
  // The byte a <0xNN> byte-fallback token stands for, or -1.
  int ByteValue(int32_t id) const { return byte_value_[id]; }
  int32_t ByteToken(uint8_t b) const { return byte_token_[b]; }
  // Token id of an exact vocabulary text, or -1.
  int32_t Find(std::string_view text) const { return text_index_.Find(arena_.data(), text); }

  const SpecialTokens& special() const { return special_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool has_merges() const { return merges_.size() > 0; }

  // ---- used by the encoder ----
  // Merge of two adjacent pieces: the merged token and its priority (lower merges first).
  struct Merge {
    uint32_t priority;
    int32_t id;
  };
  // Ranked merges (tokenizer.ggml.merges) when the vocabulary has them.
  bool FindMerge(int32_t left, int32_t right, Merge* out) const {
    const uint64_t* v = merges_.Find((uint64_t(uint32_t(left)) << 32) | uint32_t(right));
    if (!v) return false;
    *out = Merge{static_cast<uint32_t>(*v >> 32), static_cast<int32_t>(*v & 0xFFFFFFFFu)};
    return true;
  }
  // SentencePiece merge: the concatenated text must be a normal token; a higher score merges first.
  bool FindScoreMerge(std::string_view joined, Merge* out) const {
    const int32_t id = Find(joined);
    if (id < 0 || types_[id] != TokenType::kNormal) return false;
    *out = Merge{score_priority_[id], id};
    return true;
  }
  // Token of a single character, cached for ASCII.
  int32_t FindChar(std::string_view ch) const {
    if (ch.size() == 1 && static_cast<uint8_t>(ch[0]) < 0x80) return ascii_token_[static_cast<uint8_t>(ch[0])];
    return Find(ch);
  }

  // Whether BPE may treat the text before and after a '▁' as separate words: true unless some token
  // holds `prev_char` followed by '▁' (in Gemma only ">▁</"), since no merge can then cross the gap.
  bool CanSplitBeforeSpace(std::string_view prev_char) const {
    for (const std::string& c : space_glue_) {
      if (c == prev_char) return false;
    }
    return true;
  }

  // Added tokens (control, user-defined, unknown) are matched on the text before BPE, with their
  // spaces escaped like the text. Returns the longest one starting at `pos` (length 0: none).
  // `parse_special` false skips control and unknown tokens, so they stay plain text.
  bool MayStartAddedToken(uint8_t b) const { return added_first_byte_[b]; }
  std::pair<int32_t, size_t> MatchAddedToken(std::string_view text, size_t pos, bool parse_special) const;

 private:
  Status BuildTables(const VocabSpec& spec);
  // BuildTables' steps, in order.
  Status CheckSpec(const VocabSpec& spec);
  Status BuildTexts(const VocabSpec& spec);
  void BuildByteAndSpaceTables(const VocabSpec& spec);  // byte fallback, '▁' glue, ASCII ids
  Status BuildMergeOrder(const VocabSpec& spec);        // ranked merges, else score priorities
  void BuildAddedTokenTrie(const VocabSpec& spec);
  Status SetSpecialTokens(const VocabSpec& spec);

  VocabModel model_ = VocabModel::kSpm;
  std::string arena_;              // all token texts back to back
  std::vector<uint32_t> offsets_;  // size()+1 offsets into arena_
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  std::vector<uint32_t> score_priority_;  // order-preserving key of -score, for SentencePiece merges
  std::vector<int16_t> byte_value_;
  std::array<int32_t, 256> byte_token_{};
  std::array<int32_t, 128> ascii_token_{};
  std::vector<std::string> space_glue_;  // characters some token has right before a '▁'
  tokenizer_internal::StringIdTable text_index_;
  tokenizer_internal::U64Table merges_;  // (left << 32 | right) -> (rank << 32 | merged id)

  // Byte trie of added-token texts: edges (node << 8 | byte) -> child; terminal id per node.
  tokenizer_internal::U64Table added_edges_;
  std::vector<int32_t> added_terminal_;
  std::array<bool, 256> added_first_byte_{};

  SpecialTokens special_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
};

}  // namespace gemlet
