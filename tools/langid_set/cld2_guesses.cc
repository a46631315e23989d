// CLD2's guesses for each line of stdin, as language.cc's Cld2Guesses makes them (best effort, no
// hint; Norwegian as nb): comma-separated tags, one line out per line in. crossval.py runs it.
//   g++ -O2 -o /tmp/cld2_guesses tools/langid_set/cld2_guesses.cc -lcld2
#include <cstdio>  // first: CLD2's header uses FILE without including it
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

int main() {
  std::string text;
  while (std::getline(std::cin, text)) {
    CLD2::CLDHints hints = {nullptr, nullptr, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
    CLD2::Language language3[3];
    int percent3[3], text_bytes = 0;
    double score3[3];
    bool reliable = false;
    const CLD2::Language top = CLD2::ExtDetectLanguageSummary(text.data(), static_cast<int>(text.size()), true, &hints,
                                                              CLD2::kCLDFlagBestEffort, language3, percent3, score3,
                                                              nullptr, &text_bytes, &reliable);
    std::vector<std::string> out;
    for (CLD2::Language l : {top, language3[0], language3[1], language3[2]}) {
      if (l == CLD2::UNKNOWN_LANGUAGE) continue;
      std::string tag = CLD2::LanguageCode(l);
      if (tag == "no" || tag == "nn") tag = "nb";
      if (std::find(out.begin(), out.end(), tag) == out.end()) out.push_back(tag);
    }
    std::string line;
    for (const std::string& t : out) line += (line.empty() ? "" : ",") + t;
    std::cout << line << "\n";
  }
}
