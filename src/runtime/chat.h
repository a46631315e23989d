// ChatSession: a multi-turn conversation over one Session. Each turn re-renders the conversation
// with the model's chat format and evaluates only the tokens that differ from what the KV cache
// already holds, so earlier turns are not processed again.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat_format.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet::runtime {

// The chat's prompt as tokens, the tokenizer's BOS first: markup parsed for its control tokens,
// message content not (a user typing "<end_of_turn>" cannot end a turn).
Result<std::vector<int32_t>> EncodeChat(const Engine& engine, const std::vector<Message>& messages,
                                        const ChatRenderOptions& options);

// Turns dropped from a conversation: how many messages, their tokens, where they began in the cache,
// whether the cache was shifted over them (else the next turn finds the difference) and the kept
// tokens evaluated again for the shift.
struct DroppedTurns {
  int messages = 0;
  int tokens = 0;
  int begin = 0;
  bool shifted = false;
  int reevaluated = 0;
};

// A message of the conversation and, for a user turn, what gemlet put before its text: the summary
// of earlier turns dropped to make room. The preface is rendered with the message (the model reads
// it) but it is not the user's words.
struct ChatTurn : Message {
  std::string preface;
};

// Level 2 of a conversation's memory: when turns are dropped, the model writes a short summary of
// them, which the next user turn carries as its preface. Rolling: a dropped turn's own preface (an
// older summary) is part of what the next summary covers.
struct SummaryOptions {
  bool enabled = false;
  int max_tokens = 96;  // the summary's length at most
};

class ChatSession {
 public:
  ChatSession(std::unique_ptr<Session> session, const SamplingOptions& sampling);

  // Sends a user message and streams the model's answer. The answer (without its thought channel)
  // joins the conversation; on error or cancellation the conversation stays usable. When the
  // conversation and room for the answer (options.max_tokens, at most half the context) no longer
  // fit, the oldest user/assistant pairs are dropped (the system message stays) and the cache is
  // shifted over them without evaluating the kept text again (Session::Discard).
  // The reply's stats carry the turn's: the prefix reused from the cache (cached_tokens), the
  // messages dropped and summarized to make room.
  Result<Generation> Send(const std::string& user_text, const GenerateOptions& options,
                          const GenerationControls& controls, const StreamCallback& on_text);
  // A user message with images or audio (Message::parts): each is evaluated once, and stays in the
  // cache with its turn until the turn is dropped.
  Result<Generation> Send(std::vector<ContentPart> parts, const GenerateOptions& options,
                          const GenerationControls& controls, const StreamCallback& on_text);

  void SetSystem(const std::string& system);  // empty: no system message
  void SetThinking(bool on) { thinking_ = on; }
  void SetSummaries(const SummaryOptions& options) { summaries_ = options; }
  const SummaryOptions& summaries() const { return summaries_; }
  // The summary in effect: the one waiting for the next user turn, else the newest turn's preface.
  std::string summary() const;
  // Sampling for the next turns; the penalty window is refilled from the history each turn.
  void SetSampling(const SamplingOptions& params) { sampler_ = Sampler(params, session_->engine().config().n_vocab); }
  bool thinking() const { return thinking_; }
  void Reset();  // forget the conversation (keeps the system message)

  const std::vector<ChatTurn>& messages() const { return messages_; }
  Status Save(const std::string& path) const;  // JSON: {"system": ..., "messages": [...]}
  Status Load(const std::string& path);        // replaces the conversation; evaluated on the next Send
  Status SetMessages(std::vector<Message> messages);  // the same, from messages in hand
  // The whole state, KV cache included (Session::SaveState): resumed with nothing evaluated again.
  Status SaveState(const std::string& path) const;
  Status LoadState(const std::string& path);

  // Memory pressure between turns: drops the oldest user/assistant pairs (the last pair stays)
  // until the conversation renders to at most `limit` tokens, and gives their KV pages back.
  Result<DroppedTurns> ShedOldTurns(int limit);

  // The tokens the whole conversation renders to (with the generation prompt).
  Result<std::vector<int32_t>> RenderTokens(bool add_generation_prompt) const;

  Session& session() { return *session_; }
  // The last turn's stats (Send's reply's), and the prompt tokens it evaluated (the new ones, and any
  // history evaluated again after a rollback; not the generated tokens fed back).
  const GenerationStats& last_turn() const { return last_turn_; }
  int last_turn_evaluated() const { return last_turn_evaluated_; }

  // The request the model answers with a summary of `dropped` (each turn with its preface): ours,
  // in Chinese when the turns are mostly Chinese, else in English.
  static std::string SummaryPrompt(const std::vector<ChatTurn>& dropped);
  // The preface a summary becomes, in the same language as its prompt.
  static std::string SummaryPreface(const std::string& summary, const std::vector<ChatTurn>& dropped);

 private:
  // Renders system + messages to tokens, with their media.
  Result<Prompt> Render(const std::vector<ChatTurn>& messages, bool add_generation_prompt) const;
  Result<Generation> SendTurn(ChatTurn turn, const GenerateOptions& options, const GenerationControls& controls,
                              const StreamCallback& on_text);
  std::string MessagesJson() const;
  Status SetFromJson(const std::string& text, const std::string& what);
  // Drops the oldest pairs of messages_ (the last message, the new user turn, always stays) until
  // the rendered conversation plus `room` tokens fits in the context; shifts the cache over them.
  Status MakeRoom(int room);
  // Drops the oldest pairs, keeping the last `keep` messages, until the conversation renders to at
  // most `limit` tokens; the last `uncached` messages are not in the cache yet. Shifts the cache
  // over the dropped tokens where it can.
  Result<DroppedTurns> DropOldest(int limit, size_t keep, size_t uncached);
  // Has the model summarize unsummarized_ in a session of its own (sized for the request, freed
  // after), so the conversation's cache is untouched; on success pending_preface_ holds the result.
  Status Summarize(const GenerationControls& controls);

  std::unique_ptr<Session> session_;
  Sampler sampler_;
  std::string system_;
  std::vector<ChatTurn> messages_;  // user / assistant turns
  bool thinking_ = false;
  SummaryOptions summaries_;
  std::vector<ChatTurn> unsummarized_;  // dropped, not yet summarized (a summary that failed retries)
  std::string pending_preface_;        // a summary waiting for the next user turn to carry it
  GenerationStats last_turn_;
  int last_turn_evaluated_ = 0;
};

}  // namespace gemlet::runtime
