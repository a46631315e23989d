// Language detection on labelled lines three ways: gemlet's DetectLanguage (CLD2 and the script
// rules), CLD2 alone and exttextcat alone, each answer mapped to the labels' tags; accuracy per
// language, for short (10-40 characters) and longer lines, and which close language took the misses.
//   langid_compare tests/data/langid/labelled.tsv [--errors]
#include <cstdio>  // first: CLD2's header uses FILE without including it
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>
#include <libexttextcat/textcat.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "flows/language.h"

namespace {

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Cld2Alone(const std::string& text) {
  CLD2::CLDHints hints = {nullptr, nullptr, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
  CLD2::Language language3[3];
  int percent3[3], text_bytes = 0;
  double score3[3];
  bool reliable = false;
  const CLD2::Language l = CLD2::ExtDetectLanguageSummary(text.data(), static_cast<int>(text.size()), true, &hints,
                                                          CLD2::kCLDFlagBestEffort, language3, percent3, score3, nullptr,
                                                          &text_bytes, &reliable);
  const std::string tag = CLD2::LanguageCode(l);
  if (tag == "no") return "nb";
  if (tag == "zh") return "zh-Hans";
  return tag;
}

// exttextcat answers "[fr--utf8][it--utf8]" (language-country-encoding, best first), "SHORT" or
// "UNKNOWN"; its Serbian, Serbo-Croatian and Chinese models are named by country or script.
std::string TextcatAlone(void* handle, const std::string& text) {
  const char* r = textcat_Classify(handle, text.data(), text.size());
  if (r == nullptr || r[0] != '[') return r ? r : "?";
  std::string first(r + 1, std::strchr(r, ']'));
  for (const char* suffix : {"--utf8", "-utf8"}) {
    if (first.size() > std::strlen(suffix) && first.ends_with(suffix)) {
      first.resize(first.size() - std::strlen(suffix));
      break;
    }
  }
  static const std::map<std::string, std::string> kNames = {{"zh-CN", "zh-Hans"}, {"zh-TW", "zh-Hant"}, {"nn", "nb"},
                                                           {"sh", "hr"}, {"sr-Latn", "sr"}, {"sr-Cyrl", "sr"}};
  auto it = kNames.find(first);
  return it == kNames.end() ? first : it->second;
}

struct Tally {
  int right = 0, total = 0, short_right = 0, short_total = 0;
  std::map<std::string, int> misses;  // the wrong answers given for this label
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: langid_compare LABELLED.tsv [--errors]\n");
    return 2;
  }
  const bool show_errors = argc > 2 && std::strcmp(argv[2], "--errors") == 0;
  void* textcat = special_textcat_Init("/usr/share/libexttextcat/fpdb.conf", "/usr/share/libexttextcat/");
  if (textcat == nullptr) {
    std::fprintf(stderr, "langid_compare: exttextcat's models are not in /usr/share/libexttextcat\n");
    return 1;
  }
  std::ifstream in(argv[1]);
  std::string line;
  std::getline(in, line);  // header
  const char* kNames[] = {"gemlet", "CLD2", "exttextcat"};
  std::map<std::string, Tally> tallies[3];
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t'), tab2 = line.find('\t', tab + 1);
    if (tab == std::string::npos) continue;
    const std::string label = line.substr(0, tab), text = line.substr(tab + 1, tab2 - tab - 1);
    const std::string got[3] = {std::string(gemlet::flows::DetectLanguage(text).tag), Cld2Alone(text), TextcatAlone(textcat, text)};
    const bool is_short = CodePoints(text) <= 40;
    for (int k = 0; k < 3; ++k) {
      Tally& t = tallies[k][label];
      const bool ok = got[k] == label;
      t.total++;
      t.right += ok;
      t.short_total += is_short;
      t.short_right += is_short && ok;
      if (!ok) t.misses[got[k]]++;
      if (!ok && k == 0 && show_errors) std::printf("%s read as %s: %s\n", label.c_str(), got[k].c_str(), text.c_str());
    }
  }
  textcat_Done(textcat);
  std::printf("| language | lines | %s | %s | %s | gemlet's misses |\n|---|---:|---:|---:|---:|---|\n", kNames[0], kNames[1], kNames[2]);
  Tally sums[3];
  for (const auto& [label, t0] : tallies[0]) {
    std::string misses;
    for (const auto& [tag, n] : t0.misses) misses += (misses.empty() ? "" : ", ") + tag + " " + std::to_string(n);
    std::printf("| %s | %d", label.c_str(), t0.total);
    for (int k = 0; k < 3; ++k) {
      const Tally& t = tallies[k][label];
      std::printf(" | %d", t.right);
      sums[k].right += t.right;
      sums[k].total += t.total;
      sums[k].short_right += t.short_right;
      sums[k].short_total += t.short_total;
    }
    std::printf(" | %s |\n", misses.c_str());
  }
  for (const char* what : {"all", "short (10-40 characters)", "longer"}) {
    std::printf("| **%s** | %d", what,
                what[0] == 'a' ? sums[0].total : what[0] == 's' ? sums[0].short_total : sums[0].total - sums[0].short_total);
    for (int k = 0; k < 3; ++k) {
      const int r = what[0] == 'a' ? sums[k].right : what[0] == 's' ? sums[k].short_right : sums[k].right - sums[k].short_right;
      const int n = what[0] == 'a' ? sums[k].total : what[0] == 's' ? sums[k].short_total : sums[k].total - sums[k].short_total;
      std::printf(" | %d (%.1f%%)", r, 100.0 * r / n);
    }
    std::printf(" | |\n");
  }
  return 0;
}
