// Which language a piece of text is in, as the task presets need it: one of the languages below
// (BCP-47 tags), or Chinese with English words in it ("mixed"). Scripts decide where a script is one
// language's (kana, Hangul, Thai, Greek ...) or where the library cannot tell (Simplified against
// Traditional Chinese); among the languages a script shares, a character n-gram model trained on
// Debian's message catalogs decides, with CLD2's (Debian's libcld2) answer as a second opinion, and a
// regression over the same features between Bosnian, Croatian, Serbian and Slovenian.
#pragma once

#include <span>
#include <string_view>

namespace gemlet::flows {

struct LanguageInfo {
  std::string_view tag;  // "fr", "zh-Hant": what DetectLanguage answers and translate --to takes
  std::string_view en;   // "French": what the English prompts say
  std::string_view zh;   // "法文": what the Chinese prompts say
};

// Every language DetectLanguage can answer, in a fixed order (English first).
std::span<const LanguageInfo> SupportedLanguages();
// nullptr for a tag outside the list ("mixed" and "unknown" included).
const LanguageInfo* FindLanguageInfo(std::string_view tag);

struct LanguageGuess {
  // A tag of SupportedLanguages(), "mixed" (Chinese with English words: answered in Chinese, in
  // its script) or "unknown" (no letters: digits, symbols, emoji, nothing).
  std::string_view tag = "unknown";
  // For Chinese and mixed: whether its Chinese is Traditional.
  bool traditional = false;
  int han = 0;    // Han characters
  int latin = 0;  // ASCII letters
  bool Chinese() const { return tag == "zh-Hans" || tag == "zh-Hant" || tag == "mixed"; }
};

// Han characters against ASCII letters decide Chinese, English or mixed: a line is mixed when
// letters are at least kMixedLatinShare of both (an acronym in a Chinese sentence, "写一条SQL查询",
// stays Chinese). Traditional against Simplified is decided by characters only one script uses.
// Kana anywhere makes a line Japanese, however many kanji it has. Malformed UTF-8 is read as if
// its bad bytes were spaces.
LanguageGuess DetectLanguage(std::string_view text);

inline constexpr double kMixedLatinShare = 0.35;

}  // namespace gemlet::flows
