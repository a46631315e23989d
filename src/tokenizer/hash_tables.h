// Open-addressing hash tables for the tokenizer: token text -> id and packed id pair -> merge.
// Built once when a vocabulary loads and read-only afterwards, so lookups need no locking.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace gemlet::tokenizer_internal {

// A fast 64-bit hash for short byte strings (token texts are mostly under 16 bytes).
inline uint64_t HashBytes(const char* p, size_t n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (n * kMul);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w ^ (uint64_t{n} << 59)) * kMul;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

inline uint64_t HashU64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

// Maps strings to int32 ids. The strings live in the owner's arena; each slot keeps the id, a hash
// tag and the text's place in the arena, so a lookup costs one slot read and one arena compare.
class StringIdTable {
 public:
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{0, -1, 0, 0});
    mask_ = cap - 1;
  }

  // `offset`/`len` locate the text in `arena`; a later duplicate text wins (llama.cpp's token_to_id).
  void Insert(const char* arena, uint32_t offset, uint32_t len, int32_t id) {
    const uint64_t h = HashBytes(arena + offset, len);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{tag, id, offset, len};
        return;
      }
      if (s.tag == tag && s.len == len && std::memcmp(arena + s.offset, arena + offset, len) == 0) {
        s.id = id;
        return;
      }
    }
  }

  int32_t Find(const char* arena, std::string_view text) const {
    if (slots_.empty()) return -1;
    const uint64_t h = HashBytes(text.data(), text.size());
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.len == text.size() && std::memcmp(arena + s.offset, text.data(), text.size()) == 0) {
        return s.id;
      }
    }
  }

  // Starts loading the slot `text` hashes to (a lookup soon after will not wait on memory).
  void Prefetch(std::string_view text) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[HashBytes(text.data(), text.size()) & mask_]);
  }
  size_t Bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    uint32_t tag;
    int32_t id;
    uint32_t offset;
    uint32_t len;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Maps a u64 key to a u64 value; the key ~0 is reserved as the empty marker.
class U64Table {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{kEmpty, 0});
    mask_ = cap - 1;
    size_ = 0;
  }
  size_t size() const { return size_; }

  // Inserts unless the key is present; returns false (keeping the old value) when it was.
  bool InsertIfAbsent(uint64_t key, uint64_t value) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    for (size_t i = HashU64(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == kEmpty) {
        s = Slot{key, value};
        ++size_;
        return true;
      }
      if (s.key == key) return false;
    }
  }

  void Prefetch(uint64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[HashU64(key) & mask_]);
  }

  const uint64_t* Find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = HashU64(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

  size_t Bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    uint64_t key;
    uint64_t value;
  };
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    Reserve(old.empty() ? 8 : old.size());
    for (const Slot& s : old) {
      if (s.key != kEmpty) InsertIfAbsent(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace gemlet::tokenizer_internal
