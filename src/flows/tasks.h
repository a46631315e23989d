// The everyday task presets (polish, summarize, rewrite, translate, explain, sql): their prompts,
// in the input's language, and the cleanup that leaves only the result.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "flows/language.h"

namespace gemlet::flows {

struct TaskInfo {
  std::string_view name;
  std::string_view summary;  // one line for --help
};
const std::vector<TaskInfo>& Tasks();

struct TaskRequest {
  std::string task = {};    // a Tasks() name
  std::string text = {};    // the user's text
  std::string style = {};   // rewrite: formal, casual or concise (default formal)
  std::string to = {};      // translate: the target ("zh", "zh-Hant", "en", "ja", ...); others: the answer's
                       // language instead of the input's ("" keeps the input's)
  std::string schema = {};  // sql: the tables, as CREATE TABLE text or any description
  std::string glossary_tsv = {};  // term TAB rendering [TAB note] lines; "#" lines and blank lines skipped
  // What the message carries besides its text: "image", "audio" or "" (describe takes an image,
  // transcribe a clip, translate either or text). With media the text may be empty: the task's own
  // request is then the message's words.
  std::string media = {};
};

struct GlossaryEntry {
  std::string term;
  std::string rendering;  // empty: the term itself
  std::string note;
};
// Errors name the line.
Result<std::vector<GlossaryEntry>> ParseGlossary(std::string_view tsv);
// The entries whose term occurs in text (ASCII letters compared case-insensitively).
std::vector<GlossaryEntry> GlossaryTermsIn(const std::vector<GlossaryEntry>& glossary, std::string_view text);

// What the answer must hold for a glossary entry found in the input: polish and rewrite keep the
// term verbatim, translate renders it as given (the term itself without a rendering); the other
// tasks only list the terms (a summary may leave a term out). Empty: nothing required.
std::string RequiredGlossaryForm(const GlossaryEntry& entry, std::string_view task);

struct GlossaryOutcome {
  std::string text;                    // the answer, repaired
  std::vector<std::string> repaired;   // the required forms a repair put in
  std::vector<std::string> missing;    // the required forms still not in it
};
// Holds an answer to the glossary: a required form the answer lacks is put in where the answer has
// it in another ASCII case or spacing ("iphone  15" -> "iPhone 15"), or, when translating, where the
// answer left the source term untranslated (毛肚 -> "beef tripe"). Whatever is still absent is
// listed as missing; nothing else in the answer changes.
GlossaryOutcome HoldGlossary(std::string_view answer, const std::vector<GlossaryEntry>& terms, std::string_view task);

struct TaskPrompt {
  std::string system;  // the task's instructions
  std::string user;    // the text as given
  LanguageGuess input;
  std::string answer_language;  // the tag the answer is asked in: "en", "zh-Hans", "zh-Hant", or translate's target
  std::vector<GlossaryEntry> terms;  // the glossary's terms found in the text, as listed to the model
};
// Errors: kInvalidArgument for an unknown task, style or target language (the request's options);
// kError for empty text or a bad glossary line (its input).
Result<TaskPrompt> BuildTaskPrompt(const TaskRequest& request);

// The model's answer without what a filter must not print: surrounding whitespace, a lead-in line
// ("Here is the polished message:", "以下是润色后的内容："), a code fence around the whole answer,
// quotes around the whole answer.
std::string CleanTaskOutput(std::string_view answer);

// Splits text for summarizing in parts: pieces of at most max_bytes, cut at a paragraph, line or
// sentence end where there is one (never inside a UTF-8 character).
std::vector<std::string> SplitText(std::string_view text, size_t max_bytes);

}  // namespace gemlet::flows
