// Encoding (added-token split, then BPE with a heap over a linked list of symbols) and decoding.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "gguf/gguf_reader.h"

namespace gemlet {

namespace {

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 '▁'
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The UTF-8 sequence at p (n bytes available): > 0 the length of a complete valid character,
// 0 a valid start that needs more bytes, -k the first k bytes can never begin a valid character.
int Utf8Step(const unsigned char* p, size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  int len;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= n) return 0;
    const unsigned b = p[i];
    if (b < (i == 1 ? lo : 0x80u) || b > (i == 1 ? hi : 0xBFu)) return -i;
  }
  return len;
}

// Length of the character at s[i]: a whole valid character, or 1 for a stray byte.
size_t CharLen(std::string_view s, size_t i) {
  const int step = Utf8Step(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i);
  return step > 0 ? static_cast<size_t>(step) : 1;
}

void AppendReplacement(size_t count, std::string* out) {
  for (size_t i = 0; i < count; ++i) out->append(kReplacement);
}

// HF's ByteFallback decoder: a run of byte tokens is kept if it is valid UTF-8 as a whole,
// otherwise each of its bytes becomes U+FFFD.
void FlushByteRun(std::string* bytes, std::string* out) {
  if (bytes->empty()) return;
  if (IsValidUtf8(*bytes)) {
    out->append(*bytes);
  } else {
    AppendReplacement(bytes->size(), out);
  }
  bytes->clear();
}

}  // namespace

size_t ValidUtf8Prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const int step = Utf8Step(p + i, s.size() - i);
    if (step <= 0) break;
    i += static_cast<size_t>(step);
  }
  return i;
}

Result<Tokenizer> Tokenizer::FromGguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(file));
  return Tokenizer(std::move(vocab));
}

// ---------------------------------------------------------------------------------------------
// Encoding

struct Tokenizer::Scratch {
  struct Symbol {
    int32_t start;  // byte offset in the word; fixed for the symbol's life
    int32_t len;    // 0 once merged into its left neighbour
    int32_t prev;
    int32_t next;
    int32_t id;     // token id, -1 for a character the vocabulary lacks
  };
  struct Candidate {
    uint32_t priority;
    int32_t left;
    int32_t right;
    int32_t len;  // left.len + right.len when queued; a mismatch means the entry is stale
    int32_t id;
  };
  // Heap order: lowest priority value first, then the leftmost pair (HF and SentencePiece agree).
  static bool Worse(const Candidate& a, const Candidate& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.left > b.left;
  }

  // Word cache for one Encode call: natural text repeats words, and a repeated word needs no BPE.
  struct CacheEntry {
    std::string_view word;  // into `text`
    uint32_t ids_begin;
    uint32_t ids_len;
  };
  static constexpr size_t kCacheMaxEntries = size_t{1} << 16;
  static constexpr size_t kCacheMaxWord = 64;

  CacheEntry* CacheSlot(std::string_view w, uint64_t h) {
    if (cache.empty()) cache.assign(64, CacheEntry{{}, 0, 0});
    const size_t mask = cache.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      if (cache[i].word.data() == nullptr || cache[i].word == w) return &cache[i];
    }
  }
  void CacheInsert(CacheEntry* slot, std::string_view w, const int32_t* ids, size_t n) {
    if (cache_used >= kCacheMaxEntries) return;
    *slot = CacheEntry{w, static_cast<uint32_t>(cache_ids.size()), static_cast<uint32_t>(n)};
    cache_ids.insert(cache_ids.end(), ids, ids + n);
    if (++cache_used * 2 > cache.size()) {
      std::vector<CacheEntry> old = std::move(cache);
      cache.assign(old.size() * 2, CacheEntry{{}, 0, 0});
      for (const CacheEntry& e : old) {
        if (e.word.data()) *CacheSlot(e.word, tokenizer_internal::HashBytes(e.word.data(), e.word.size())) = e;
      }
    }
  }

  std::string text;
  std::string word;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<CacheEntry> cache;
  std::vector<int32_t> cache_ids;
  size_t cache_used = 0;
};

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  Encode(text, options, &out);
  return out;
}

void Tokenizer::Encode(std::string_view text, const EncodeOptions& options, std::vector<int32_t>* out) const {
  if (options.add_bos && bos_id() >= 0) out->push_back(bos_id());
  Scratch scratch;

  // The only normalisation Gemma has: ' ' -> '▁' (HF Replace normalizer, llama.cpp
  // escape_whitespaces). Added tokens are matched on the escaped text against escaped token texts,
  // so both HF's "▁▁" and llama.cpp's "  " spellings of the whitespace tokens match a run of spaces.
  std::string& t = scratch.text;
  t.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      t.append(kSpaceEscape);
    } else {
      t.push_back(c);
    }
  }

  // Added tokens first, leftmost-longest on the text (HF's AddedVocabulary); BPE runs on the rest.
  // SentencePiece's dummy prefix (not used by Gemma) goes before every text segment, as in llama.cpp.
  const bool prefix = vocab_.add_space_prefix();
  size_t segment = 0;
  for (size_t i = 0; i < t.size();) {
    if (!vocab_.MayStartAddedToken(static_cast<uint8_t>(t[i]))) {
      ++i;
      continue;
    }
    const auto [id, len] = vocab_.MatchAddedToken(t, i, options.parse_special);
    if (len == 0) {
      ++i;
      continue;
    }
    if (i > segment) EncodeSegment(std::string_view(t).substr(segment, i - segment), prefix, scratch, out);
    out->push_back(id);
    i += len;
    segment = i;
  }
  if (segment < t.size()) EncodeSegment(std::string_view(t).substr(segment), prefix, scratch, out);

  if (options.add_eos && eos_id() >= 0) out->push_back(eos_id());
}

