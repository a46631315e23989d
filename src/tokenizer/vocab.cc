// Vocab construction: reads tokenizer.ggml.* keys and builds the text index, merge table,
// byte-fallback table and added-token trie.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>

#include "gguf/gguf_reader.h"

namespace gemlet {

namespace {

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 '▁'

// "<0x0A>" -> 10; -1 when the text is not a byte-fallback piece.
int ParseBytePiece(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Maps a float to a u32 whose unsigned order is the float's order.
uint32_t OrderedKey(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

TokenType ToTokenType(int32_t t) {
  return (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::kUndefined;
}

template <typename T>
Result<std::optional<T>> OptionalKey(const GgufFile& file, std::string_view key,
                                     Result<T> (GgufFile::*get)(std::string_view) const) {
  if (!file.Has(key)) return std::optional<T>();
  auto v = (file.*get)(key);
  if (!v.ok()) return v.status();
  return std::optional<T>(*v);
}

}  // namespace

Result<Vocab> Vocab::FromGguf(const GgufFile& file) {
  VocabSpec spec;
  ASSIGN_OR_RETURN(std::string model, file.GetString("tokenizer.ggml.model"));
  spec.model = model;

  const std::vector<std::string_view>* tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens) return Status::Error("tokenizer.ggml.tokens is missing or not a string array");
  spec.tokens = *tokens;

  std::vector<float> scores;
  if (file.Has("tokenizer.ggml.scores")) {
    ASSIGN_OR_RETURN(scores, file.GetF32Array("tokenizer.ggml.scores"));
  }
  spec.scores = scores;
  std::vector<int32_t> types;
  if (file.Has("tokenizer.ggml.token_type")) {
    ASSIGN_OR_RETURN(types, file.GetI32Array("tokenizer.ggml.token_type"));
  }
  spec.types = types;
  if (file.Has("tokenizer.ggml.merges")) {
    const std::vector<std::string_view>* merges = file.GetStringArray("tokenizer.ggml.merges");
    if (!merges) return Status::Error("tokenizer.ggml.merges is not a string array");
    spec.merges = *merges;
  }

  struct IdKey {
    const char* key;
    std::optional<int64_t>* out;
  };
  const IdKey id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos},     {"tokenizer.ggml.eos_token_id", &spec.eos},
      {"tokenizer.ggml.eot_token_id", &spec.eot},     {"tokenizer.ggml.unknown_token_id", &spec.unk},
      {"tokenizer.ggml.padding_token_id", &spec.pad}, {"tokenizer.ggml.mask_token_id", &spec.mask},
  };
  for (const IdKey& k : id_keys) {
    ASSIGN_OR_RETURN(std::optional<uint32_t> v, OptionalKey<uint32_t>(file, k.key, &GgufFile::GetU32));
    if (v) *k.out = *v;
  }
  ASSIGN_OR_RETURN(spec.add_bos, OptionalKey<bool>(file, "tokenizer.ggml.add_bos_token", &GgufFile::GetBool));
  ASSIGN_OR_RETURN(spec.add_eos, OptionalKey<bool>(file, "tokenizer.ggml.add_eos_token", &GgufFile::GetBool));
  ASSIGN_OR_RETURN(spec.add_space_prefix,
                   OptionalKey<bool>(file, "tokenizer.ggml.add_space_prefix", &GgufFile::GetBool));
  return Build(spec);
}

Result<Vocab> Vocab::Build(const VocabSpec& spec) {
  Vocab v;
  RETURN_IF_ERROR(v.BuildTables(spec));
  return v;
}

Status Vocab::BuildTables(const VocabSpec& spec) {
  RETURN_IF_ERROR(CheckSpec(spec));
  RETURN_IF_ERROR(BuildTexts(spec));
  BuildByteAndSpaceTables(spec);
  RETURN_IF_ERROR(BuildMergeOrder(spec));
  BuildAddedTokenTrie(spec);
  return SetSpecialTokens(spec);
}

// The model kind and the arrays' sizes.
Status Vocab::CheckSpec(const VocabSpec& spec) {
  if (spec.model == "llama") {
    model_ = VocabModel::kSpm;
  } else if (spec.model == "gemma4") {
    model_ = VocabModel::kBpe;
    if (spec.merges.empty()) return Status::Error("tokenizer.ggml.merges is required for tokenizer model 'gemma4'");
  } else {
    return Status::Error("tokenizer.ggml.model '" + std::string(spec.model) +
                         "' is not supported (expected 'llama' or 'gemma4')");
  }
  const size_t n = spec.tokens.size();
  if (n == 0) return Status::Error("tokenizer.ggml.tokens is empty");
  if (n >= (size_t{1} << 31)) return Status::Error("tokenizer.ggml.tokens has too many entries");
  if (!spec.scores.empty() && spec.scores.size() < n) {
    return Status::Error("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) + " entries for " +
                         std::to_string(n) + " tokens");
  }
  if (!spec.types.empty() && spec.types.size() < n) {
    return Status::Error("tokenizer.ggml.token_type has " + std::to_string(spec.types.size()) +
                         " entries for " + std::to_string(n) + " tokens");
  }

  return Status::Ok();
}

Status Vocab::BuildTexts(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  // Texts, types, scores.
  size_t total = 0;
  for (std::string_view t : spec.tokens) total += t.size();
  if (total >= (size_t{1} << 32)) return Status::Error("tokenizer.ggml.tokens is too large");
  arena_.reserve(total);
  offsets_.resize(n + 1);
  types_.resize(n);
  byte_value_.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    offsets_[i] = static_cast<uint32_t>(arena_.size());
    arena_.append(spec.tokens[i]);
    types_[i] = spec.types.empty() ? TokenType::kNormal : ToTokenType(spec.types[i]);
  }
  offsets_[n] = static_cast<uint32_t>(arena_.size());
  if (!spec.scores.empty()) scores_.assign(spec.scores.begin(), spec.scores.begin() + n);

