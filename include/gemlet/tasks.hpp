// The everyday task presets over a session: polish, summarize, rewrite, translate, explain, sql;
// describe (an image) and transcribe (a clip), and translate of what an image or clip holds.
// Each answers in the input's language (one of DetectableLanguages(); Chinese with English words in
// it is answered in Chinese, with the Chinese prompt), lists the glossary's terms that occur
// in the input, generates, and returns only the result (no thought, no lead-in line, no fences).
// The glossary holds: polish and rewrite keep each term found verbatim, translate renders it as
// given; an answer that has a term in another ASCII case or spacing, or (translating) left it
// untranslated, is repaired, and a term still absent is reported (TaskReply::glossary_missing).
#pragma once

#include <span>
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
  // describe: the image; transcribe: the clip; translate: either, or none for text. Placed before the
  // input's text, which may then be empty (the task's own request is used). transcribe and translate
  // take a long clip as its pieces (Engine::EncodeAudioPieces), in order: one generation each, the
  // texts joined as JoinTranscripts joins them (TaskReply::parts says how many).
  std::vector<std::shared_ptr<const EncodedMedia>> media = {};
  // A vertical tool's fine-tune (a "LegalGemma" on the shared base): the LoRA adapters the task runs
  // with. Empty: the session's own. Given: the session runs these from now on (Session::SetAdapters).
  std::vector<AdapterUse> adapters = {};
};

// A way an answer breaks the task's contract (docs/tasks.md, "The output contract"): the CLI exits
// non-zero on any, the output is never passed off as a result.
enum class TaskViolationKind {
  kNotAResult,  // empty, or a lead-in ("Here is ...", "Sure!") that could not be taken off
  kIncomplete,  // cut off at the token limit
  kUnrelated,   // polish, rewrite: keeps too few of the input's words to be a version of it
  kLanguage,    // in another language than the one it was asked in
  kGlossary,    // lacks a glossary term it had to hold
};
struct TaskViolation {
  TaskViolationKind kind;
  std::string detail;  // one line, naming what is wrong: "the answer is in zh-Hans, not en"
};

struct TaskReply {
  std::string output;           // the result alone
  std::string input_language;   // a tag of DetectableLanguages(), "mixed" or "unknown"
  std::string answer_language;  // the language the answer was asked in
  std::vector<std::string> glossary_terms;  // the glossary's terms found in the input
  // What the answer had to hold for them (polish, rewrite: the term; translate: its rendering):
  // those put in by a repair, and those it still lacks.
  std::vector<std::string> glossary_repaired;
  std::vector<std::string> glossary_missing;
  int parts = 1;                // summarize: how many parts a long input was summarized in; a clip's pieces
  GenerationStats stats;        // of the last generation (a clip's pieces: the token counts added up)
  std::vector<TaskViolation> violations;  // empty: the contract holds (CheckTaskContract)
};

// A task's prompt as chat messages, for callers that generate themselves (a server batching it with
// other requests): the system instructions and the user's text. Then FinishTaskOutput(reply.text).
struct GlossaryTerm {
  std::string term;       // as the glossary spells it
  std::string rendering;  // translate: what it becomes ("" : the term itself)
  std::string note;
};
struct TaskPrompt {
  std::string task;
  std::vector<Message> messages;
  std::string input_language;
  std::string answer_language;
  std::vector<std::string> glossary_terms;  // the terms found in the input, as listed to the model
  std::vector<GlossaryTerm> glossary;       // the same, whole
};
GEMLET_CXX_API Result<TaskPrompt> TaskMessages(std::string_view input, const TaskOptions& options);
// The prompt RunTask evaluates for it: the chat with options.media placed before the user's words
// (one piece of a clip at a time: pass a TaskOptions whose media is that piece).
GEMLET_CXX_API Result<Prompt> TaskChatPrompt(const Engine& engine, const TaskPrompt& prompt, const TaskOptions& options);
// The transcripts of a clip's pieces as one text: a space between two pieces, nothing where the text
// on either side of the seam is Chinese or Japanese (no spaces between their words); empty pieces
// left out.
GEMLET_CXX_API std::string JoinTranscripts(std::span<const std::string> pieces);

struct TaskOutput {
  std::string text;  // the result alone
  std::vector<std::string> glossary_repaired;
  std::vector<std::string> glossary_missing;
};
// The model's answer to a TaskMessages prompt as RunTask returns it: CleanTaskOutput, then the
// glossary held (repairs made, what is still missing reported).
GEMLET_CXX_API TaskOutput FinishTaskOutput(std::string_view answer, const TaskPrompt& prompt);
// An answer without what the result must not hold: a lead-in line ("Here is the polished
// message:"), a code fence or quotes around the whole answer, surrounding whitespace.
GEMLET_CXX_API std::string CleanTaskOutput(std::string_view answer);

// The contract a finished answer is held to: a result at all (not empty, no lead-in left, not cut
// off: stop is how its generation ended; polish and rewrite: a version of the input, keeping at
// least a third of its distinct words, or Han characters), in the language it was asked in (polish, rewrite,
// summarize, explain, translate into en / zh / zh-Hant; judged by DetectLanguageTag, and only where
// the answer has text enough to tell), holding the glossary's required terms.
GEMLET_CXX_API std::vector<TaskViolation> CheckTaskContract(std::string_view input, const TaskPrompt& prompt,
                                                            const TaskOutput& output, StopReason stop);
GEMLET_CXX_API const char* TaskViolationName(TaskViolationKind kind);  // "not-a-result", "incomplete", ...

GEMLET_CXX_API std::vector<std::string> TaskNames();
// One line per task: "polish: fix grammar, spelling and phrasing; ...".
GEMLET_CXX_API std::string TaskSummary(const std::string& task);
// The input-language tag the presets go by: a tag of DetectableLanguages() ("fr", "zh-Hant"), "mixed"
// (Chinese with English words: answered in Chinese) or "unknown" (no letters). Malformed UTF-8 is
// read with its bad bytes as spaces; `gemlet langid` refuses it instead.
GEMLET_CXX_API std::string DetectLanguageTag(std::string_view text);

struct LanguageName {
  std::string tag;   // BCP-47: "en", "nb", "zh-Hans"
  std::string name;  // in English: "Norwegian Bokmål"
};
// The languages DetectLanguageTag answers, and that TaskOptions::to takes, English first.
GEMLET_CXX_API std::vector<LanguageName> DetectableLanguages();

// Runs a task on `input` in `session` (its cache is reused for the prompt's prefix and left
// holding this exchange). An input too long for the session's context, with room for the answer
// (generate.max_tokens), fails with kContextFull naming both sizes, except for summarize, which
// summarizes it in parts and then the parts' summaries together. An unknown task, style or
// language fails with kInvalidArgument; empty input or a bad glossary line with kError. options.adapters,
// when given, are set on the session first. on_text, if given, gets
// the answer's raw text as it is generated (the output is cleaned at the end).
GEMLET_CXX_API Result<TaskReply> RunTask(Session& session, std::string_view input, const TaskOptions& options,
                                         const StreamCallback& on_text = {});

}  // namespace gemlet