void Tokenizer::EncodeSegment(std::string_view segment, bool prefix_space, Scratch& scratch,
                              std::vector<int32_t>* out) const {
  std::string_view word = segment;
  if (prefix_space) {
    scratch.word.assign(kSpaceEscape);
    scratch.word.append(segment);
    word = scratch.word;
  }
  // Cached words must point into `scratch.text`, which lives for the whole call.
  const bool cache = !prefix_space;
  if (vocab_.model() != VocabModel::kBpe) {
    BpeWords(word, cache, scratch, out);
    return;
  }
  // Gemma 4: runs of newlines are split from the rest, and a run that is itself a token is taken
  // whole (llama.cpp's gemma4 pre-tokenizer, ggml-org/llama.cpp#21343).
  for (size_t i = 0; i < word.size();) {
    size_t j = i;
    if (word[i] == '\n') {
      while (j < word.size() && word[j] == '\n') ++j;
      const std::string_view run = word.substr(i, j - i);
      const int32_t id = vocab_.Find(run);
      if (id >= 0) {
        out->push_back(id);
      } else {
        BpeWord(run, scratch, out);
      }
    } else {
      while (j < word.size() && word[j] != '\n') ++j;
      BpeWords(word.substr(i, j - i), cache, scratch, out);
    }
    i = j;
  }
}

// Gemma has no pre-tokenizer: BPE runs over the whole text between added tokens. A merge can only
// join text across a '▁' if some token holds the character before it followed by '▁', so the text
// is cut before each other '▁' into words that BPE handles independently (and that repeat).
void Tokenizer::BpeWords(std::string_view text, bool cache, Scratch& scratch, std::vector<int32_t>* out) const {
  auto emit = [&](std::string_view w) {
    if (!cache || w.size() > Scratch::kCacheMaxWord) {
      BpeWord(w, scratch, out);
      return;
    }
    const uint64_t h = tokenizer_internal::HashBytes(w.data(), w.size());
    Scratch::CacheEntry* slot = scratch.CacheSlot(w, h);
    if (slot->word.data() != nullptr) {
      out->insert(out->end(), scratch.cache_ids.begin() + slot->ids_begin,
                  scratch.cache_ids.begin() + slot->ids_begin + slot->ids_len);
      return;
    }
    const size_t begin = out->size();
    BpeWord(w, scratch, out);
    scratch.CacheInsert(slot, w, out->data() + begin, out->size() - begin);
  };
  size_t start = 0;
  for (size_t pos = text.find(kSpaceEscape, 1); pos != std::string_view::npos; pos = text.find(kSpaceEscape, pos + 1)) {
    if (pos >= 3 && text.compare(pos - 3, 3, kSpaceEscape) == 0) continue;  // inside a run of spaces
    size_t c = pos - 1;  // start of the character before the '▁'
    while (c > start && pos - c < 4 && (static_cast<uint8_t>(text[c]) & 0xC0) == 0x80) --c;
    if (!vocab_.CanSplitBeforeSpace(text.substr(c, pos - c))) continue;
    emit(text.substr(start, pos - start));
    start = pos;
  }
  emit(text.substr(start));
}