  text_index_.Reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (i + 16 < n) text_index_.Prefetch(spec.tokens[i + 16]);
    const uint32_t len = offsets_[i + 1] - offsets_[i];
    if (len > 0) text_index_.Insert(arena_.data(), offsets_[i], len, static_cast<int32_t>(i));
  }
  return Status::Ok();
}

void Vocab::BuildByteAndSpaceTables(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  // Byte fallback: <0xNN> pieces typed as bytes (or any such piece when the file has no types).
  byte_token_.fill(-1);
  for (size_t i = 0; i < n; ++i) {
    if (types_[i] != TokenType::kByte && !spec.types.empty()) continue;
    const int b = ParseBytePiece(spec.tokens[i]);
    if (b < 0) continue;
    byte_value_[i] = static_cast<int16_t>(b);
    if (byte_token_[b] < 0) byte_token_[b] = static_cast<int32_t>(i);
  }
  // Characters that some token joins to a following '▁' (other than '▁' itself).
  space_glue_.clear();
  for (size_t i = 0; i < n; ++i) {
    const std::string_view t = spec.tokens[i];
    for (size_t pos = t.find(kSpaceEscape, 1); pos != std::string_view::npos; pos = t.find(kSpaceEscape, pos + 1)) {
      if (pos >= kSpaceEscape.size() && t.substr(pos - kSpaceEscape.size(), kSpaceEscape.size()) == kSpaceEscape) continue;
      size_t start = pos - 1;
      while (start > 0 && pos - start < 4 && (static_cast<uint8_t>(t[start]) & 0xC0) == 0x80) --start;
      const std::string c(t.substr(start, pos - start));
      if (std::find(space_glue_.begin(), space_glue_.end(), c) == space_glue_.end()) space_glue_.push_back(c);
    }
  }
  for (int c = 0; c < 128; ++c) {
    const char ch = static_cast<char>(c);
    ascii_token_[c] = Find(std::string_view(&ch, 1));
  }

}

