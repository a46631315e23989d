// `gemlet langid [--lines]`: the language the task presets detect in stdin's text, its tag on stdout
// (so the detection can be checked from outside, one labelled line at a time with --lines).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>

#include "command.h"
#include "gemlet/tasks.hpp"

namespace gemlet::cli {
namespace {

// The byte offset of the first malformed UTF-8 sequence, or npos. DetectLanguageTag would read
// its bytes as spaces; here the caller is told, since a wrong encoding means every tag is suspect.
size_t FirstBadUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    uint32_t cp = c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (n > 1 && (cp < kMin[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)) return i;
    i += n;
  }
  return std::string::npos;
}

int RunLangid(int argc, char** argv) {
  CLI::App app{"Print the language tag (en, fr, ja, zh-Hant, ...; mixed, unknown) the task presets detect in "
               "stdin's text.",
               "gemlet langid"};
  bool lines = false;
  bool list = false;
  app.add_flag("--lines", lines, "one tag per input line (an empty line gets an empty line)");
  app.add_flag("--list", list, "print the tags it can answer, with their names, and exit");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (list) {
    for (const LanguageName& l : DetectableLanguages()) std::printf("%s\t%s\n", l.tag.c_str(), l.name.c_str());
    return 0;
  }
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (const size_t bad = FirstBadUtf8(text); bad != std::string::npos) {
    return Fail("langid: stdin is not UTF-8 (a malformed byte at offset " + std::to_string(bad) + ")");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return Fail("langid: the input is empty: give the text on stdin");
  if (!lines) {
    std::printf("%s\n", DetectLanguageTag(text).c_str());
    return 0;
  }
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::printf("%s\n", line.find_first_not_of(" \t") == std::string::npos ? "" : DetectLanguageTag(line).c_str());
    start = end + 1;
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("langid", "print the language of stdin's text as a tag (en, fr, ja, zh-Hant, ...); --lines: one per line",
               RunLangid);

}  // namespace gemlet::cli
