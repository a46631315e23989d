// Input-language detection against the labelled lines of shared/testdata/flows/langid_labelled.tsv.
#include "flows/language.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace gemlet::flows {
namespace {

TEST(Language, LabelledLinesAreDetected) {
  std::ifstream in(std::string(GEMLET_TESTDATA_DIR) + "/flows/langid_labelled.tsv");
  ASSERT_TRUE(in) << "no langid_labelled.tsv under " << GEMLET_TESTDATA_DIR;
  std::string line;
  std::getline(in, line);  // header
  int total = 0, right = 0;
  std::string wrong;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string label = line.substr(0, tab), text = line.substr(tab + 1);
    const std::string got = LanguageTag(DetectLanguage(text).language);
    ++total;
    if (got == label) ++right;
    else wrong += "\n  " + label + " read as " + got + ": " + text;
  }
  ASSERT_EQ(total, 36);
  // Printed for bench/flows/RESULTS.md; every line is expected right today.
  std::printf("language detection: %d of %d labelled lines right (%.1f%%)\n", right, total, 100.0 * right / total);
  EXPECT_EQ(right, total) << wrong;
}

TEST(Language, ScriptAndMixingAreDecidedByCharacters) {
  EXPECT_EQ(DetectLanguage("").language, Language::kUnknown);
  EXPECT_EQ(DetectLanguage("2024 + 3 = ?").language, Language::kUnknown);
  EXPECT_EQ(DetectLanguage("Hello there").language, Language::kEnglish);
  EXPECT_EQ(DetectLanguage("你好").language, Language::kChineseSimplified);  // no script-only character: Simplified
  EXPECT_EQ(DetectLanguage("這是繁體字").language, Language::kChineseTraditional);
  EXPECT_EQ(DetectLanguage("这是简体字").language, Language::kChineseSimplified);
  const LanguageGuess mixed = DetectLanguage("這個 bug 只在 iOS 上出現");
  EXPECT_EQ(mixed.language, Language::kMixed);
  EXPECT_TRUE(mixed.traditional);
  EXPECT_EQ(DetectLanguage("帮我用SQL查一下上个月的数据").language, Language::kChineseSimplified);  // an acronym is not English prose
}

}  // namespace
}  // namespace gemlet::flows
