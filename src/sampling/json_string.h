// The byte automaton of a JSON string body: strict UTF-8 (no overlongs, surrogates or code points
// above U+10FFFF), JSON escapes, no raw control characters, ending at the closing quote.
#pragma once

#include <array>
#include <cstdint>

namespace gemlet::json_string {

// States between bytes (a json_string state is a uint8_t). Every state but kNormal is inside one character.
inline constexpr uint8_t kNormal = 0;         // between characters
inline constexpr uint8_t kEscape = 1;         // after '\'
inline constexpr uint8_t kHex4 = 2;           // after "\u": four hex digits to go (no surrogates D800..DFFF)
inline constexpr uint8_t kHex3 = 3;
inline constexpr uint8_t kHex3AfterD = 4;     // after "\uD": the next digit must be 0-7
inline constexpr uint8_t kHex2 = 5;
inline constexpr uint8_t kHex1 = 6;
inline constexpr uint8_t kCont1 = 7;          // UTF-8: one continuation byte (80..BF) to go
inline constexpr uint8_t kCont2 = 8;
inline constexpr uint8_t kCont2AfterE0 = 9;   // the first of two must be A0..BF (no overlongs)
inline constexpr uint8_t kCont2AfterED = 10;  // the first of two must be 80..9F (no surrogates)
inline constexpr uint8_t kCont3 = 11;
inline constexpr uint8_t kCont3AfterF0 = 12;  // 90..BF (no overlongs)
inline constexpr uint8_t kCont3AfterF4 = 13;  // 80..8F (nothing above U+10FFFF)
inline constexpr uint8_t kNumStates = 14;
// What Next() answers besides a state.
inline constexpr uint8_t kClosed = 0xFE;   // the closing quote
inline constexpr uint8_t kInvalid = 0xFF;  // the byte cannot come next

// Bytes still needed to get from a state back to kNormal (the length of its shortest finish).
inline constexpr std::array<uint8_t, kNumStates> kPendingBytes = {0, 1, 4, 3, 3, 2, 1, 1, 2, 2, 2, 3, 3, 3};
// The most kPendingBytes holds.
inline constexpr uint8_t kMaxPendingBytes = 4;

namespace internal {
constexpr bool IsHex(int b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

constexpr uint8_t Step(int s, int b) {
  switch (s) {
    case kNormal:
      if (b == '"') return kClosed;
      if (b == '\\') return kEscape;
      if (b < 0x20) return kInvalid;  // control characters must be escaped
      if (b < 0x80) return kNormal;
      if (b < 0xC2) return kInvalid;  // continuation bytes, overlong C0/C1
      if (b < 0xE0) return kCont1;
      if (b == 0xE0) return kCont2AfterE0;
      if (b == 0xED) return kCont2AfterED;
      if (b < 0xF0) return kCont2;
      if (b == 0xF0) return kCont3AfterF0;
      if (b < 0xF4) return kCont3;
      if (b == 0xF4) return kCont3AfterF4;
      return kInvalid;
    case kEscape:
      if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') return kNormal;
      return b == 'u' ? kHex4 : kInvalid;
    case kHex4:
      if (b == 'd' || b == 'D') return kHex3AfterD;
      return IsHex(b) ? kHex3 : kInvalid;
    case kHex3AfterD: return (b >= '0' && b <= '7') ? kHex2 : kInvalid;
    case kHex3: return IsHex(b) ? kHex2 : kInvalid;
    case kHex2: return IsHex(b) ? kHex1 : kInvalid;
    case kHex1: return IsHex(b) ? kNormal : kInvalid;
    case kCont1: return (b >= 0x80 && b <= 0xBF) ? kNormal : kInvalid;
    case kCont2: return (b >= 0x80 && b <= 0xBF) ? kCont1 : kInvalid;
    case kCont2AfterE0: return (b >= 0xA0 && b <= 0xBF) ? kCont1 : kInvalid;
    case kCont2AfterED: return (b >= 0x80 && b <= 0x9F) ? kCont1 : kInvalid;
    case kCont3: return (b >= 0x80 && b <= 0xBF) ? kCont2 : kInvalid;
    case kCont3AfterF0: return (b >= 0x90 && b <= 0xBF) ? kCont2 : kInvalid;
    case kCont3AfterF4: return (b >= 0x80 && b <= 0x8F) ? kCont2 : kInvalid;
    default: return kInvalid;
  }
}

constexpr std::array<std::array<uint8_t, 256>, kNumStates> MakeTable() {
  std::array<std::array<uint8_t, 256>, kNumStates> t{};
  for (int s = 0; s < kNumStates; ++s) {
    for (int b = 0; b < 256; ++b) t[s][b] = Step(s, b);
  }
  return t;
}
inline constexpr auto kTable = MakeTable();
}  // namespace internal

// The state after `byte`, or kClosed / kInvalid. A character starts when `state` is kNormal and the
// answer is neither kClosed nor kInvalid (escapes and multi-byte characters count once).
inline uint8_t Next(uint8_t state, uint8_t byte) { return internal::kTable[state][byte]; }

}  // namespace gemlet::json_string