Status Vocab::BuildMergeOrder(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  // Merge order: ranked merges when present (what HF's tokenizer.json holds), else SentencePiece
  // scores (what llama.cpp writes for Gemma 1-3 from tokenizer.model).
  if (!spec.merges.empty()) {
    merges_.Reserve(spec.merges.size());
    auto halves = [&spec](size_t rank, std::string_view* left, std::string_view* right) {
      // The first space after position 0 separates the halves, as in llama.cpp.
      const std::string_view m = spec.merges[rank];
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
      if (sp == std::string_view::npos) return false;
      *left = m.substr(0, sp);
      *right = m.substr(sp + 1);
      return true;
    };
    // Lookups are random accesses into tables far larger than the cache, so both passes prefetch a
    // few entries ahead. The merged piece is nearly always the previous merge's result or the next
    // id (merges are ranked in vocabulary order), so it is compared there before any lookup.
    constexpr size_t kAhead = 8;
    struct Resolved {
      int32_t left, right, merged;
    };
    std::vector<Resolved> resolved(spec.merges.size(), Resolved{-1, -1, -1});
    // Resolves ranks [begin, end); returns the first rank without a space, or end. Read-only on
    // the text index, so ranges run side by side: a Gemma 4 vocabulary has 515k merges, and
    // resolving them is most of a model's start (~150 ms on one core of this machine).
    auto resolve = [&](size_t begin, size_t end) -> size_t {
      int32_t last_merged = -1;
      std::string joined;
      for (size_t rank = begin; rank < end; ++rank) {
        std::string_view left, right;
        if (rank + kAhead < end && halves(rank + kAhead, &left, &right)) {
          text_index_.Prefetch(left);
          text_index_.Prefetch(right);
        }
        if (!halves(rank, &left, &right)) return rank;
        const int32_t l = Find(left), r = Find(right);
        if (l < 0 || r < 0) continue;  // unreachable merge: its halves are not tokens
        auto is_joined = [&](int32_t id) {
          if (id < 0 || id >= static_cast<int32_t>(n)) return false;
          const std::string_view t = Text(id);
          return t.size() == left.size() + right.size() && t.substr(0, left.size()) == left &&
                 t.substr(left.size()) == right;
        };
        int32_t merged;
        if (is_joined(last_merged)) {
          merged = last_merged;
        } else if (is_joined(last_merged + 1)) {
          merged = last_merged + 1;
        } else {
          joined.assign(left);
          joined.append(right);
          merged = Find(joined);
          if (merged < 0) continue;  // unreachable merge: its result is not a token
        }
        last_merged = merged;
        resolved[rank] = Resolved{l, r, merged};
      }
      return end;
    };
    const size_t n_merges = spec.merges.size();
    constexpr size_t kMergesPerThread = 64 * 1024;
    const size_t n_parts = std::clamp<size_t>(n_merges / kMergesPerThread, 1,
                                              std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4));
    std::vector<size_t> bad(n_parts, 0);
    std::vector<std::thread> helpers;
    auto part = [&](size_t p) {
      const size_t begin = n_merges * p / n_parts, end = n_merges * (p + 1) / n_parts;
      const size_t stop = resolve(begin, end);
      bad[p] = stop < end ? stop : n_merges;
    };
    for (size_t p = 1; p < n_parts; ++p) helpers.emplace_back(part, p);
    part(0);
    for (std::thread& t : helpers) t.join();
    for (size_t first_bad : bad) {
      if (first_bad < n_merges) {
        return Status::Error("tokenizer.ggml.merges[" + std::to_string(first_bad) + "] has no space");
      }
    }
    auto key = [](const Resolved& m) { return (uint64_t(uint32_t(m.left)) << 32) | uint32_t(m.right); };
    for (size_t rank = 0; rank < resolved.size(); ++rank) {
      if (rank + kAhead < resolved.size() && resolved[rank + kAhead].merged >= 0) {
        merges_.Prefetch(key(resolved[rank + kAhead]));
      }
      const Resolved& m = resolved[rank];
      if (m.merged >= 0) merges_.InsertIfAbsent(key(m), (uint64_t(rank) << 32) | uint32_t(m.merged));
    }
  } else {
    score_priority_.resize(n);
    for (size_t i = 0; i < n; ++i) score_priority_[i] = OrderedKey(-Score(static_cast<int32_t>(i)));
  }

  return Status::Ok();
}

