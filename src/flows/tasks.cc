#include "flows/tasks.h"

#include <algorithm>
#include <cctype>

#include "flows/prompt_files.h"

namespace gemlet::flows {
namespace {

// A target by its tag, or by the other names people give Chinese.
const LanguageInfo* FindLanguage(std::string tag) {
  if (tag == "zh" || tag == "zh-CN" || tag == "zh-cn" || tag == "cn") tag = "zh-Hans";
  if (tag == "zh-TW" || tag == "zh-tw" || tag == "zh-HK" || tag == "tw") tag = "zh-Hant";
  if (tag == "no") tag = "nb";
  return FindLanguageInfo(tag);
}

std::string KnownLanguages() {
  std::string out;
  for (const LanguageInfo& l : SupportedLanguages()) out += (out.empty() ? "" : ", ") + std::string(l.tag);
  return out + " (zh is zh-Hans)";
}

struct Style {
  std::string_view name, en, zh;
};
constexpr Style kStyles[] = {{"formal", "formal", "正式"}, {"casual", "casual, friendly", "轻松口语化"}, {"concise", "concise", "简洁"}};

// The [en] or [zh] section of a prompt file ("#" lines are comments).
Result<std::string> PromptSection(std::string_view task, std::string_view section) {
  std::string path = "/";  // appended piecewise: GCC 12 warns (-Wrestrict) on "/" + std::string(...)
  path.append(task).append(".txt");
  for (const PromptFile& f : PromptFiles()) {
    if (f.path != path) continue;
    std::string out;
    bool in = false;
    size_t pos = 0;
    while (pos < f.body.size()) {
      size_t end = f.body.find('\n', pos);
      if (end == std::string_view::npos) end = f.body.size();
      const std::string_view line = f.body.substr(pos, end - pos);
      pos = end + 1;
      if (!line.empty() && line[0] == '#') continue;
      if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
        in = line.substr(1, line.size() - 2) == section;
        continue;
      }
      if (in) out.append(line).append("\n");
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    if (out.empty()) return Status::Error("prompt " + path + " has no [" + std::string(section) + "] section");
    return out;
  }
  return Status::Error("no prompt for task '" + std::string(task) + "'");
}

void ReplaceAll(std::string* s, std::string_view key, std::string_view value) {
  for (size_t at = s->find(key); at != std::string::npos; at = s->find(key, at + value.size())) s->replace(at, key.size(), value);
}

bool IsSpace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && IsSpace(static_cast<unsigned char>(s[e - 1]))) --e;
  // Full-width spaces too (U+3000, three bytes), which Chinese text may end with.
  while (e - b >= 3 && s.substr(e - 3, 3) == "\xE3\x80\x80") e -= 3;
  return std::string(s.substr(b, e - b));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWithAny(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes) {
    if (s.substr(0, p.size()) == p) return true;
  }
  return false;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

const std::vector<TaskInfo>& Tasks() {
  static const std::vector<TaskInfo> tasks = {
      {"polish", "fix grammar, spelling and phrasing; keep meaning, tone and length"},
      {"summarize", "the points that matter, in short bullets (long texts in parts)"},
      {"rewrite", "the same content in another style (--style formal|casual|concise)"},
      {"translate", "into another language (--to zh|zh-Hant|en|ja|...)"},
      {"explain", "a maths step, a term or some code, explained plainly"},
      {"sql", "one SQL query for what is asked (--schema FILE)"},
      {"describe", "what a photo shows, and the text in it (an image; --to LANG answers in another language)"},
      {"transcribe", "the words spoken in a clip, as plain text (--to LANG translates them)"},
  };
  return tasks;
}

Result<std::vector<GlossaryEntry>> ParseGlossary(std::string_view tsv) {
  std::vector<GlossaryEntry> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < tsv.size()) {
    size_t end = tsv.find('\n', pos);
    if (end == std::string_view::npos) end = tsv.size();
    std::string_view line = tsv.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    size_t at = 0;
    for (;;) {
      const size_t tab = line.find('\t', at);
      fields.push_back(Trim(line.substr(at, tab == std::string_view::npos ? std::string_view::npos : tab - at)));
      if (tab == std::string_view::npos) break;
      at = tab + 1;
    }
    if (fields[0].empty() || fields.size() > 3) {
      return Status::Error("glossary line " + std::to_string(line_no) + ": expected 'term<TAB>rendering[<TAB>note]'");
    }
    out.push_back({fields[0], fields.size() > 1 ? fields[1] : "", fields.size() > 2 ? fields[2] : ""});
  }
  return out;
}

