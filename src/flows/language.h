// Which language a piece of text is in, as the task presets need it: English, Simplified or
// Traditional Chinese, or Chinese with English words in it ("mixed"), from the characters alone.
#pragma once

#include <string_view>

namespace gemlet::flows {

enum class Language { kUnknown, kEnglish, kChineseSimplified, kChineseTraditional, kMixed };

// "en", "zh-Hans", "zh-Hant", "mixed", "unknown": the labels of shared/testdata/flows/langid_labelled.tsv.
const char* LanguageTag(Language language);

struct LanguageGuess {
  Language language = Language::kUnknown;
  // For kMixed (and Chinese): whether its Chinese is Traditional.
  bool traditional = false;
  int han = 0;      // Han characters
  int latin = 0;    // ASCII letters
};

// Han characters against ASCII letters decide Chinese, English or mixed: a line is mixed when
// letters are at least kMixedLatinShare of both (an acronym in a Chinese sentence, "写一条SQL查询",
// stays Chinese). Traditional against Simplified is decided by characters only one script uses.
LanguageGuess DetectLanguage(std::string_view text);

inline constexpr double kMixedLatinShare = 0.35;

}  // namespace gemlet::flows
