// The task presets of include/gemlet/tasks.hpp: flows/ builds the prompt and cleans the answer,
// the session generates it; long inputs are summarized in parts.
#include "gemlet/tasks.hpp"

#include <algorithm>
#include <cctype>

#include "flows/lead_in.h"
#include "flows/tasks.h"

namespace gemlet {
namespace {

constexpr int kMaxSummaryRounds = 4;  // parts of parts of ...: a book needs three at 4k tokens

int AnswerRoom(const Session& session, const TaskOptions& o) {
  const int asked = o.generate.max_tokens > 0 ? o.generate.max_tokens : 1024;
  return std::min(asked, session.n_ctx() / 2);
}

// The task's chat with its media placed before the user's words.
Result<Prompt> TaskPromptTokens(const Engine& engine, TaskPrompt prompt, const TaskOptions& o) {
  ChatOptions chat;
  chat.thinking = o.thinking;
  if (o.media.empty()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> tokens, engine.TokenizeChat(prompt.messages, chat));
    return Prompt{std::move(tokens), {}};
  }
  Message& user = prompt.messages.back();
  for (const auto& m : o.media) {
    if (!m) return Status::Error(StatusCode::kInvalidArgument, "a media entry of the task is empty");
    user.parts.push_back({"", m});
  }
  user.parts.push_back({std::move(user.content), nullptr});
  user.content.clear();
  return engine.ChatPrompt(prompt.messages, chat);
}

// The first (last) code point of UTF-8 text, 0 when empty or not UTF-8 there.
char32_t FirstCodePoint(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = static_cast<unsigned char>(s[0]);
  const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || s.size() < static_cast<size_t>(n)) return 0;
  char32_t c = n == 1 ? b : b & (0x7F >> n);
  for (int i = 1; i < n; ++i) c = (c << 6) | (static_cast<unsigned char>(s[static_cast<size_t>(i)]) & 0x3F);
  return c;
}
char32_t LastCodePoint(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  return i == 0 ? 0 : FirstCodePoint(s.substr(i - 1));
}

// Written without spaces between words: Chinese characters, kana, and their punctuation and
// full-width forms (Hangul is not: Korean puts spaces between words).
bool Unspaced(char32_t c) {
  return (c >= 0x3000 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFF00 && c <= 0xFFEF) || (c >= 0x20000 && c <= 0x3FFFF);
}

const char* Seam(std::string_view left, std::string_view right) {
  return Unspaced(LastCodePoint(left)) || Unspaced(FirstCodePoint(right)) ? "" : " ";
}

Result<TaskReply> RunTaskRound(Session& session, std::string_view input, const TaskOptions& o,
                               const StreamCallback& on_text, int round);

// A clip in pieces (Engine::EncodeAudioPieces): transcribe or translate each on its own, then join
// the texts. The stream gets each piece's text, with the seam JoinTranscripts puts between them.
Result<TaskReply> RunPieces(Session& session, std::string_view input, const TaskOptions& o, const StreamCallback& on_text) {
  std::vector<std::string> texts;
  TaskReply whole;
  std::string streamed_last;  // the text streamed so far ends with this piece of it
  for (size_t i = 0; i < o.media.size(); ++i) {
    TaskOptions one = o;
    one.media = {o.media[i]};
    bool seam_due = i > 0;
    StreamCallback stream;
    if (on_text) {
      stream = [&](ChunkKind kind, std::string_view text) {
        if (kind == ChunkKind::kText && seam_due && !text.empty()) {
          seam_due = false;
          const std::string seam = Seam(streamed_last, text);
          if (!seam.empty() && !on_text(kind, seam)) return false;
        }
        if (kind == ChunkKind::kText && !text.empty()) streamed_last = std::string(text);
        return on_text(kind, text);
      };
    }
    ASSIGN_OR_RETURN(TaskReply r, RunTaskRound(session, input, one, stream, 0));
    texts.push_back(r.output);
    if (i == 0) {
      whole.input_language = r.input_language;
      whole.answer_language = r.answer_language;
      whole.glossary_terms = r.glossary_terms;
    }
    const auto merge = [](std::vector<std::string>* into, const std::vector<std::string>& from) {
      for (const std::string& t : from) {
        if (std::find(into->begin(), into->end(), t) == into->end()) into->push_back(t);
      }
    };
    merge(&whole.glossary_repaired, r.glossary_repaired);
    whole.violations.insert(whole.violations.end(), r.violations.begin(), r.violations.end());
    merge(&whole.glossary_missing, r.glossary_missing);
    const GenerationStats sum = whole.stats;
    whole.stats = r.stats;
    whole.stats.prompt_tokens += sum.prompt_tokens;
    whole.stats.cached_tokens += sum.cached_tokens;
    whole.stats.generated_tokens += sum.generated_tokens;
  }
  whole.output = JoinTranscripts(texts);
  whole.parts = static_cast<int>(o.media.size());
  return whole;
}