std::vector<GlossaryEntry> GlossaryTermsIn(const std::vector<GlossaryEntry>& glossary, std::string_view text) {
  const std::string folded = Lower(text);
  std::vector<GlossaryEntry> out;
  for (const GlossaryEntry& e : glossary) {
    if (folded.find(Lower(e.term)) != std::string::npos) out.push_back(e);
  }
  return out;
}

Result<TaskPrompt> BuildTaskPrompt(const TaskRequest& r) {
  const auto& tasks = Tasks();
  if (std::none_of(tasks.begin(), tasks.end(), [&](const TaskInfo& t) { return t.name == r.task; })) {
    std::string names;
    for (const TaskInfo& t : tasks) names += (names.empty() ? "" : ", ") + std::string(t.name);
    return Status::Error(StatusCode::kInvalidArgument, "unknown task '" + r.task + "' (one of " + names + ")");
  }
  // The media a task takes: describe an image, transcribe a clip, translate what either holds.
  const bool wants_image = r.task == "describe", wants_audio = r.task == "transcribe";
  if ((wants_image && r.media != "image") || (wants_audio && r.media != "audio")) {
    return Status::Error(StatusCode::kInvalidArgument,
                         r.task + (wants_image ? " needs an image (--image FILE)" : " needs an audio clip (FILE or --audio FILE)"));
  }
  if (!r.media.empty() && !wants_image && !wants_audio && r.task != "translate") {
    return Status::Error(StatusCode::kInvalidArgument, r.task + " takes text, not " +
                                                           (r.media == "audio" ? "audio" : "images") +
                                                           " (describe, transcribe and translate take them)");
  }
  TaskPrompt p;
  p.user = Trim(r.text);
  if (p.user.empty() && r.media.empty()) return Status::Error("the input is empty: give the text on stdin or with -f FILE");
  p.input = DetectLanguage(p.user);
  // Without words of the user's, the prompt is in the language of the answer asked for.
  const bool to_chinese = r.to.rfind("zh", 0) == 0 || r.to == "cn" || r.to == "tw";
  const bool chinese_prompt = p.user.empty() ? to_chinese : p.input.Chinese();
  // The answer's language: the input's (mixed lines are answered in Chinese, in their script),
  // unless --to names another.
  const LanguageInfo* answer = nullptr;
  if (!r.to.empty()) {
    answer = FindLanguage(r.to);
    if (answer == nullptr) return Status::Error(StatusCode::kInvalidArgument, "unknown language '" + r.to + "' (one of " + KnownLanguages() + ")");
  } else if (r.task == "translate") {
    return Status::Error(StatusCode::kInvalidArgument, "translate needs a target language (--to, one of " + KnownLanguages() + ")");
  } else {
    // Text without letters (numbers, symbols) is answered in English.
    answer = chinese_prompt ? FindLanguage(p.input.traditional ? "zh-Hant" : "zh-Hans") : FindLanguage(std::string(p.input.tag));
    if (answer == nullptr) answer = FindLanguage("en");
  }
  p.answer_language = std::string(answer->tag);

  ASSIGN_OR_RETURN(p.system, PromptSection(r.task, chinese_prompt ? "zh" : "en"));
  if (p.user.empty()) {
    // The message is the media alone: the task's request in words, as a user would type it.
    ASSIGN_OR_RETURN(p.user, PromptSection(r.task, std::string(chinese_prompt ? "zh-" : "en-") + r.media + "-request"));
  }
  ReplaceAll(&p.system, "{answer_language}", chinese_prompt ? answer->zh : answer->en);
  if (r.task == "transcribe") {
    // Without --to the words stay in the language spoken; with it they are translated.
    const std::string target(chinese_prompt ? answer->zh : answer->en);
    std::string rule = r.to.empty() ? (chinese_prompt ? "用说话时的语言" : "in the language they are spoken in")
                                    : (chinese_prompt ? "用" + target + "：如果说的是别的语言，就翻译过来"
                                                      : "in " + target + ": if they are spoken in another language, translate them");
    ReplaceAll(&p.system, "{language_rule}", rule);
    if (r.to.empty()) p.answer_language = "as spoken";
  }
  ReplaceAll(&p.system, "{target}", chinese_prompt ? answer->zh : answer->en);

  std::string style = r.style.empty() ? "formal" : r.style;
  const Style* s = nullptr;
  for (const Style& candidate : kStyles) {
    if (candidate.name == style) s = &candidate;
  }
  if (s == nullptr) return Status::Error(StatusCode::kInvalidArgument, "unknown style '" + style + "' (formal, casual or concise)");
  ReplaceAll(&p.system, "{style}", chinese_prompt ? s->zh : s->en);

  std::string schema_block;
  if (!Trim(r.schema).empty()) {
    schema_block = std::string(chinese_prompt ? "数据库表结构：\n" : "The database schema:\n") + Trim(r.schema) + "\n";
  }
  ReplaceAll(&p.system, "{schema_block}", schema_block);

  std::string glossary_block;
  if (!r.glossary_tsv.empty()) {
    ASSIGN_OR_RETURN(std::vector<GlossaryEntry> glossary, ParseGlossary(r.glossary_tsv));
    p.terms = GlossaryTermsIn(glossary, p.user);
  }
  if (!p.terms.empty()) {
    // Listed compactly, one per line: what the text says -> what the answer must say.
    const bool translating = r.task == "translate";
    glossary_block = translating ? (chinese_prompt ? "这些术语按给定的译法翻译：\n" : "Render these terms as given:\n")
                                 : (chinese_prompt ? "这些术语原样保留：\n" : "Keep these terms exactly as written:\n");
    for (const GlossaryEntry& e : p.terms) {
      glossary_block += "- " + e.term;
      if (translating && !e.rendering.empty()) glossary_block += " → " + e.rendering;
      if (!e.note.empty()) glossary_block += " (" + e.note + ")";
      glossary_block += "\n";
    }
  }
  ReplaceAll(&p.system, "{glossary_block}", glossary_block);
  return p;
}

