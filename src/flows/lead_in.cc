// Lead-in detection for the task presets' output contract (src/api/tasks.cc).
#include "flows/lead_in.h"

#include <cctype>
#include <initializer_list>
#include <string>

namespace gemlet::flows {
namespace {

// Openings that introduce a result rather than being one. English is matched case-insensitively.
constexpr std::string_view kEnglish[] = {"here is",   "here's",  "here’s",      "here are",     "sure",         "certainly",
                                         "of course", "okay",        "ok,",          "ok!",          "ok.",
                                         "absolutely", "below is",   "the polished", "the rewritten", "the revised",
                                         "the translation", "the translated", "polished version", "rewritten version",
                                         "revised version", "i've polished", "i have polished", "i've rewritten",
                                         "i have rewritten"};
constexpr std::string_view kChinese[] = {"以下是", "下面是", "好的", "当然", "這是", "这是", "以下為", "润色后", "潤色後",
                                         "改写后", "改寫後", "翻译", "翻譯", "译文", "譯文"};
// Interjections that may stand alone before the result, and what may end them.
constexpr std::string_view kInterjections[] = {"sure", "certainly", "of course", "okay", "ok", "absolutely", "好的", "当然", "當然"};
constexpr std::string_view kInterjectionEnds[] = {"!", ".", ",", "！", "。", "，", "~"};

bool Space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view TrimFront(std::string_view s) {
  while (!s.empty() && Space(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  // Quotes or a full-width space before the words do not hide a lead-in.
  for (std::string_view q : {"\"", "“", "「", "\xE3\x80\x80"}) {
    if (s.substr(0, q.size()) == q) return TrimFront(s.substr(q.size()));
  }
  return s;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i]))) return false;
  }
  return true;
}

// The lead-in phrase the text opens with, "" when none. An English phrase must end at a word end.
std::string_view Opening(std::string_view text) {
  text = TrimFront(text);
  for (std::string_view p : kEnglish) {
    if (!StartsWithNoCase(text, p)) continue;
    if (text.size() == p.size() || !std::isalpha(static_cast<unsigned char>(text[p.size()]))) return p;
  }
  for (std::string_view p : kChinese) {
    if (text.substr(0, p.size()) == p) return p;
  }
  return {};
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && Space(static_cast<unsigned char>(s[i]))) ++i;
  if (s.substr(i, 3) == "\xE3\x80\x80") return SkipSpace(s, i + 3);
  return i;
}

}  // namespace

bool OpensLikeLeadIn(std::string_view answer, std::string_view input) {
  const std::string_view opening = Opening(answer);
  return !opening.empty() && Opening(input) != opening;
}

size_t LeadInLength(std::string_view answer, std::string_view input) {
  if (!OpensLikeLeadIn(answer, input)) return 0;
  const size_t start = answer.size() - TrimFront(answer).size();
  const size_t newline = answer.find('\n', start);
  const std::string_view line = answer.substr(start, newline == std::string_view::npos ? std::string_view::npos : newline - start);
  // An interjection and its punctuation: "Sure! ...", "好的，...". First, so that "Sure, the
  // meeting is at 3: ..." keeps its colon; a lead-in after it is the caller's next cut.
  for (std::string_view w : kInterjections) {
    if (!StartsWithNoCase(line, w)) continue;
    for (std::string_view end : kInterjectionEnds) {
      if (line.substr(w.size(), end.size()) == end) return SkipSpace(answer, start + w.size() + end.size());
    }
  }
  // Up to a colon on the first line: "Here is the polished message:", "Sure! Here it is: ...".
  size_t colon = line.find(':');
  size_t colon_len = 1;
  if (const size_t wide = line.find("："); wide != std::string_view::npos && (colon == std::string_view::npos || wide < colon)) {
    colon = wide;
    colon_len = 3;
  }
  if (colon != std::string_view::npos) return SkipSpace(answer, start + colon + colon_len);
  // A whole first line that introduces the rest ("Here is the polished message" and a new line).
  if (newline != std::string_view::npos && SkipSpace(answer, newline) < answer.size()) return SkipSpace(answer, newline);
  return 0;
}

}  // namespace gemlet::flows
