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
// characters, the messages users polish) apart, what the misses were read as, and the groups of close
// languages apart, printed as bench/RESULTS.md's table has them.
TEST(Language, CatalogLinesInFortyLanguages) {
  const std::vector<Line> lines = ReadLabelled(std::string(GEMLET_LANGID_DATA) + "/labelled.tsv");
  ASSERT_GE(lines.size(), 500u);
  struct Tally {
    int right = 0, total = 0, short_right = 0, short_total = 0;
    std::map<std::string, int> read_as;
  };
  std::map<std::string, Tally> by_label;
  Tally all;
  for (const Line& l : lines) {
    size_t chars = 0;
    for (unsigned char c : l.text) chars += (c & 0xC0) != 0x80;
    const std::string got(DetectLanguage(l.text).tag);
    const bool ok = got == l.label, is_short = chars <= 40;
    for (Tally* t : {&by_label[l.label], &all}) {
      t->total++;
      t->right += ok;
      t->short_total += is_short;
      t->short_right += ok && is_short;
    }
    if (!ok) by_label[l.label].read_as[got]++;
  }
  std::printf("%-8s %7s %7s  %s\n", "language", "all", "short", "read as");
  for (const auto& [label, t] : by_label) {
    std::string misses;
    for (const auto& [tag, n] : t.read_as) misses += (misses.empty() ? "" : ", ") + tag + " " + std::to_string(n);
    std::printf("%-8s %3d/%-3d %3d/%-3d  %s\n", label.c_str(), t.right, t.total, t.short_right, t.short_total, misses.c_str());
    EXPECT_GE(t.total, 15) << label;
  }
  // The languages a script shares that are closest to each other, where most misses are.
  for (const auto& group : {std::vector<std::string>{"bs", "hr", "sr"}, {"da", "nb", "sv"}, {"es", "pt", "gl", "ca"},
                            {"cs", "sk"}, {"id", "ms"}}) {
    std::string name;
    int right = 0, total = 0;
    for (const std::string& label : group) {
      name += (name.empty() ? "" : "/") + label;
      right += by_label[label].right;
      total += by_label[label].total;
    }
    std::printf("%-12s %3d/%-3d\n", name.c_str(), right, total);
  }
  const double accuracy = double(all.right) / all.total, short_accuracy = double(all.short_right) / all.short_total;
  std::printf("all: %d/%d (%.1f%%), short: %d/%d (%.1f%%)\n", all.right, all.total, 100 * accuracy, all.short_right,
              all.short_total, 100 * short_accuracy);
  EXPECT_GE(by_label.size(), 25u);
  // Measured 97.0% (776 of 800; short lines 96.2%, 462 of 480; CLD2 alone 88.0%), issue #42's 97%
  // with no line to spare: the floor, so a regression fails. bench/RESULTS.md: Bosnian against
  // Croatian takes 14 of the 24 misses, as Debian's catalogs of the two share most of their words.
  EXPECT_GE(accuracy, 0.97);
  EXPECT_GE(short_accuracy, 0.962);
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
