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

Result<TaskReply> RunTaskRound(Session& session, std::string_view input, const TaskOptions& o,
                               const StreamCallback& on_text, int round) {
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
  out.input_language = flows::LanguageTag(p.input.language);
  out.answer_language = p.answer_language;
  for (const flows::GlossaryEntry& e : p.terms) {
    out.glossary_terms.push_back(e.term);
    out.glossary.push_back({e.term, e.rendering, e.note});
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

std::string DetectLanguageTag(std::string_view text) { return flows::LanguageTag(flows::DetectLanguage(text).language); }

Result<TaskReply> RunTask(Session& session, std::string_view input, const TaskOptions& options, const StreamCallback& on_text) {
  return RunTaskRound(session, input, options, on_text, 0);
}

}  // namespace gemlet