void Tokenizer::BpeWord(std::string_view word, Scratch& scratch, std::vector<int32_t>* out) const {
  using Symbol = Scratch::Symbol;
  using Candidate = Scratch::Candidate;
  if (word.empty()) return;
  const size_t word_begin = out->size();

  // One symbol per UTF-8 character.
  std::vector<Symbol>& syms = scratch.symbols;
  syms.clear();
  for (size_t i = 0; i < word.size();) {
    const size_t len = CharLen(word, i);
    const int32_t index = static_cast<int32_t>(syms.size());
    syms.push_back(Symbol{static_cast<int32_t>(i), static_cast<int32_t>(len), index - 1, index + 1,
                          vocab_.FindChar(word.substr(i, len))});
    i += len;
  }
  syms.back().next = -1;

  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  const bool ranked = vocab_.has_merges();
  auto try_add = [&](int32_t left, int32_t right) {
    const Symbol& l = syms[left];
    const Symbol& r = syms[right];
    // A character outside the vocabulary falls back to bytes and never merges (HF BPE).
    if (l.id < 0 || r.id < 0) return;
    Vocab::Merge merge;
    const bool found = ranked ? vocab_.FindMerge(l.id, r.id, &merge)
                              : vocab_.FindScoreMerge(word.substr(l.start, l.len + r.len), &merge);
    if (!found) return;
    heap.push_back(Candidate{merge.priority, left, right, l.len + r.len, merge.id});
    std::push_heap(heap.begin(), heap.end(), Scratch::Worse);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) try_add(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Scratch::Worse);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = syms[c.left];
    Symbol& r = syms[c.right];
    if (l.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;  // stale
    l.len += r.len;
    l.id = c.id;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.len = 0;
    if (l.prev >= 0) try_add(l.prev, c.left);
    if (l.next >= 0) try_add(c.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const Symbol& s = syms[i];
    if (s.id >= 0) {
      out->push_back(s.id);
    } else {
      EmitUnknown(word.substr(s.start, s.len), word_begin, out);
    }
  }
}

void Tokenizer::EmitUnknown(std::string_view ch, size_t word_begin, std::vector<int32_t>* out) const {
  bool all_bytes = true;
  for (char b : ch) all_bytes = all_bytes && vocab_.ByteToken(static_cast<uint8_t>(b)) >= 0;
  if (all_bytes) {
    for (char b : ch) out->push_back(vocab_.ByteToken(static_cast<uint8_t>(b)));
    return;
  }
  // No byte pieces: <unk>, with consecutive unknowns of one word fused (HF fuse_unk).
  const int32_t unk = unk_id();
  if (unk >= 0 && (out->size() == word_begin || out->back() != unk)) out->push_back(unk);
}

// ---------------------------------------------------------------------------------------------
// Decoding

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (IsByte(id)) return std::string(1, static_cast<char>(vocab_.ByteValue(id)));
  std::string out;
  AppendPieceText(id, &out);
  return out;
}

void Tokenizer::AppendPieceText(int32_t id, std::string* out) const {
  const std::string_view text = vocab_.Text(id);
  size_t start = 0;
  for (size_t pos = text.find(kSpaceEscape); pos != std::string_view::npos; pos = text.find(kSpaceEscape, start)) {
    out->append(text.substr(start, pos - start));
    out->push_back(' ');
    start = pos + kSpaceEscape.size();
  }
  out->append(text.substr(start));
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::string out;
  std::string bytes;
  // SentencePiece drops the dummy-prefix space again; Gemma vocabularies have no dummy prefix.
  bool strip_prefix = vocab_.add_space_prefix();
  for (int32_t id : ids) {
    if (!vocab_.Valid(id)) continue;
    const int b = vocab_.ByteValue(id);
    if (b >= 0) {
      bytes.push_back(static_cast<char>(b));
      continue;
    }
    const TokenType type = vocab_.Type(id);
    const bool special = type == TokenType::kControl || type == TokenType::kUnknown;
    if (options.skip_special && special) continue;
    FlushByteRun(&bytes, &out);
    const size_t before = out.size();
    AppendPieceText(id, &out);
    if (strip_prefix && !special) {
      if (out.size() > before && out[before] == ' ') out.erase(before, 1);
      strip_prefix = false;
    }
  }
  FlushByteRun(&bytes, &out);
  return out;
}

std::string StreamDecoder::Push(int32_t id) {
  std::string out;
  Push(id, &out);
  return out;
}

void StreamDecoder::Push(int32_t id, std::string* out) {
  const Vocab& vocab = tokenizer_->vocab();
  if (!vocab.Valid(id)) return;
  const int b = vocab.ByteValue(id);
  if (b >= 0) {
    pending_.push_back(static_cast<char>(b));
    Drain(out, /*final=*/false);
    return;
  }
  const TokenType type = vocab.Type(id);
  if (options_.skip_special && (type == TokenType::kControl || type == TokenType::kUnknown)) return;
  Drain(out, /*final=*/true);
  const size_t before = out->size();
  tokenizer_->AppendPieceText(id, out);
  if (strip_prefix_ && type != TokenType::kControl && type != TokenType::kUnknown) {
    if (out->size() > before && (*out)[before] == ' ') out->erase(before, 1);
    strip_prefix_ = false;
  }
}

std::string StreamDecoder::Flush() {
  std::string out;
  Flush(&out);
  return out;
}

void StreamDecoder::Flush(std::string* out) { Drain(out, /*final=*/true); }

void StreamDecoder::Drain(std::string* out, bool final) {
  const auto* p = reinterpret_cast<const unsigned char*>(pending_.data());
  const size_t n = pending_.size();
  size_t i = 0;
  while (i < n) {
    const int step = Utf8Step(p + i, n - i);
    if (step > 0) {
      out->append(pending_, i, static_cast<size_t>(step));
      i += static_cast<size_t>(step);
    } else if (step == 0) {
      if (!final) break;  // a valid start: wait for the rest of the character
      AppendReplacement(n - i, out);
      i = n;
    } else {
      AppendReplacement(static_cast<size_t>(-step), out);
      i += static_cast<size_t>(-step);
    }
  }
  pending_.erase(0, i);
}

}  // namespace gemlet