void Vocab::BuildAddedTokenTrie(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  // Added-token trie over the escaped texts.
  added_edges_.Reserve(4096);
  added_terminal_.assign(1, -1);
  added_first_byte_.fill(false);
  std::string escaped;
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = types_[i];
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) continue;
    const std::string_view text = spec.tokens[i];
    if (text.empty()) continue;
    escaped.clear();
    for (char c : text) {
      if (c == ' ') {
        escaped.append(kSpaceEscape);
      } else {
        escaped.push_back(c);
      }
    }
    added_first_byte_[static_cast<uint8_t>(escaped[0])] = true;
    uint64_t node = 0;
    for (char c : escaped) {
      const uint64_t key = (node << 8) | static_cast<uint8_t>(c);
      const uint64_t next = added_terminal_.size();
      if (added_edges_.InsertIfAbsent(key, next)) {
        added_terminal_.push_back(-1);
        node = next;
      } else {
        node = *added_edges_.Find(key);
      }
    }
    if (added_terminal_[node] < 0) added_terminal_[node] = static_cast<int32_t>(i);
  }

}

Status Vocab::SetSpecialTokens(const VocabSpec& spec) {
  const size_t n = spec.tokens.size();
  // Special ids: the file's keys, then by text. llama.cpp falls back to bos 1, eos 2, unk 0 for a
  // SentencePiece vocabulary without keys; in Gemma's vocabularies 1 is <eos>, so nothing is guessed.
  special_ = SpecialTokens{};
  auto apply = [n](const std::optional<int64_t>& key, int32_t* id) {
    if (key && *key >= 0 && static_cast<uint64_t>(*key) < n) *id = static_cast<int32_t>(*key);
  };
  apply(spec.bos, &special_.bos);
  apply(spec.eos, &special_.eos);
  apply(spec.eot, &special_.eot);
  apply(spec.unk, &special_.unk);
  apply(spec.pad, &special_.pad);
  apply(spec.mask, &special_.mask);
  for (int32_t* id : {&special_.bos, &special_.eos, &special_.unk}) {
    if (*id >= static_cast<int64_t>(n)) *id = -1;
  }
  if (special_.eot < 0) special_.eot = Find("<end_of_turn>");
  if (special_.eot < 0) special_.eot = Find("<turn|>");
  special_.start_of_turn = Find("<start_of_turn>");
  if (special_.start_of_turn < 0) special_.start_of_turn = Find("<|turn>");

  add_bos_ = spec.add_bos.value_or(model_ == VocabModel::kSpm);
  // llama.cpp forces BOS on for Gemma 4 (ggml-org/llama.cpp#21500): the model needs it.
  if (model_ == VocabModel::kBpe) add_bos_ = true;
  if (add_bos_ && special_.bos < 0) {
    return Status::Error("the vocabulary adds a BOS token but names none (tokenizer.ggml.bos_token_id is " +
                         std::string(spec.bos ? "out of range" : "missing") + ")");
  }
  add_eos_ = spec.add_eos.value_or(false);
  add_space_prefix_ = spec.add_space_prefix.value_or(model_ == VocabModel::kSpm);
  return Status::Ok();
}

std::pair<int32_t, size_t> Vocab::MatchAddedToken(std::string_view text, size_t pos, bool parse_special) const {
  std::pair<int32_t, size_t> best{-1, 0};
  uint64_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const uint64_t* next = added_edges_.Find((node << 8) | static_cast<uint8_t>(text[i]));
    if (!next) break;
    node = *next;
    const int32_t id = added_terminal_[node];
    if (id >= 0 && (parse_special || types_[id] == TokenType::kUserDefined)) best = {id, i - pos + 1};
  }
  return best;
}

size_t Vocab::Bytes() const {
  size_t bytes = arena_.capacity() + offsets_.capacity() * sizeof(uint32_t) + types_.capacity() * sizeof(TokenType) +
                 scores_.capacity() * sizeof(float) + score_priority_.capacity() * sizeof(uint32_t) +
                 byte_value_.capacity() * sizeof(int16_t) + added_terminal_.capacity() * sizeof(int32_t) +
                 text_index_.Bytes() + merges_.Bytes() + added_edges_.Bytes();
  for (const std::string& g : space_glue_) bytes += sizeof(std::string) + g.capacity();
  return bytes;
}

}  // namespace gemlet
