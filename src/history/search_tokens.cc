// Tokenization for the history store's search index: UTF-8 to words and CJK bigrams.
#include "history/search_tokens.h"

#include <cstdint>

namespace gemlet::history {
namespace {

enum class Kind { kSeparator, kWord, kCjk };

// Decodes one UTF-8 character at text[*i]; an invalid byte decodes to U+FFFD (a separator) so that
// damaged text still indexes the rest.
char32_t NextCodepoint(std::string_view text, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(*i);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || *i + len > text.size()) {
    ++*i;
    return 0xFFFD;
  }
  char32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    const unsigned char b = byte(*i + k);
    if ((b & 0xC0) != 0x80) {
      ++*i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++*i;
    return 0xFFFD;
  }
  *i += len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool In(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

// Scripts written without spaces between words: Han (with its extensions and radicals), kana,
// bopomofo, Hangul. Korean does use spaces, but its words take particles, so bigrams serve it too.
bool IsCjk(char32_t cp) {
  return In(cp, 0x2E80, 0x2FDF) || In(cp, 0x3005, 0x3007) || In(cp, 0x3040, 0x30FF) || In(cp, 0x3100, 0x31FF) ||
         In(cp, 0x3400, 0x4DBF) || In(cp, 0x4E00, 0x9FFF) || In(cp, 0xA960, 0xA97F) || In(cp, 0xAC00, 0xD7AF) ||
         In(cp, 0xF900, 0xFAFF) || In(cp, 0xFF66, 0xFF9F) || In(cp, 0x20000, 0x323AF);
}

// Punctuation, symbols, spaces and emoji: everything that ends a word. Without ICU this is a list of
// blocks; letters of scripts not named here (Latin, Greek, Cyrillic, Arabic, ...) make words.
bool IsSeparator(char32_t cp) {
  if (cp < 0x80) return !((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'));
  return In(cp, 0x80, 0xBF) || cp == 0xD7 || cp == 0xF7 || In(cp, 0x2000, 0x2BFF) || In(cp, 0x3000, 0x3004) ||
         In(cp, 0x3008, 0x303F) || In(cp, 0xE000, 0xF8FF) || In(cp, 0xFE00, 0xFE6F) || In(cp, 0xFF00, 0xFF0F) ||
         In(cp, 0xFF1A, 0xFF20) || In(cp, 0xFF3B, 0xFF40) || In(cp, 0xFF5B, 0xFF65) || In(cp, 0xFFF0, 0xFFFF) ||
         In(cp, 0x1F000, 0x1FAFF);
}

// Lower case for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic capitals (a table, not ICU's
// full folding), and full-width ASCII letters and digits to ASCII, as an IME types them.
char32_t Fold(char32_t cp) {
  if (In(cp, 'A', 'Z')) return cp + 32;
  if (In(cp, 0xFF21, 0xFF3A)) return cp - 0xFF21 + 'a';
  if (In(cp, 0xFF41, 0xFF5A)) return cp - 0xFF41 + 'a';
  if (In(cp, 0xFF10, 0xFF19)) return cp - 0xFF10 + '0';
  if (In(cp, 0xC0, 0xDE) && cp != 0xD7) return cp + 32;
  if ((In(cp, 0x100, 0x137) || In(cp, 0x14A, 0x177)) && cp % 2 == 0) return cp + 1;
  if ((In(cp, 0x139, 0x148) || In(cp, 0x179, 0x17E)) && cp % 2 == 1) return cp + 1;
  if (In(cp, 0x391, 0x3A9) && cp != 0x3A2) return cp + 32;
  if (In(cp, 0x410, 0x42F)) return cp + 32;
  if (In(cp, 0x400, 0x40F)) return cp + 80;
  return cp;
}

Kind Classify(char32_t cp) {
  if (IsCjk(cp)) return Kind::kCjk;
  if (IsSeparator(cp)) return Kind::kSeparator;
  return Kind::kWord;
}

struct Run {
  Kind kind = Kind::kSeparator;
  std::string word;               // kWord: the folded word
  bool cut = false;               // kWord: reached kMaxWordBytes, the rest is dropped
  std::vector<std::string> cjk;   // kCjk: one string per character
};

// Splits text into runs of word characters and of CJK characters; separators end runs.
std::vector<Run> Runs(std::string_view text) {
  std::vector<Run> runs;
  Run current;
  auto flush = [&] {
    if (current.kind != Kind::kSeparator) runs.push_back(std::move(current));
    current = Run{};
  };
  for (size_t i = 0; i < text.size();) {
    const char32_t cp = Fold(NextCodepoint(text, &i));
    const Kind kind = Classify(cp);
    if (kind != current.kind) flush();
    current.kind = kind;
    if (kind == Kind::kWord) {
      std::string ch;
      AppendUtf8(cp, &ch);
      current.cut = current.cut || current.word.size() + ch.size() > kMaxWordBytes;
      if (!current.cut) current.word += ch;
    } else if (kind == Kind::kCjk) {
      current.cjk.emplace_back();
      AppendUtf8(cp, &current.cjk.back());
    }
  }
  flush();
  return runs;
}

std::vector<std::string> Bigrams(const std::vector<std::string>& chars) {
  std::vector<std::string> out;
  for (size_t k = 0; k + 1 < chars.size(); ++k) out.push_back(chars[k] + chars[k + 1]);
  return out;
}

}  // namespace

IndexTokens TokenizeForIndex(std::string_view text) {
  IndexTokens out;
  for (Run& run : Runs(text)) {
    if (run.kind == Kind::kWord) {
      out.grams.push_back(std::move(run.word));
      continue;
    }
    for (std::string& bigram : Bigrams(run.cjk)) out.grams.push_back(std::move(bigram));
    for (std::string& c : run.cjk) out.chars.push_back(std::move(c));
  }
  return out;
}

std::vector<QueryTerm> TokenizeQuery(std::string_view text) {
  std::vector<QueryTerm> terms;
  for (Run& run : Runs(text)) {
    QueryTerm term;
    if (run.kind == Kind::kWord) {
      term.text = run.word;
      term.tokens.push_back(std::move(run.word));
    } else {
      for (const std::string& c : run.cjk) term.text += c;
      term.single_char = run.cjk.size() == 1;
      term.tokens = term.single_char ? std::move(run.cjk) : Bigrams(run.cjk);
    }
    terms.push_back(std::move(term));
  }
  return terms;
}

}  // namespace gemlet::history
