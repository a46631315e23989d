// The everyday task presets over a session: polish, summarize, rewrite, translate, explain, sql.
// Each builds its prompt in the input's language (English, Simplified or Traditional Chinese;
// Chinese with English words in it is answered in Chinese), lists the glossary's terms that occur
// in the input, generates, and returns only the result (no thought, no lead-in line, no fences).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gemlet/export.h"
#include "gemlet/gemlet.hpp"

namespace gemlet {

struct TaskOptions {
  std::string task;          // one of TaskNames()
  std::string style = {};    // rewrite: "formal" (default), "casual" or "concise"
  std::string to = {};       // translate: the target ("zh", "zh-Hant", "en", "ja", ...); others: answer
                             // in this language instead of the input's
  std::string schema = {};   // sql: the tables (CREATE TABLE text or a description)
  std::string glossary = {}; // TSV text: term TAB rendering [TAB note] per line
  bool thinking = false;     // Gemma 4: think first (the thought is not part of the output)
  GenerateOptions generate = {};
};

struct TaskReply {
  std::string output;           // the result alone
  std::string input_language;   // "en", "zh-Hans", "zh-Hant", "mixed" or "unknown"
  std::string answer_language;  // the language the answer was asked in
  std::vector<std::string> glossary_terms;  // the glossary's terms found in the input
  int parts = 1;                // summarize: how many parts a long input was summarized in
  GenerationStats stats;        // of the last generation
};

// A task's prompt as chat messages, for callers that generate themselves (a server batching it with
// other requests): the system instructions and the user's text. Then CleanTaskOutput(reply.text).
struct TaskPrompt {
  std::vector<Message> messages;
  std::string input_language;
  std::string answer_language;
  std::vector<std::string> glossary_terms;
};
GEMLET_CXX_API Result<TaskPrompt> TaskMessages(std::string_view input, const TaskOptions& options);
// An answer without what the result must not hold: a lead-in line ("Here is the polished
// message:"), a code fence or quotes around the whole answer, surrounding whitespace.
GEMLET_CXX_API std::string CleanTaskOutput(std::string_view answer);

GEMLET_CXX_API std::vector<std::string> TaskNames();
// One line per task: "polish: fix grammar, spelling and phrasing; ...".
GEMLET_CXX_API std::string TaskSummary(const std::string& task);
// The input-language tag the presets go by: "en", "zh-Hans", "zh-Hant", "mixed" or "unknown".
GEMLET_CXX_API std::string DetectLanguageTag(std::string_view text);

// Runs a task on `input` in `session` (its cache is reused for the prompt's prefix and left
// holding this exchange). An input too long for the session's context, with room for the answer
// (generate.max_tokens), fails with kContextFull naming both sizes, except for summarize, which
// summarizes it in parts and then the parts' summaries together. An unknown task, style or
// language fails with kInvalidArgument; empty input or a bad glossary line with kError. on_text, if given, gets
// the answer's raw text as it is generated (the output is cleaned at the end).
GEMLET_CXX_API Result<TaskReply> RunTask(Session& session, std::string_view input, const TaskOptions& options,
                                         const StreamCallback& on_text = {});

}  // namespace gemlet