std::string RequiredGlossaryForm(const GlossaryEntry& entry, std::string_view task) {
  if (task == "translate") return entry.rendering.empty() ? entry.term : entry.rendering;
  if (task == "polish" || task == "rewrite") return entry.term;
  return std::string();
}

namespace {

bool IsAsciiWordByte(unsigned char c) { return std::isalnum(c) || c == '_'; }

// Where `text` holds `form` in another ASCII case, or with other runs of spaces where the form has
// one: the first such span that does not start or end inside an ASCII word. npos when none.
std::pair<size_t, size_t> FindLooseForm(std::string_view text, std::string_view form) {
  for (size_t start = 0; start < text.size(); ++start) {
    if (start > 0 && IsAsciiWordByte(text[start - 1]) && IsAsciiWordByte(form[0])) continue;
    size_t t = start, f = 0;
    while (f < form.size() && t < text.size()) {
      if (form[f] == ' ') {
        if (text[t] != ' ') break;
        while (t < text.size() && text[t] == ' ') ++t;
        while (f < form.size() && form[f] == ' ') ++f;
        continue;
      }
      if (std::tolower(static_cast<unsigned char>(form[f])) != std::tolower(static_cast<unsigned char>(text[t]))) break;
      ++f, ++t;
    }
    if (f < form.size()) continue;
    if (t < text.size() && IsAsciiWordByte(text[t]) && IsAsciiWordByte(form.back())) continue;
    return {start, t - start};
  }
  return {std::string_view::npos, 0};
}

// Replaces every span FindLooseForm finds of `pattern` in text with `replacement`; whether any.
bool ReplaceLooseForms(std::string* text, std::string_view pattern, const std::string& replacement) {
  bool replaced = false;
  for (size_t from = 0;;) {
    auto [at, length] = FindLooseForm(std::string_view(*text).substr(from), pattern);
    if (at == std::string_view::npos) return replaced;
    text->replace(from + at, length, replacement);
    from += at + replacement.size();
    replaced = true;
  }
}

}  // namespace