// Pieces of one clip: several audio media for a task that takes one clip at a time.
bool IsPieces(const TaskOptions& o) {
  if (o.media.size() < 2 || (o.task != "transcribe" && o.task != "translate")) return false;
  return std::all_of(o.media.begin(), o.media.end(), [](const auto& m) { return m && m->kind == MediaKind::kAudio; });
}

Result<TaskReply> RunTaskRound(Session& session, std::string_view input, const TaskOptions& o,
                               const StreamCallback& on_text, int round) {
  if (IsPieces(o)) return RunPieces(session, input, o, on_text);
  ASSIGN_OR_RETURN(TaskPrompt prompt, TaskMessages(input, o));
  const Engine& engine = session.engine();
  ASSIGN_OR_RETURN(Prompt tokens_and_media, TaskPromptTokens(engine, prompt, o));
  const std::vector<int32_t>& tokens = tokens_and_media.tokens;
  const std::string& text = prompt.messages.back().content;

  const int room = AnswerRoom(session, o);
  const int fits = session.n_ctx() - room;
  TaskReply reply;
  reply.input_language = prompt.input_language;
  reply.answer_language = prompt.answer_language;
  reply.glossary_terms = prompt.glossary_terms;

  if (static_cast<int>(tokens.size()) > fits) {
    if (o.task != "summarize" || round >= kMaxSummaryRounds) {
      return Status::Error(StatusCode::kContextFull,
                           "the input and the " + o.task + " prompt are " + std::to_string(tokens.size()) +
                               " tokens; with room for the answer (" + std::to_string(room) + "), the context holds " +
                               std::to_string(fits) + (o.task == "summarize" ? "" : " (summarize takes long inputs in parts)"));
    }
    // Parts sized by this input's own bytes per token, with a tenth to spare for uneven text.
    const int overhead = static_cast<int>(tokens.size()) - static_cast<int>(engine.Tokenize(text).size());
    const double bytes_per_token = static_cast<double>(text.size()) / std::max<size_t>(1, tokens.size() - overhead);
    const size_t part_bytes = static_cast<size_t>(std::max(16.0, (fits - overhead) * bytes_per_token * 0.9));
    std::string joined;
    int parts = 0;
    for (const std::string& part : flows::SplitText(text, part_bytes)) {
      ASSIGN_OR_RETURN(TaskReply p, RunTaskRound(session, part, o, {}, round + 1));
      joined += (joined.empty() ? "" : "\n") + p.output;
      parts += p.parts;
    }
    ASSIGN_OR_RETURN(TaskReply whole, RunTaskRound(session, joined, o, on_text, round + 1));
    whole.parts = parts;
    whole.input_language = reply.input_language;
    whole.glossary_terms = reply.glossary_terms;  // summarize only lists them: none is required
    return whole;
  }

  GenerateOptions g = o.generate;
  g.max_tokens = room;
  StreamCallback answer_only;
  if (on_text) {
    answer_only = [&on_text](ChunkKind kind, std::string_view text) { return kind != ChunkKind::kText || on_text(kind, text); };
  }
  ASSIGN_OR_RETURN(Reply r, session.Complete(tokens_and_media, g, answer_only));
  TaskOutput out = FinishTaskOutput(r.text, prompt);
  reply.violations = CheckTaskContract(input, prompt, out, r.stats.stop);
  reply.output = std::move(out.text);
  reply.glossary_repaired = std::move(out.glossary_repaired);
  reply.glossary_missing = std::move(out.glossary_missing);
  reply.stats = r.stats;
  return reply;
}

}  // namespace

