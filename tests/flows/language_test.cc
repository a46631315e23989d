// Input-language detection: the labelled lines of shared/testdata/flows/langid_labelled.tsv (English
// and Chinese) and of tests/data/langid/labelled.tsv (40 languages from Debian's message catalogs),
// and the script rules CLD2 does not know.
#include "flows/language.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

namespace gemlet::flows {
namespace {

struct Line {
  std::string label, text;
};

std::vector<Line> ReadLabelled(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "no " << path;
  std::vector<Line> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t'), tab2 = line.find('\t', tab + 1);  // a third column is the source
    EXPECT_NE(tab, std::string::npos) << line;
    if (tab != std::string::npos) out.push_back({line.substr(0, tab), line.substr(tab + 1, tab2 - tab - 1)});
  }
  return out;
}

TEST(Language, LabelledLinesAreDetected) {
  const std::vector<Line> lines = ReadLabelled(std::string(GEMLET_TESTDATA_DIR) + "/flows/langid_labelled.tsv");
  ASSERT_EQ(lines.size(), 36u);
  int right = 0;
  std::string wrong;
  for (const Line& l : lines) {
    const std::string got(DetectLanguage(l.text).tag);
    if (got == l.label) ++right;
    else wrong += "\n  " + l.label + " read as " + got + ": " + l.text;
  }
  std::printf("language detection: %d of %zu labelled lines right\n", right, lines.size());
  EXPECT_EQ(right, static_cast<int>(lines.size())) << wrong;  // every line is expected right
}

// The 800 lines of tests/data/langid/labelled.tsv: accuracy per language, short lines (10-40
// characters, the messages users polish) apart, printed as bench/RESULTS.md's table has it.
TEST(Language, CatalogLinesInFortyLanguages) {
  const std::vector<Line> lines = ReadLabelled(std::string(GEMLET_LANGID_DATA) + "/labelled.tsv");
  ASSERT_GE(lines.size(), 500u);
  struct Tally {
    int right = 0, total = 0, short_right = 0, short_total = 0;
  };
  std::map<std::string, Tally> by_label;
  Tally all;
  for (const Line& l : lines) {
    size_t chars = 0;
    for (unsigned char c : l.text) chars += (c & 0xC0) != 0x80;
    const bool ok = DetectLanguage(l.text).tag == l.label, is_short = chars <= 40;
    for (Tally* t : {&by_label[l.label], &all}) {
      t->total++;
      t->right += ok;
      t->short_total += is_short;
      t->short_right += ok && is_short;
    }
  }
  std::printf("%-8s %6s %6s\n", "language", "all", "short");
  for (const auto& [label, t] : by_label) {
    std::printf("%-8s %3d/%-3d %3d/%-3d\n", label.c_str(), t.right, t.total, t.short_right, t.short_total);
    EXPECT_GE(t.total, 15) << label;
  }
  const double accuracy = double(all.right) / all.total, short_accuracy = double(all.short_right) / all.short_total;
  std::printf("all: %d/%d (%.1f%%), short: %d/%d (%.1f%%)\n", all.right, all.total, 100 * accuracy, all.short_right,
              all.short_total, 100 * short_accuracy);
  EXPECT_GE(by_label.size(), 25u);
  // Measured 93.5% (short lines 93.8%; CLD2 alone 88.0%): a floor against regressions, below issue
  // #42's goal of 97%, which this detector does not reach (bench/RESULTS.md: Bosnian against
  // Croatian takes 18 of the 52 misses, id/ms 10, es/pt/gl/ca 12).
  EXPECT_GE(accuracy, 0.93);
  EXPECT_GE(short_accuracy, 0.93);
}

TEST(Language, ScriptsDecideWhereTheyAreOneLanguages) {
  EXPECT_EQ(DetectLanguage("").tag, "unknown");
  EXPECT_EQ(DetectLanguage("2024 + 3 = ?").tag, "unknown");
  EXPECT_EQ(DetectLanguage("Hello there, how are you today?").tag, "en");
  EXPECT_EQ(DetectLanguage("你好").tag, "zh-Hans");  // no script-only character: Simplified
  EXPECT_EQ(DetectLanguage("這是繁體字").tag, "zh-Hant");
  EXPECT_EQ(DetectLanguage("这是简体字").tag, "zh-Hans");
  const LanguageGuess mixed = DetectLanguage("這個 bug 只在 iOS 上出現");
  EXPECT_EQ(mixed.tag, "mixed");
  EXPECT_TRUE(mixed.traditional);
  EXPECT_TRUE(mixed.Chinese());
  EXPECT_EQ(DetectLanguage("帮我用SQL查一下上个月的数据").tag, "zh-Hans");  // an acronym is not English prose
  // Kana makes it Japanese however many kanji there are; kanji alone read as Chinese.
  EXPECT_EQ(DetectLanguage("東京都新宿区西新宿二丁目の会議室").tag, "ja");
  EXPECT_TRUE(DetectLanguage("会議室").Chinese());
  EXPECT_EQ(DetectLanguage("회의실은 어디에 있습니까?").tag, "ko");
  EXPECT_EQ(DetectLanguage("ห้องประชุมอยู่ที่ไหน").tag, "th");
  EXPECT_EQ(DetectLanguage("Πού είναι η αίθουσα;").tag, "el");
}

TEST(Language, LatinAndCyrillicLanguagesAreTold) {
  EXPECT_EQ(DetectLanguage("Bonjour, pouvez-vous m'aider ?").tag, "fr");  // issue #42: this was "en"
  EXPECT_EQ(DetectLanguage("Können Sie mir bitte helfen?").tag, "de");
  EXPECT_EQ(DetectLanguage("¿Puedes ayudarme con esto, por favor?").tag, "es");
  // A few accentless words CLD2 reads as English; the n-gram model trained on catalog strings does not.
  EXPECT_EQ(DetectLanguage("Obre el fitxer de text").tag, "ca");
  EXPECT_EQ(DetectLanguage("Abrir o ficheiro de texto").tag, "gl");
  EXPECT_EQ(DetectLanguage("Buka berkas baru").tag, "id");
  // A letter the detected language does not write overrules it: "ї" is Ukrainian's, not Russian's.
  EXPECT_EQ(DetectLanguage("Її файли").tag, "uk");
  EXPECT_EQ(DetectLanguage("Привет, как дела? Это новый файл.").tag, "ru");
}

TEST(Language, MalformedUtf8IsReadAroundItsBadBytes) {
  EXPECT_EQ(DetectLanguage("Bonjour, pouvez-vous m'aider ?\xff\xfe").tag, "fr");
  EXPECT_EQ(DetectLanguage("\xff\xfe\xc3").tag, "unknown");
  EXPECT_EQ(DetectLanguage("\xe4\xbd").tag, "unknown");            // a truncated 你
  EXPECT_EQ(DetectLanguage("\xc0\xaf" "etc\xed\xa0\x80").tag, "en");  // overlong '/', a surrogate
}

TEST(Language, EveryTagHasItsNames) {
  const auto languages = SupportedLanguages();
  EXPECT_GE(languages.size(), 25u);
  EXPECT_EQ(languages[0].tag, "en");
  std::set<std::string> tags;
  for (const LanguageInfo& l : languages) {
    EXPECT_FALSE(l.en.empty()) << l.tag;
    EXPECT_FALSE(l.zh.empty()) << l.tag;
    ASSERT_NE(FindLanguageInfo(l.tag), nullptr) << l.tag;
    tags.insert(std::string(l.tag));
  }
  EXPECT_EQ(tags.size(), languages.size());  // each once (Serbian, written in two scripts, too)
  EXPECT_EQ(FindLanguageInfo("mixed"), nullptr);
}

}  // namespace
}  // namespace gemlet::flows
