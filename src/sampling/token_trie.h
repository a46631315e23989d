// TokenVocabulary: what a grammar matcher needs to know about a model's tokens, built once per model
// and shared by every matcher: each token's bytes, a byte trie over the ordinary tokens (so a mask
// walks shared prefixes once and prunes whole subtrees), and per-state tables of how every token
// continues a JSON string.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sampling/json_string.h"

namespace gemlet {

// The byte trie in preorder: node 0 is the root (no byte); a node's subtree is the range
// [i, skip[i]). Preorder of a trie of sorted byte strings is their sorted order, so each node's tokens
// are one range of `tokens`.
struct TokenTrie {
  std::vector<uint8_t> byte;            // [nodes] the byte leading to the node
  std::vector<uint16_t> depth;          // [nodes] bytes from the root
  std::vector<uint32_t> skip;           // [nodes] the first node after the subtree
  std::vector<uint32_t> token_begin;    // [nodes + 1] node i's tokens: tokens[token_begin[i], token_begin[i+1])
  std::vector<int32_t> tokens;          // token ids in preorder of their nodes
  uint32_t max_depth = 0;

  uint32_t size() const { return static_cast<uint32_t>(byte.size()); }
};

// How every token continues a JSON string body from one json_string state, so that a matcher inside
// a string answers with a bitset instead of walking the 600k-node trie.
struct StringTokenTable {
  enum Class : uint32_t { kInvalid = 0, kInside = 1, kCloses = 2 };
  // An entry: Class (2 bits) | end state (4) | characters started, saturated (10) | for kCloses, the
  // offset just past the closing quote (16).
  static Class ClassOf(uint32_t e) { return static_cast<Class>(e & 3); }
  static uint8_t EndState(uint32_t e) { return static_cast<uint8_t>((e >> 2) & 15); }
  static uint32_t Chars(uint32_t e) { return (e >> 6) & 1023; }
  static uint32_t CloseOffset(uint32_t e) { return e >> 16; }

  std::vector<uint64_t> inside;          // bitset of the tokens that stay inside the string
  std::vector<int32_t> inside_ids;       // the same tokens, by characters started (sparse: most states allow few)
  std::vector<uint32_t> inside_entries;  // their entries
  std::vector<std::pair<int32_t, uint32_t>> closing;  // tokens that close the string, and their entries
  uint32_t max_inside_chars = 0;         // most characters an inside token starts
};

class TokenVocabulary {
 public:
  // token_bytes[i]: the bytes token i stands for, as the detokenizer writes them (a byte-fallback
  // token <0xNN> is the single byte NN; SentencePiece's U+2581 is a space). special[i]: control,
  // unknown and unused tokens, which never appear inside the output. end_tokens: the tokens that end
  // generation (Gemma: <eos>, <end_of_turn>); they are allowed exactly when the output is complete.
  static Result<std::shared_ptr<const TokenVocabulary>> Create(std::vector<std::string> token_bytes,
                                                               std::vector<bool> special,
                                                               std::vector<int32_t> end_tokens);

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  std::string_view bytes(int32_t id) const {
    return std::string_view(arena_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  bool is_end(int32_t id) const { return flags_[id] & kEndFlag; }
  // Special, end or empty: a token the trie leaves out.
  bool is_excluded(int32_t id) const { return flags_[id] != 0; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  // Whether some ordinary token is exactly this one byte (the shortest completions need them).
  bool has_single_byte_token(uint8_t b) const { return single_byte_[b]; }
  const TokenTrie& trie() const { return trie_; }
  // Built on first use for each state; safe to call from several threads.
  const StringTokenTable& string_table(uint8_t state) const;
  // Heap bytes held (the string tables built so far included).
  size_t Bytes() const;

  TokenVocabulary(const TokenVocabulary&) = delete;
  TokenVocabulary& operator=(const TokenVocabulary&) = delete;

 private:
  TokenVocabulary() = default;
  void BuildStringTable(uint8_t state, StringTokenTable* table) const;

  static constexpr uint8_t kSpecialFlag = 1;
  static constexpr uint8_t kEndFlag = 2;
  static constexpr uint8_t kEmptyFlag = 4;

  std::string arena_;               // all token bytes back to back
  std::vector<uint32_t> offsets_;   // size()+1 offsets into arena_
  std::vector<uint8_t> flags_;
  std::vector<int32_t> end_tokens_;
  std::array<bool, 256> single_byte_{};
  TokenTrie trie_;
  mutable std::array<std::once_flag, json_string::kNumStates> string_once_;
  mutable std::array<std::unique_ptr<StringTokenTable>, json_string::kNumStates> string_tables_;
  mutable std::array<std::atomic<bool>, json_string::kNumStates> string_built_{};
};

}  // namespace gemlet