GlossaryOutcome HoldGlossary(std::string_view answer, const std::vector<GlossaryEntry>& terms, std::string_view task) {
  GlossaryOutcome out{std::string(answer), {}, {}};
  for (const GlossaryEntry& e : terms) {
    const std::string form = RequiredGlossaryForm(e, task);
    if (form.empty() || out.text.find(form) != std::string::npos) continue;
    // Another case or spacing of the form; else, translating, the source term left as it was.
    const bool repaired = ReplaceLooseForms(&out.text, form, form) || (form != e.term && ReplaceLooseForms(&out.text, e.term, form));
    (repaired ? out.repaired : out.missing).push_back(form);
  }
  return out;
}

std::string CleanTaskOutput(std::string_view answer) {
  std::string out = Trim(answer);
  // A lead-in line the model added despite the prompt: "Here is the polished message:" and kin.
  const size_t newline = out.find('\n');
  if (newline != std::string::npos) {
    const std::string first = Trim(std::string_view(out).substr(0, newline));
    const std::string lower = Lower(first);
    const bool lead_in = (EndsWith(first, ":") || EndsWith(first, "：")) &&
                         (StartsWithAny(lower, {"here is", "here's", "here are", "sure", "certainly", "okay", "ok,"}) ||
                          StartsWithAny(first, {"以下是", "下面是", "好的", "当然", "這是", "以下為", "润色后", "改写后", "翻译", "译文"}));
    if (lead_in) out = Trim(std::string_view(out).substr(newline + 1));
  }
  // A code fence around the whole answer (sql, mostly): its body.
  if (out.rfind("```", 0) == 0 && out.size() > 6 && EndsWith(out, "```")) {
    const size_t body = out.find('\n');
    if (body != std::string::npos && body < out.size() - 3) out = Trim(std::string_view(out).substr(body + 1, out.size() - 3 - body - 1));
  }
  // Quotes around the whole answer, when there are no others inside.
  for (auto [open, close] : {std::pair<std::string_view, std::string_view>{"\"", "\""}, {"“", "”"}, {"「", "」"}}) {
    if (out.size() >= open.size() + close.size() && out.rfind(open, 0) == 0 && EndsWith(out, close)) {
      const std::string_view inner = std::string_view(out).substr(open.size(), out.size() - open.size() - close.size());
      if (inner.find(open) == std::string_view::npos && inner.find(close) == std::string_view::npos) out = Trim(inner);
    }
  }
  return out;
}

std::vector<std::string> SplitText(std::string_view text, size_t max_bytes) {
  std::vector<std::string> out;
  max_bytes = std::max<size_t>(max_bytes, 16);
  while (!text.empty()) {
    if (text.size() <= max_bytes) {
      out.emplace_back(text);
      break;
    }
    // The last good cut within max_bytes: a paragraph, else a line, else a sentence end, else a
    // UTF-8 character boundary.
    size_t cut = std::string_view::npos;
    const std::string_view window = text.substr(0, max_bytes);
    for (std::string_view mark : {std::string_view("\n\n"), std::string_view("\n"), std::string_view("。"),
                                  std::string_view(". "), std::string_view("！"), std::string_view("？"),
                                  std::string_view("! "), std::string_view("? ")}) {
      const size_t at = window.rfind(mark);
      if (at != std::string_view::npos && at > max_bytes / 4) {
        cut = at + mark.size();
        break;
      }
    }
    if (cut == std::string_view::npos) {
      cut = max_bytes;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    }
    out.emplace_back(text.substr(0, cut));
    text.remove_prefix(cut);
  }
  return out;
}

}  // namespace gemlet::flows