Result<TaskPrompt> TaskMessages(std::string_view input, const TaskOptions& o) {
  flows::TaskRequest request{o.task, std::string(input), o.style, o.to, o.schema, o.glossary};
  // A task takes one kind at a time: images or clips.
  for (const auto& m : o.media) {
    if (m && o.media[0] && m->kind != o.media[0]->kind) {
      return Status::Error(StatusCode::kInvalidArgument, "a task takes images or audio, not both at once");
    }
  }
  if (!o.media.empty() && o.media[0]) request.media = o.media[0]->kind == MediaKind::kAudio ? "audio" : "image";
  ASSIGN_OR_RETURN(flows::TaskPrompt p, flows::BuildTaskPrompt(request));
  TaskPrompt out;
  out.task = o.task;
  out.messages = {{"system", p.system}, {"user", p.user}};
  out.input_language = std::string(p.input.tag);
  out.answer_language = p.answer_language;
  for (const flows::GlossaryEntry& e : p.terms) {
    out.glossary_terms.push_back(e.term);
    out.glossary.push_back({e.term, e.rendering, e.note});
  }
  return out;
}

Result<Prompt> TaskChatPrompt(const Engine& engine, const TaskPrompt& prompt, const TaskOptions& options) {
  return TaskPromptTokens(engine, prompt, options);
}

std::string JoinTranscripts(std::span<const std::string> pieces) {
  std::string out;
  for (const std::string& piece : pieces) {
    if (piece.empty()) continue;
    if (!out.empty()) out += Seam(out, piece);
    out += piece;
  }
  return out;
}

std::string CleanTaskOutput(std::string_view answer) { return flows::CleanTaskOutput(answer); }

TaskOutput FinishTaskOutput(std::string_view answer, const TaskPrompt& prompt) {
  std::vector<flows::GlossaryEntry> terms;
  for (const GlossaryTerm& t : prompt.glossary) terms.push_back({t.term, t.rendering, t.note});
  std::string text = flows::CleanTaskOutput(answer);
  // Lead-ins CleanTaskOutput cannot tell from the result without the input ("Sure! ...", one on the
  // result's own line), one after another: "Sure! Here is the polished text: "..."".
  const std::string_view input = prompt.messages.empty() ? std::string_view() : std::string_view(prompt.messages.back().content);
  for (int i = 0; i < 3; ++i) {
    const size_t cut = flows::LeadInLength(text, input);
    if (cut == 0) break;
    text = flows::CleanTaskOutput(std::string_view(text).substr(cut));
  }
  flows::GlossaryOutcome held = flows::HoldGlossary(text, terms, prompt.task);
  return {std::move(held.text), std::move(held.repaired), std::move(held.missing)};
}

namespace {
// The tasks whose answer is in the language asked for: the text tasks (sql answers in SQL; describe
// and transcribe as the picture's text or the speech has it).
bool LanguageChecked(std::string_view task) {
  return task == "polish" || task == "rewrite" || task == "summarize" || task == "explain" || task == "translate";
}

// Whether an answer DetectLanguageTag reads as `got` is in another language than `want`. Only what
// the detector tells apart with confidence on short text: not mixed or unknown text, not Chinese
// read as Simplified where Traditional was asked (it reads Chinese without characters only
// Traditional writes as Simplified), and not the close pairs it confuses on a few words
// (bench/RESULTS.md: bs/hr/sr/sl, es/pt/gl/ca, da/nb/sv, cs/sk, id/ms), where a wrong exit would
// refuse a right answer.
bool OtherLanguage(const std::string& want, const std::string& got) {
  if (want.empty() || got.empty() || want == got) return false;
  for (const char* vague : {"mixed", "unknown"}) {
    if (want == vague || got == vague) return false;
  }
  if (want == "zh-Hant" && got == "zh-Hans") return false;
  static const std::vector<std::vector<std::string>> kClose = {
      {"bs", "hr", "sr", "sl"}, {"es", "pt", "gl", "ca"}, {"da", "nb", "sv"}, {"cs", "sk"}, {"id", "ms"}};
  for (const auto& group : kClose) {
    const bool has_want = std::find(group.begin(), group.end(), want) != group.end();
    const bool has_got = std::find(group.begin(), group.end(), got) != group.end();
    if (has_want && has_got) return false;
  }
  return true;
}

// The distinct words of a text as the content check counts them: runs of ASCII letters and digits,
// lower-cased, and each Han character (Chinese has no spaces to cut words at).
std::vector<std::string> ContentUnits(std::string_view text) {
  std::vector<std::string> units;
  std::string word;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (std::isalnum(b)) {
      word += static_cast<char>(std::tolower(b));
      ++i;
      continue;
    }
    if (!word.empty()) units.push_back(std::move(word)), word.clear();
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    const char32_t c = FirstCodePoint(text.substr(i));
    if ((c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xF900 && c <= 0xFAFF)) {
      units.emplace_back(text.substr(i, static_cast<size_t>(n)));
    }
    i += static_cast<size_t>(n);
  }
  if (!word.empty()) units.push_back(std::move(word));
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  return units;
}

