// Tokenizer: text <-> token ids for Gemma 1/2/3 (SentencePiece BPE) and Gemma 4 (ranked BPE),
// matching Hugging Face `tokenizers`; StreamDecoder turns ids into text that is always whole UTF-8.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace gemlet {

class GgufFile;

struct EncodeOptions {
  bool add_bos = false;  // put the BOS token first (when the vocabulary has one)
  bool add_eos = false;  // put the EOS token last (Gemma never does this by default)
  // true: the text of a control token ("<start_of_turn>") in the input becomes that token.
  // false: it stays plain text, so user input cannot inject turn markers. User-defined added
  // tokens ("\n\n", "<b>") are matched either way, as in HF with split_special_tokens=True.
  bool parse_special = true;
};

struct DecodeOptions {
  bool skip_special = false;  // drop control and unknown tokens (<bos>, <end_of_turn>)
};

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  static Result<Tokenizer> FromGguf(const GgufFile& file);

  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Appends to `out`; the allocation-conscious form.
  void Encode(std::string_view text, const EncodeOptions& options, std::vector<int32_t>* out) const;

  // Whole-sequence decode, exactly as HF's Gemma decoder (Replace ▁, ByteFallback, Fuse): a run of
  // byte tokens that is not valid UTF-8 becomes one U+FFFD per byte. Ids out of range are skipped.
  std::string Decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // The vocabulary piece ("▁world", "<0x0D>"), as HF's tokens / SentencePiece's IdToPiece.
  std::string_view TokenPiece(int32_t id) const { return vocab_.Valid(id) ? vocab_.Text(id) : std::string_view(); }
  bool IsControl(int32_t id) const { return vocab_.Valid(id) && vocab_.Type(id) == TokenType::kControl; }
  bool IsByte(int32_t id) const { return vocab_.Valid(id) && vocab_.ByteValue(id) >= 0; }

  int32_t bos_id() const { return vocab_.special().bos; }
  int32_t eos_id() const { return vocab_.special().eos; }
  int32_t eot_id() const { return vocab_.special().eot; }
  int32_t start_of_turn_id() const { return vocab_.special().start_of_turn; }
  int32_t pad_id() const { return vocab_.special().pad; }
  int32_t unk_id() const { return vocab_.special().unk; }
  int32_t vocab_size() const { return vocab_.size(); }
  const Vocab& vocab() const { return vocab_; }
  size_t Bytes() const { return vocab_.Bytes(); }  // what its tables hold on the heap

  // Appends the text of one non-byte token (▁ -> ' '); used by Decode and StreamDecoder.
  void AppendPieceText(int32_t id, std::string* out) const;
  // The bytes one token adds to the output: a byte-fallback token its byte (Decode({id}) would give
  // U+FFFD for a lone one), a piece its text. What a grammar over the output's bytes matches.
  std::string TokenBytes(int32_t id) const;
  // Control, unknown and unused tokens: never part of generated text.
  bool IsSpecial(int32_t id) const {
    const TokenType t = vocab_.Type(id);
    return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused;
  }

 private:
  struct Scratch;
  void EncodeSegment(std::string_view segment, bool prefix_space, Scratch& scratch, std::vector<int32_t>* out) const;
  void BpeWords(std::string_view text, bool cache, Scratch& scratch, std::vector<int32_t>* out) const;
  void BpeWord(std::string_view word, Scratch& scratch, std::vector<int32_t>* out) const;
  void EmitUnknown(std::string_view ch, size_t word_begin, std::vector<int32_t>* out) const;

  Vocab vocab_;
};

// Decodes one id at a time for streaming output. Each Push returns only complete UTF-8: bytes of a
// character split across byte-fallback tokens are held until the character is whole. A sequence that
// can no longer complete (a bad byte, or a non-byte token arrives) becomes U+FFFD per byte, as does
// whatever is still held at Flush(). For valid text the concatenated output equals Decode().
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(&tokenizer), options_(options), strip_prefix_(tokenizer.vocab().add_space_prefix()) {}

  std::string Push(int32_t id);
  void Push(int32_t id, std::string* out);
  std::string Flush();
  void Flush(std::string* out);
  void Reset() {
    pending_.clear();
    strip_prefix_ = tokenizer_->vocab().add_space_prefix();
  }
  bool has_pending() const { return !pending_.empty(); }

 private:
  // Moves every decidable byte of pending_ to `out`; keeps a valid but unfinished tail.
  void Drain(std::string* out, bool final);

  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  bool strip_prefix_;  // drop the SentencePiece dummy-prefix space of the first piece (not Gemma)
  std::string pending_;
};

// Length of the valid UTF-8 prefix of `s` that ends on a character boundary (strict: no
// overlongs, surrogates or code points above U+10FFFF).
size_t ValidUtf8Prefix(std::string_view s);
inline bool IsValidUtf8(std::string_view s) { return ValidUtf8Prefix(s) == s.size(); }

}  // namespace gemlet
