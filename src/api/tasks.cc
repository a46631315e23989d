// The task presets of include/gemlet/tasks.hpp: flows/ builds the prompt and cleans the answer,
// the session generates it; long inputs are summarized in parts.
#include "gemlet/tasks.hpp"

#include <algorithm>

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
  flows::GlossaryOutcome held = flows::HoldGlossary(flows::CleanTaskOutput(answer), terms, prompt.task);
  return {std::move(held.text), std::move(held.repaired), std::move(held.missing)};
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
  return RunTaskRound(session, input, options, on_text, 0);
}

}  // namespace gemlet