// The share of the input's distinct words the answer has too.
double ContentKept(std::string_view input, std::string_view answer) {
  const std::vector<std::string> in = ContentUnits(input), out = ContentUnits(answer);
  size_t kept = 0;
  for (const std::string& u : in) kept += std::binary_search(out.begin(), out.end(), u);
  return in.empty() ? 1.0 : static_cast<double>(kept) / static_cast<double>(in.size());
}
}  // namespace

std::vector<TaskViolation> CheckTaskContract(std::string_view input, const TaskPrompt& prompt, const TaskOutput& output,
                                             StopReason stop) {
  std::vector<TaskViolation> out;
  const std::string& text = output.text;
  if (text.empty()) {
    out.push_back({TaskViolationKind::kNotAResult, "the answer is empty"});
  } else if (flows::OpensLikeLeadIn(text, input)) {
    size_t end = std::min<size_t>(text.find('\n'), 40);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a character
    const std::string opening = text.substr(0, end);
    out.push_back({TaskViolationKind::kNotAResult, "the answer opens with a lead-in, not the result: '" + opening + "'"});
  }
  if (stop == StopReason::kMaxTokens || stop == StopReason::kContextFull) {
    out.push_back({TaskViolationKind::kIncomplete, "the answer was cut off at the token limit (-n): it is not whole"});
  }
  bool other_language = false;
  if (!text.empty() && LanguageChecked(prompt.task)) {
    const std::string got = DetectLanguageTag(text);
    other_language = OtherLanguage(prompt.answer_language, got);
    if (other_language) {
      out.push_back({TaskViolationKind::kLanguage, "the answer is in " + got + ", not " + prompt.answer_language});
    }
  }
  // A polish or a rewrite says the same thing, mostly in the same words: an answer that shares
  // under a third of them answers something else (a model that ignored the text). Four words at
  // least, so that a short line reworded is not doubted. Not across languages (--to, or an answer in
  // another: that breach is the language's), where no words are shared by nature.
  const bool same_language = prompt.input_language == prompt.answer_language || prompt.input_language == "mixed";
  if (!text.empty() && !other_language && same_language && (prompt.task == "polish" || prompt.task == "rewrite") &&
      ContentUnits(input).size() >= 4) {
    const double kept = ContentKept(input, text);
    if (kept < 1.0 / 3) {
      out.push_back({TaskViolationKind::kUnrelated, "the answer keeps " + std::to_string(static_cast<int>(kept * 100)) +
                                                        "% of the input's words: it is not a " + prompt.task + " of it"});
    }
  }
  for (const std::string& term : output.glossary_missing) {
    out.push_back({TaskViolationKind::kGlossary, "the answer lacks the glossary's '" + term + "'"});
  }
  return out;
}

const char* TaskViolationName(TaskViolationKind kind) {
  switch (kind) {
    case TaskViolationKind::kNotAResult: return "not-a-result";
    case TaskViolationKind::kIncomplete: return "incomplete";
    case TaskViolationKind::kUnrelated: return "unrelated";
    case TaskViolationKind::kLanguage: return "language";
    case TaskViolationKind::kGlossary: return "glossary";
  }
  return "?";
}

std::vector<std::string> TaskNames() {
  std::vector<std::string> out;
  for (const flows::TaskInfo& t : flows::Tasks()) out.emplace_back(t.name);
  return out;
}

std::string TaskSummary(const std::string& task) {
  for (const flows::TaskInfo& t : flows::Tasks()) {
    if (t.name == task) return std::string(t.summary);
  }
  return std::string();
}

std::string DetectLanguageTag(std::string_view text) { return std::string(flows::DetectLanguage(text).tag); }

std::vector<LanguageName> DetectableLanguages() {
  std::vector<LanguageName> out;
  for (const flows::LanguageInfo& l : flows::SupportedLanguages()) out.push_back({std::string(l.tag), std::string(l.en)});
  return out;
}

Result<TaskReply> RunTask(Session& session, std::string_view input, const TaskOptions& options, const StreamCallback& on_text) {
  if (!options.adapters.empty()) {
    RETURN_IF_ERROR(session.SetAdapters(options.adapters));
  }
  return RunTaskRound(session, input, options, on_text, 0);
}

}  // namespace gemlet
